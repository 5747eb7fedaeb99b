"""The preprocess stub's memory after requests it refuses for their size: a burst of invalid large requests must not
leave the step at their size.

Starts the CPU server from this checkout's model_repository, sends `--requests` requests of `--documents` x 64 KB
(more documents than max_documents, so preprocess refuses each before decoding it), one after another over gRPC,
and reads the preprocess stub's VmRSS, RssAnon (its own heap) and RssShmem (its shared-memory region, which holds
the batch Triton copied in and keeps its largest size) idle and after each. `--before <commit>` first runs that
commit's repository and package (benchmarks.maximal_burst.old_checkout). Printed as a table and written as JSON:

    .venv/bin/python -m benchmarks.refused_memory --before f4edece --out benchmarks/results/cpu-refused-memory.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpc_client
from tritonclient.utils import InferenceServerException

from benchmarks.maximal_burst import old_checkout
from benchmarks.procs import status_mb
from python_backends.model_repository import PREPROCESS
from tests.support.triton_server import ROOT, start_server, stop_server, stub_pids

FIELDS = ("VmRSS", "RssAnon", "RssShmem")


def memory_mb(pid: int) -> dict[str, int]:
    return {field: int(mb) for field, mb in status_mb(pid, *FIELDS).items()}


def refused(client: grpc_client.InferenceServerClient, documents: int) -> str:
    query = grpc_client.InferInput("QUERY", [1, 1], "BYTES")
    query.set_data_from_numpy(np.array([[b"q"]], dtype=object))
    texts = grpc_client.InferInput("DOCUMENTS", [1, documents], "BYTES")
    texts.set_data_from_numpy(np.array([[b"x" * 65536] * documents], dtype=object))
    try:
        client.infer("reranker", [query, texts])
    except InferenceServerException as error:
        return error.status()
    return "answered"


def run(repository: Path, requests: int, documents: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "server.log", model_repository=repository.resolve())
        client = grpc_client.InferenceServerClient(server.grpc_url)
        try:
            (stub,) = stub_pids(server, PREPROCESS)
            rows = [{"after": "idle", "status": None, **memory_mb(stub)}]
            for i in range(requests):
                status = refused(client, documents)
                time.sleep(1.0)
                rows.append({"after": f"refused request {i + 1}", "status": status, **memory_mb(stub)})
        finally:
            client.close()
            stop_server(server)
    return {"model_repository": str(repository), "documents": documents, "document_bytes": 65536, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3)
    parser.add_argument("--documents", type=int, default=4000)
    parser.add_argument("--before", help="commit whose repository and package run first, for a before/after table")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    runs = {}
    if args.before:
        with tempfile.TemporaryDirectory() as old:
            runs["before"] = {"commit": args.before,
                              **run(old_checkout(args.before, Path(old)), args.requests, args.documents)}
    runs["after"] = run(ROOT / "model_repository", args.requests, args.documents)
    print(f"preprocess stub memory (MB) after refused requests of {args.documents} x 64 KB")
    print(f"{'run':<8} {'after':<20} {'status':<28} " + " ".join(f"{field:>9}" for field in FIELDS))
    for name, result in runs.items():
        for row in result["rows"]:
            print(f"{name:<8} {row['after']:<20} {row['status'] or '-':<28} "
                  + " ".join(f"{row[field]:>9}" for field in FIELDS))
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
