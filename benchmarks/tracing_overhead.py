"""What tracing costs a request on the CPU server, three ways in one run, alternated request by request at
concurrency 1 so that each sees the same machine:

- `off`: a server started without OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (no trace argument; the engine's spans off);
- `on, untraced`: a server started with it, requests without a `traceparent` (Triton's rate=0: not traced);
- `on, traced`: the same server, each request with a `traceparent` of its own: Triton's spans of the request, the
  ensemble and each step, and the engine step's, exported to a local OTLP/HTTP receiver.

Requests go straight to Triton over gRPC (the gateway's own instrumentation is not in them): 16 documents of ~40
words. Printed as a table (P50, P95, mean, ratio of each P50 to `off`) and written as JSON:

    .venv/bin/python -m benchmarks.tracing_overhead --out benchmarks/results/cpu-tracing-overhead.json
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import tritonclient.grpc as grpc_client

from loadtest.closed_loop import latency_summary
from reranker_client import build_inputs
from tests.support.otlp import OtlpReceiver
from tests.support.triton_server import start_server, stop_server

WORDS = "the river runs through the old town where the market opens at dawn and closes before the evening".split()
DOCUMENTS = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(40)) for i in range(16)]
WAYS = ("off", "on, untraced", "on, traced")


def timed_call(client: grpc_client.InferenceServerClient, traced: bool) -> float:
    headers = {"traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"} if traced else None
    inputs = build_inputs(grpc_client, "when does the market open", DOCUMENTS)
    started = time.perf_counter()
    client.infer("reranker", inputs, headers=headers)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="per way, after 20 of warm-up each")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="tracing-overhead-"))
    off = start_server(folder / "off.log")
    on = start_server(folder / "on.log", traced=True)
    receiver = OtlpReceiver(urlsplit(on.traces_url).port).start()
    try:
        clients = {way: grpc_client.InferenceServerClient((off if way == "off" else on).grpc_url) for way in WAYS}
        seconds: dict[str, list[float]] = {way: [] for way in WAYS}
        for round_ in range(20 + args.requests):
            for way in WAYS:
                took = timed_call(clients[way], way == "on, traced")
                if round_ >= 20:
                    seconds[way].append(took)
        time.sleep(2)  # the last spans' batch
        rows = {way: latency_summary(values) for way, values in seconds.items()}  # milliseconds
        for way in WAYS:
            rows[way]["p50_ratio_to_off"] = rows[way]["p50"] / rows["off"]["p50"]
        result = {"requests_per_way": args.requests, "documents": len(DOCUMENTS), "concurrency": 1,
                  "cpus": os.cpu_count(), "spans_received": len(receiver.spans), "ways": rows}
    finally:
        receiver.stop()
        stop_server(off)
        stop_server(on)
    print(f"{'way':<14} {'P50 ms':>8} {'P95 ms':>8} {'mean ms':>8} {'P50 / off':>10}")
    for way, row in rows.items():
        print(f"{way:<14} {row['p50']:8.2f} {row['p95']:8.2f} {row['mean']:8.2f} {row['p50_ratio_to_off']:10.3f}")
    print(f"spans received: {result['spans_received']} ({args.requests + 20} traced requests)")
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
