"""perf_analyzer (Triton's own tool, the 2.51 binary) against the benchmark's Triton server, beside this project's load
generator on the SAME requests: the request set written as perf_analyzer's input data (loadtest/payload.py), both
cycling over it at each concurrency. Requests repeat, so vLLM's prefix cache is warm for both: this is a check that
the two tools measure the same server alike (within 5%), not the benchmark's headline numbers.

Measured alike: perf_analyzer times windows of WINDOW_REQUESTS_PER_WORKER x c completed requests of continuous load
until three in a row agree within STABILITY_PCT, and reports their mean. Count windows, not time windows: a time
window at c=8 held ~50 requests of ~0.7 s, and which of the requests in flight at its edges fell inside it moved its
rate by more than 10%. Windows of 12 x c requests at 10% still found no three agreeing in 10 at c=8 in one H100
run (benchmarks/results/README.md); perf_analyzer checks mean latency as well as throughput. So windows are 24 x c
requests at the GPU preset's 20%, and each pass is printed (-v) into the log, so a failure shows which of the two
moved. The mean of the three agreeing windows is what is compared with the load generator, within 5%.
The load generator runs OURS_S of load and counts its steady window (loadtest/closed_loop.py), once before
perf_analyzer and once after, so a drift of the server over the minute shows as a gap between the two.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from benchmarks.procs import ROOT, log
from loadtest import payload
from loadtest.closed_loop import closed_loop, latency_summary

RUNNER = ROOT / "loadtest" / "perf_analyzer" / "run_perf_analyzer.sh"
KIT_BINARY = Path("/tmp/perf/run_perf_analyzer")  # tools/offline_gpu/make_kit.sh's perf part, installed
WINDOW_REQUESTS_PER_WORKER = 24
STABILITY_PCT = 20
MAX_TRIALS = 10
OURS_S = 10.0
AGREEMENT = 0.05


def binary() -> str | None:
    if os.environ.get("PERF_ANALYZER"):
        return os.environ["PERF_ANALYZER"]
    if KIT_BINARY.is_file():
        return str(KIT_BINARY)
    return shutil.which("perf_analyzer")


def run_tool(requests: list, grpc_url: str, c: int, out: Path, timeout_s: float) -> dict[int, dict]:
    """perf_analyzer at concurrency c; its CSV's throughput and latencies (µs -> ms)."""
    out.mkdir(parents=True, exist_ok=True)
    data = out / "perf_input.json"
    data.write_text(json.dumps(payload.perf_analyzer_input_data(requests)))
    env = dict(os.environ, PERF_ANALYZER=binary() or "perf_analyzer", TRITON_URL=grpc_url, PROTOCOL="grpc",
               INPUT_DATA=str(data), CONCURRENCY=str(c), MEASUREMENT_REQUEST_COUNT=str(WINDOW_REQUESTS_PER_WORKER * c),
               MAX_TRIALS=str(MAX_TRIALS), STABILITY_PCT=str(STABILITY_PCT))
    with (out / "perf_analyzer.log").open("w") as log_file:
        subprocess.run(["bash", str(RUNNER), str(out), "-v"], env=env, stdout=log_file, stderr=subprocess.STDOUT,
                       timeout=timeout_s, check=False)
    rows = {}
    summary = out / "perf_summary.csv"
    if summary.is_file():
        for row in csv.DictReader(summary.open()):
            rows[int(row["Concurrency"])] = {
                "infer_per_s": float(row["Inferences/Second"]),
                "p50_ms": float(row["p50 latency"]) / 1000, "p95_ms": float(row["p95 latency"]) / 1000,
                "p99_ms": float(row["p99 latency"]) / 1000,
            }
    return rows


async def _ours(send_request, requests: list, c: int) -> dict:
    loop = await closed_loop(lambda k: send_request(k % len(requests)), c,
                             until=time.perf_counter() + OURS_S)
    window = loop.steady
    rate = len(window.done) / window.seconds if window else 0.0
    return {"infer_per_s": round(rate, 3), "window_s": round(window.seconds, 2) if window else None,
            "errors": len(loop.errors), **{f"{k}_ms": v for k, v in latency_summary(loop.latencies_s).items()}}


async def compare(send_request, requests: list, grpc_url: str, levels: list[int], out: Path,
                  deadline: float) -> dict:
    """Per level: the load generator, perf_analyzer, the load generator again; the ratio of their mean to
    perf_analyzer's throughput."""
    rows = []
    for c in levels:
        if time.monotonic() > deadline - 60:
            break
        before = await _ours(send_request, requests, c)
        tool = run_tool(requests, grpc_url, c, out / f"c{c}", max(30.0, deadline - time.monotonic() - 20))
        after = await _ours(send_request, requests, c)
        ours = (before["infer_per_s"] + after["infer_per_s"]) / 2
        p50 = (before["p50_ms"] + after["p50_ms"]) / 2 if before["p50_ms"] and after["p50_ms"] else None
        row = {"concurrency": c, "load_generator": {"infer_per_s": round(ours, 3), "p50_ms": p50},
               "load_generator_runs": [before, after]}
        if c in tool:
            row["perf_analyzer"] = tool[c]
            row["ratio"] = round(ours / tool[c]["infer_per_s"], 4) if tool[c]["infer_per_s"] else None
            row["agree_within_5pct"] = row["ratio"] is not None and abs(row["ratio"] - 1) <= AGREEMENT
        rows.append(row)
        log(f"  perf_analyzer c={c}: {tool.get(c, {}).get('infer_per_s')} infer/s; load generator "
            f"{before['infer_per_s']:.2f} before, {after['infer_per_s']:.2f} after")
    return {"binary": binary(), "distinct_requests": len(requests),
            "window_requests_per_worker": WINDOW_REQUESTS_PER_WORKER, "stability_pct": STABILITY_PCT,
            "max_trials": MAX_TRIALS, "levels": rows}
