"""Closed-loop asyncio gRPC load generator for the `reranker` ensemble (tritonclient.grpc.aio).

What perf_analyzer's ``--concurrency-range`` does, in Python: for each concurrency level C,
C coroutines each send a request, wait for its answer, and send the next, for ``--duration``
seconds after ``--warmup`` requests; it reports throughput and P50/P95/P99 latency per level
as JSON. It is the fallback where the perf_analyzer binary is missing (see loadtest/README.md)
and a second opinion where it is not. On a 2-core client the Python side (building 64-document
requests, parsing responses) costs a few ms per request: at high concurrency the client, not the
server, may be the limit -- the report carries the client's CPU time so that can be seen.

    python -m loadtest.grpc_load --url localhost:8001 --concurrency 1,8,32,64 \
        --duration 30 --output results/grpc_load.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `loadtest` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loadtest import closed_loop, corpus, payload  # noqa: E402
from loadtest.closed_loop import percentile  # noqa: E402,F401 - part of this module's interface


def summarize(loop: closed_loop.LoopResult, n_docs: int) -> dict:
    """The report's fields for one level: counts, throughput, latency percentiles (ms)."""
    ok, wall_s = len(loop.done), loop.wall_s
    return {
        "requests": ok,
        "errors": len(loop.errors),
        "duration_s": round(wall_s, 4),
        "throughput_rps": round(ok / wall_s, 3) if wall_s > 0 else 0.0,
        "pairs_per_s": round(ok * n_docs / wall_s, 1) if wall_s > 0 else 0.0,
        "latency_ms": closed_loop.latency_summary(loop.latencies_s),
    }


async def _one(client, model, inputs, outputs, req, check: bool) -> None:
    result = await client.infer(model, inputs, outputs=outputs)
    if check:
        payload.check_result(
            len(req.documents),
            req.top_n,
            result.as_numpy(payload.contract.SCORES).ravel(),
            result.as_numpy(payload.contract.RANKING).ravel(),
        )


async def run_level(client, model, reqs, prepared, concurrency, duration_s, warmup, max_requests, check):
    def send(k: int):  # the distinct requests in turn
        i = k % len(reqs)
        inputs, outputs = prepared[i]
        return _one(client, model, inputs, outputs, reqs[i], check)

    for k in range(warmup):  # sequential warm-up, not measured
        await send(k)
    loop = await closed_loop.closed_loop(
        send, concurrency, first=warmup, max_requests=max_requests, until=time.perf_counter() + duration_s
    )
    level = {"concurrency": concurrency}
    level.update(summarize(loop, len(reqs[0].documents)))
    level["client_cpu_s"] = round(loop.client_cpu_s, 3)
    level["error_examples"] = loop.errors[:3]
    return level


async def run(args) -> dict:
    import tritonclient.grpc as grpcmod
    import tritonclient.grpc.aio as grpcaio

    reqs = corpus.make_requests(args.distinct_requests, args.seed, **corpus.request_shape(args))
    prepared = [payload.grpc_inputs(r, grpcmod) for r in reqs]
    report: dict = {
        "tool": "loadtest/grpc_load.py",
        "url": args.url,
        "model": args.model,
        "shape": {
            **corpus.request_shape(args),
            "distinct_requests": args.distinct_requests,
            "seed": args.seed,
            "doc_whitespace_tokens_mean": round(
                sum(corpus.whitespace_tokens(d) for r in reqs for d in r.documents) / (len(reqs) * args.n_docs), 1
            ),
        },
        "client": {"python": platform.python_version(), "host": platform.node()},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "levels": [],
    }
    client = grpcaio.InferenceServerClient(url=args.url)
    try:
        if not await client.is_model_ready(args.model):
            raise SystemExit(f"model {args.model!r} is not ready at {args.url}")
        meta = await client.get_server_metadata(as_json=True)
        report["server"] = {"name": meta.get("name"), "version": meta.get("version")}
        for c in args.concurrency:
            level = await run_level(
                client, args.model, reqs, prepared, c, args.duration, args.warmup, args.max_requests, args.check
            )
            report["levels"].append(level)
            lat = level["latency_ms"]
            print(
                f"concurrency {c:>3}: {level['requests']} ok, {level['errors']} errors, "
                f"{level['throughput_rps']} req/s, p50 {lat['p50']} ms, p95 {lat['p95']} ms, p99 {lat['p99']} ms",
                file=sys.stderr,
            )
    finally:
        await client.close()
    return report


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="asyncio gRPC load generator for the reranker ensemble")
    ap.add_argument("--url", default="localhost:8001", help="Triton gRPC host:port")
    ap.add_argument("--model", default=payload.MODEL_NAME)
    ap.add_argument("--concurrency", default="1,8,32,64", help="comma-separated levels (the reference load: 1,8,32,64)")
    ap.add_argument("--duration", type=float, default=30.0, help="measured seconds per level")
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured sequential requests per level")
    ap.add_argument("--max-requests", type=int, default=0, help="cap per level (0: only the duration bounds it)")
    corpus.add_shape_arguments(ap)
    ap.add_argument("--distinct-requests", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-check", dest="check", action="store_false", help="do not check responses")
    ap.add_argument("--output", help="write the JSON report here (default: stdout)")
    args = ap.parse_args(argv)
    args.concurrency = [int(c) for c in str(args.concurrency).split(",") if c.strip()]
    if not args.concurrency or min(args.concurrency) < 1:
        ap.error("--concurrency needs levels >= 1")
    if args.duration <= 0:
        ap.error("--duration must be > 0")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    report = asyncio.run(run(args))
    text = json.dumps(report, indent=2)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text + "\n")
    else:
        print(text)
    return 1 if any(level["errors"] for level in report["levels"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
