"""The gateway's memory under a burst of maximal bodies, with its body budget (GATEWAY_MAX_INFLIGHT_BODY_BYTES) at
the default and lifted.

Each row starts `python -m gateway` in its own process against a Triton address that accepts connections and never
answers (every call then holds its parsed body until GATEWAY_TIMEOUT_S), sends `burst` bodies of GATEWAY_MAX_BODY_BYTES
at once, and reads the process's peak RSS (VmHWM) and each call's status. Printed as a table and written as JSON:

    .venv/bin/python -m benchmarks.gateway_body_memory --out benchmarks/results/cpu-gateway-body-memory.json

`--server` runs the whole path instead, with the default budget only: the gateway in front of the CPU server started
from this checkout, so that admitted bodies are also split, made into tensors and sent over gRPC. A maximal call
takes minutes there, so the peak is read after `--sample-s` seconds, the admitted calls still in Triton:

    .venv/bin/python -m benchmarks.gateway_body_memory --server --out benchmarks/results/cpu-gateway-body-memory-server.json
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.procs import status_mb
from tests.support.triton_server import start_server, stop_server
from tools.local_server import free_port

ROOT = Path(__file__).resolve().parent.parent
MAX_BODY = 32 * 1024 * 1024  # the gateway's default GATEWAY_MAX_BODY_BYTES
TIMEOUT_S = 8  # GATEWAY_TIMEOUT_S: how long each call holds its body against the silent Triton


def maximal_body(documents: int = 10_000) -> bytes:
    """The gateway's most documents (GATEWAY_MAX_DOCUMENTS), as objects, filling MAX_BODY bytes of JSON: the most
    Python objects a body of the largest size parses into. Each document differs, as real ones do."""
    size = (MAX_BODY - 1024) // documents - 40
    words = "paris is the capital of france and the seine runs through it ".split()
    texts = [f"{i} " + " ".join(words[(i + j) % len(words)] for j in range(size // 5))[:size] for i in range(documents)]
    return json.dumps({"query": "capital of france", "documents": [{"text": t} for t in texts]}).encode()


def peak_rss_mb(pid: int) -> float:
    return status_mb(pid, "VmHWM")["VmHWM"]


def post(url: str, body: bytes) -> int | str:
    """The answer's status; "reset" when the gateway answered (a refusal) before taking the whole body and closed
    the connection while the client was still sending it."""
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S + 30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, ConnectionError):
        return "reset"


def run(burst: int, budget: int | None, body: bytes, triton_url: str, sample_s: float | None = None) -> dict:
    """One burst; `sample_s`: read the peak that long after sending, whether or not the calls are answered."""
    port = free_port()
    # sampled: the admitted calls are still in Triton when the peak is read
    timeout_s = TIMEOUT_S if sample_s is None else sample_s + 60
    env = dict(os.environ, TRITON_GRPC_URL=triton_url, GATEWAY_PORT=str(port), GATEWAY_TIMEOUT_S=str(timeout_s),
               GATEWAY_MAX_RETRIES="0", GATEWAY_LOG_LEVEL="warning")
    if budget is not None:
        env["GATEWAY_MAX_INFLIGHT_BODY_BYTES"] = str(budget)
    gateway = subprocess.Popen([sys.executable, "-m", "gateway"], env=env, cwd=ROOT)
    pool = ThreadPoolExecutor(burst)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{url}/health/live", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        idle = peak_rss_mb(gateway.pid)
        started = time.monotonic()
        calls = [pool.submit(post, f"{url}/v1/rerank", body) for _ in range(burst)]
        if sample_s is None:
            statuses = [call.result() for call in calls]
        else:
            time.sleep(sample_s)
            statuses = [call.result() if call.done() else "in flight" for call in calls]
        return {"burst": burst, "budget_bytes": budget, "idle_rss_mb": round(idle, 1),
                "peak_rss_mb": round(peak_rss_mb(gateway.pid), 1), "statuses": dict(Counter(statuses)),
                "seconds": round(time.monotonic() - started, 1)}
    finally:
        if sample_s is None:
            gateway.terminate()
        else:  # not its graceful stop, which would wait for the calls still in Triton
            gateway.kill()
        gateway.wait(30)
        pool.shutdown(wait=True)  # the calls still in flight end with the gateway's connections


def silent_triton() -> socket.socket:
    """Accepts (the kernel's backlog) and never answers: a Triton that hangs."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    return silent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=8)
    parser.add_argument("--server", action="store_true", help="the whole path: the CPU server behind the gateway")
    parser.add_argument("--sample-s", type=float, default=30.0, help="with --server: when the peak is read")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    body = maximal_body()
    if args.server:
        with tempfile.TemporaryDirectory() as tmp:
            server = start_server(Path(tmp) / "server.log")
            try:
                rows = [run(args.burst, None, body, server.grpc_url, args.sample_s)]
            finally:
                stop_server(server)
        against = f"the CPU server, peak read {args.sample_s:g} s after sending"
    else:
        silent = silent_triton()
        triton_url = f"127.0.0.1:{silent.getsockname()[1]}"
        try:
            rows = [run(args.burst, None, body, triton_url), run(args.burst, args.burst * MAX_BODY, body, triton_url)]
        finally:
            silent.close()
        against = f"Triton silent for {TIMEOUT_S} s"
    print(f"{len(body)} bytes a body, {args.burst} at once, {against}")
    print(f"{'budget':>22} {'idle RSS MB':>12} {'peak RSS MB':>12}  statuses")
    for row in rows:
        budget = "default" if row["budget_bytes"] is None else f"{row['budget_bytes']} (lifted)"
        print(f"{budget:>22} {row['idle_rss_mb']:>12} {row['peak_rss_mb']:>12}  {row['statuses']}")
    if args.out:
        args.out.write_text(json.dumps({"body_bytes": len(body), "against": against, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
