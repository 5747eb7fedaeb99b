"""A burst with and without queue policies on the steps: why no step of the ensemble has one.

Triton's dynamic batcher prefetches the next batch only for a queue without a policy (no timeout, no size limit, no
timeout override: `PriorityQueue::support_prefetching_` in Triton core). With a policy it waits until the model
instance asks for work, and it learns that from the previous batch's completion callback, which can fire before the
instance asks; the wakeup is then lost and the batcher sleeps its default 500 ms. A burst meets this every few
batches, and no new arrival wakes it: at 4 requests per batch, 400 requests spent seconds in preprocess's queue.

This runs the overload test's burst (400 requests of 6 documents at once, over gRPC, against an engine budget of 1024
tokens) `--rounds` times on two servers started one after the other from this checkout's model_repository: as
shipped, and with each step given the 10 s / 30 s timeout policies it had before. Printed as a table and written as
JSON:

    .venv/bin/python -m benchmarks.queue_policy_burst --out benchmarks/results/cpu-queue-policy-burst.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from pathlib import Path

from python_backends.model_repository import STEPS, read_config, variant_file, write_config
from tests.integration.test_overload import BURST, DOCS_PER_REQUEST, INFLIGHT_TOKENS, _burst, _metric
from tests.support.triton_server import TEST_VARIANT, copy_repository, start_server, stop_server

# What each step had: a timeout while queued (the stub stalled), a client's smaller timeout allowed.
OLD_TIMEOUT_US = {"rerank_preprocess": 10_000_000, "rerank_engine": 30_000_000, "rerank_calibrate": 10_000_000}


def _repository(folder: Path, policies: bool) -> Path:
    repo = copy_repository(folder / "model_repository", {("rerank_engine", "max_inflight_tokens"): INFLIGHT_TOKENS})
    if policies:
        for step in STEPS:
            path = variant_file(repo, step, TEST_VARIANT)
            config = read_config(path)
            policy = config.dynamic_batching.default_queue_policy
            policy.timeout_action = policy.REJECT
            policy.default_timeout_microseconds = OLD_TIMEOUT_US[step]
            policy.allow_timeout_override = True
            write_config(path, config)
    return repo


def _queue_us_and_count(server) -> dict[str, tuple[float, float]]:
    """Per step: Triton's own sum of queue time (µs) and request count."""
    return {step: tuple(_metric(server, name, f'model="{step}"')
                        for name in ("nv_inference_queue_duration_us", "nv_inference_count")) for step in STEPS}


def _round(server) -> dict:
    before = _queue_us_and_count(server)
    started = time.monotonic()
    outcomes = asyncio.run(_burst(server.grpc_url))
    wall = time.monotonic() - started
    after = _queue_us_and_count(server)
    kinds = Counter(kind if kind in ("ok", "refused") else "other" for kind, _ in outcomes)
    queue = {step: round((after[step][0] - before[step][0]) / max(1.0, after[step][1] - before[step][1]) / 1000, 1)
             for step in STEPS}
    return {"wall_s": round(wall, 2), "ok": kinds["ok"], "refused": kinds["refused"], "other": kinds["other"],
            "others": sorted({kind for kind, _ in outcomes if kind not in ("ok", "refused")})[:3],
            "mean_queue_ms": queue}


def run(policies: bool, rounds: int) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        repo = _repository(Path(tmp), policies)
        server = start_server(Path(tmp) / "server.log", model_repository=repo,
                              extra_args=(f"--model-config-name={TEST_VARIANT}",))
        try:
            return [_round(server) for _ in range(rounds)]
        finally:
            stop_server(server)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result = {"burst": {"requests": BURST, "documents": DOCS_PER_REQUEST, "engine_max_inflight_tokens": INFLIGHT_TOKENS},
              "with_queue_policies": run(True, args.rounds), "shipped_no_queue_policy": run(False, args.rounds)}
    print(f"{'configuration':<24} {'round':>5} {'wall s':>7} {'ok':>4} {'refused':>7} {'other':>5}  mean queue ms "
          "(preprocess / engine / calibrate)")
    for name in ("with_queue_policies", "shipped_no_queue_policy"):
        for i, r in enumerate(result[name], 1):
            queue = " / ".join(str(r["mean_queue_ms"][step]) for step in STEPS)
            print(f"{name:<24} {i:>5} {r['wall_s']:>7} {r['ok']:>4} {r['refused']:>7} {r['other']:>5}  {queue}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
