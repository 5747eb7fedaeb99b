"""Concurrent maximal requests against the CPU server: how each is answered, how fast, and the memory it costs.

Starts the server from this checkout's model_repository (the CPU configuration), sends `--concurrency` requests of
max_documents x max_document_bytes of prose (the limits rerank_preprocess's config states) at once over gRPC, and
samples VmRSS of tritonserver and of each Python-backend stub, and the size of each stub's shared-memory region,
while they are handled. Printed and written as JSON:

    .venv/bin/python -m benchmarks.maximal_burst --out benchmarks/results/cpu-maximal-burst.json

`--model-repository` runs another repository with this checkout's package. `--before <commit>` first runs that
commit's model_repository with that commit's `python_backends` (both from `git archive`; each model.py is made to
import the old package first, since the stub ignores PYTHONPATH), then this checkout's, and writes both:

    .venv/bin/python -m benchmarks.maximal_burst --before 7d1188c --out benchmarks/results/cpu-maximal-burst.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import tritonclient.grpc as grpc_client
from tritonclient.grpc import aio as grpc_aio
from tritonclient.utils import InferenceServerException

from benchmarks.procs import status_mb
from python_backends.contract import RequestLimits
from python_backends.model_repository import ENGINE, PREPROCESS, STEPS, config_dict, config_path
from reranker_client import build_inputs
from tests.support.triton_server import ROOT, RunningServer, start_server, stop_server, stub_pids

def _limits(repository: Path) -> RequestLimits:
    return RequestLimits.from_model_configs(*(config_dict(config_path(repository, step)) for step in (PREPROCESS, ENGINE)))


def _rss_mb(pid: int) -> float:
    try:
        return status_mb(pid, "VmRSS")["VmRSS"]
    except OSError:  # the process has ended
        return 0.0


def _stubs(server: RunningServer) -> dict[str, int]:
    """The pid of each step's stub."""
    return {model: pid for model in STEPS for pid in stub_pids(server, model)}


def _shm_mb(server_pid: int) -> float:
    """The Python backend's regions of this server, /dev/shm/<name>, largest first (one per stub)."""
    sizes = []
    for fd in Path(f"/proc/{server_pid}/map_files").glob("*"):
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("/dev/shm/"):
            sizes.append(target)
    return sum(Path(p).stat().st_size for p in set(sizes) if Path(p).exists()) / 2**20


class Sampler(threading.Thread):
    def __init__(self, server: RunningServer) -> None:
        super().__init__(daemon=True)
        self.server, self.stop, self.peak = server, threading.Event(), {}

    def run(self) -> None:
        while not self.stop.is_set():
            pids = {"tritonserver": self.server.pid, **_stubs(self.server)}
            for name, pid in pids.items():
                self.peak[name] = max(self.peak.get(name, 0.0), _rss_mb(pid))
            self.peak["shm_regions"] = max(self.peak.get("shm_regions", 0.0), _shm_mb(self.server.pid))
            time.sleep(0.2)


async def _burst(url: str, limits: RequestLimits, concurrency: int, timeout_s: float) -> list[dict]:
    words = "the committee reviewed quarterly budget figures and scheduled another meeting about paris".split()
    text = " ".join(words[i % len(words)] for i in range(limits.max_document_bytes))[:limits.max_document_bytes]
    documents = [text] * limits.max_documents
    client = grpc_aio.InferenceServerClient(url)

    async def one(i: int) -> dict:
        inputs = build_inputs(grpc_client, f"request {i} about the budget", documents, top_n=1)
        started = time.monotonic()
        try:
            await client.infer("reranker", inputs, client_timeout=timeout_s)
            outcome = "ok"
        except InferenceServerException as exc:
            outcome = f"{exc.status()}: {exc.message()[:90]}"
        return {"outcome": outcome, "seconds": round(time.monotonic() - started, 3)}

    try:
        return await asyncio.gather(*(one(i) for i in range(concurrency)))
    finally:
        await client.close()


def old_checkout(commit: str, folder: Path) -> Path:
    """`commit`'s model_repository and python_backends under `folder`; its model.py files import that package."""
    archive = subprocess.run(["git", "archive", commit, "model_repository", "python_backends"], cwd=ROOT,
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    for model in (folder / "model_repository").glob("*/1/model.py"):
        model.write_text(f"import sys; sys.path.insert(0, {str(folder)!r})\n" + model.read_text())
    return folder / "model_repository"


def run(repository: Path, concurrency: int, timeout_s: float) -> dict:
    limits = _limits(repository)
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "server.log", model_repository=repository.resolve())
        sampler = Sampler(server)
        try:
            idle = {"tritonserver": _rss_mb(server.pid),
                    **{m: _rss_mb(p) for m, p in _stubs(server).items()}}
            sampler.start()
            answers = asyncio.run(_burst(server.grpc_url, limits, concurrency, timeout_s))
            time.sleep(1.0)
            sampler.stop.set()
            sampler.join()
        finally:
            stop_server(server)
    return {"model_repository": str(repository), "limits": vars(limits), "concurrency": concurrency, "idle_rss_mb": idle,
            "peak_mb": {k: round(v, 1) for k, v in sampler.peak.items()}, "answers": answers}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--timeout-s", type=float, default=240)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    parser.add_argument("--before", help="commit whose repository and package run first, for a before/after table")
    args = parser.parse_args(argv)
    if args.before:
        with tempfile.TemporaryDirectory() as old:
            before = {"commit": args.before, **run(old_checkout(args.before, Path(old)), args.concurrency, args.timeout_s)}
        result = {"before": before, "after": run(args.model_repository, args.concurrency, args.timeout_s)}
    else:
        result = run(args.model_repository, args.concurrency, args.timeout_s)
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
