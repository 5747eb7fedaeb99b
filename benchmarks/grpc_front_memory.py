"""What an over-limit gRPC request costs the server with and without the gRPC front (tools/grpc_front.py: nginx with
the template docker-compose.yml and the chart run): tritonserver's and the preprocess stub's memory, and nginx's.

Triton's gRPC port reads a message of up to 2 GiB whole and copies its tensors into the preprocess step's
shared-memory region, which keeps its largest size, before preprocess refuses the request; the front counts the body
as it arrives and refuses it past the limits' largest request. For each way in (`front`, `direct`) one CPU server is
started and sent, one after another, requests of `--documents` x 64 KB (sizes ascending, so that a process's peak
after a request is that request's peak), each followed by a small request that must be answered. Per request:
status, seconds, and VmRSS / VmHWM (its peak so far) of tritonserver, VmRSS / RssShmem of the preprocess stub and
VmHWM of nginx's worker. Before those, on the front's server, the latency the front adds: `--latency-requests`
requests of 2 and of 64 documents (~600 bytes each) over gRPC, through the front and straight to Triton in
alternation, their median. Printed as tables and written as JSON:

    .venv/bin/python -m benchmarks.grpc_front_memory --out benchmarks/results/cpu-grpc-front-memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import tritonclient.grpc as grpc_client

from benchmarks.procs import status_mb
from benchmarks.refused_memory import refused
from python_backends.model_repository import PREPROCESS
from reranker_client import RerankClient
from tests.support.triton_server import start_server, stop_server, stub_pids
from tools.grpc_front import running_front


def mb(pid: int, *fields: str) -> dict[str, int]:
    return {field: round(value) for field, value in status_mb(pid, *fields).items()}


def latency(direct: str, front: str, requests: int) -> dict:
    """Median ms of `requests` reranks per document count, through the front and direct, alternated."""
    document = "The quick brown fox jumps over the lazy dog near the river bank on a sunny day. " * 7
    clients = {way: RerankClient(url, protocol="grpc") for way, url in (("front", front), ("direct", direct))}
    times: dict[str, list[float]] = {}
    try:
        for count in (2, 64):
            for _ in range(requests):
                for way, client in clients.items():
                    start = time.perf_counter()
                    client.rerank("where does the fox jump", [document] * count)
                    times.setdefault(f"{count} documents {way}", []).append((time.perf_counter() - start) * 1000)
    finally:
        for client in clients.values():
            client.close()
    return {name: round(statistics.median(values), 2) for name, values in times.items()}


def one_way(way: str, sizes: list[int], folder: Path, latency_requests: int) -> tuple[list[dict], dict | None]:
    server = start_server(folder / f"{way}-server.log")
    try:
        limits_client = RerankClient(server.grpc_url, protocol="grpc")
        limit = limits_client.limits().http_max_input_size
        limits_client.close()
        front = running_front(server.grpc_url, limit, folder=folder / "front") if way == "front" else nullcontext()
        with front as running:
            medians = latency(server.grpc_url, running.address, latency_requests) if running else None
            client = grpc_client.InferenceServerClient(running.address if running else server.grpc_url)
            (stub,) = stub_pids(server, PREPROCESS)
            rows = [{"request": "idle", "status": None, "seconds": None, **memory(server.pid, stub, running)}]
            for documents in sizes:
                start = time.monotonic()
                status = refused(client, documents)
                seconds = round(time.monotonic() - start, 2)
                time.sleep(1.0)
                small = refused(client, 2)  # within every limit: "answered"
                rows.append({"request": f"{documents} x 64 KB", "status": status, "seconds": seconds,
                             "next_small_request": small, **memory(server.pid, stub, running)})
            client.close()
        return rows, medians
    finally:
        stop_server(server)


def memory(server_pid: int, stub_pid: int, front) -> dict[str, int | None]:
    triton, stub = mb(server_pid, "VmRSS", "VmHWM"), mb(stub_pid, "VmRSS", "RssShmem")
    workers = front.worker_pids() if front else []
    return {"tritonserver_rss": triton["VmRSS"], "tritonserver_peak": triton["VmHWM"],
            "preprocess_rss": stub["VmRSS"], "preprocess_shm": stub["RssShmem"],
            "nginx_peak": sum(mb(pid, "VmHWM")["VmHWM"] for pid in workers) if front else None}


COLUMNS = ("tritonserver_rss", "tritonserver_peak", "preprocess_rss", "preprocess_shm", "nginx_peak")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", default="1100,4000,16000", help="request sizes in 64 KB documents, ascending")
    parser.add_argument("--latency-requests", type=int, default=100, help="per way and document count")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    sizes = sorted(int(n) for n in args.documents.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        (front_rows, medians), (direct_rows, _) = (one_way(way, sizes, Path(tmp), args.latency_requests)
                                                   for way in ("front", "direct"))
    runs = {"front": front_rows, "direct": direct_rows}
    print(f"median ms of {args.latency_requests} gRPC reranks, alternated: " +
          ", ".join(f"{name} {value}" for name, value in medians.items()))
    print("memory (MB) after each over-limit gRPC request, through the gRPC front and straight to Triton")
    print(f"{'way':<7} {'request':<16} {'status':<26} {'s':>6} " + " ".join(f"{c:>17}" for c in COLUMNS))
    for way, rows in runs.items():
        for row in rows:
            print(f"{way:<7} {row['request']:<16} {(row['status'] or '-')[:26]:<26} {row['seconds'] or '-':>6} "
                  + " ".join(f"{row[c] if row[c] is not None else '-':>17}" for c in COLUMNS))
    if args.out:
        nginx = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip()
        args.out.write_text(json.dumps({"host": platform.node(), "cpus": len(os.sched_getaffinity(0)),
                                        "nginx": nginx, "latency_median_ms": medians, "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
