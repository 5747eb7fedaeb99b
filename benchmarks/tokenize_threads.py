"""How long the preprocess step's encoder takes for one reference request, by the number of threads the Rust tokenizer
may use (``RAYON_NUM_THREADS``), in the Python that runs it.

At one request at a time the document tokenizing is all of the preprocess step's time and none of it overlaps the
GPU, so it is the first thing a single request waits for. The tokenizer spreads a request's documents over its thread
pool; this finds how far that scales on the host (each thread count in a fresh child process, since the pool is sized
once per process). Same requests as the GPU benchmark (benchmarks/corpus.py). Printed as a table and written as JSON:

    python -m benchmarks.tokenize_threads --model build/qwen3-tokenizer --out /tmp/tokenize-threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
from benchmarks.corpus import make_requests
from python_backends.families import detect_model
from python_backends.preprocess.tokenization import make_encoder
model, count, max_model_len = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
requests = make_requests(model, count)
encoder = make_encoder(detect_model(model).family, model, max_model_len)
encoder.encode(requests[0].query, list(requests[0].documents), None)  # the pool starts and the BPE cache fills once
times = []
for r in requests:
    t = time.perf_counter()
    encoded = encoder.encode(r.query, list(r.documents), None)
    times.append((time.perf_counter() - t) * 1000)
print(json.dumps({"ms": times, "tokens": sum(len(x) for x in encoded.token_ids)}))
"""


def measure(model: str, threads: int | None, count: int, max_model_len: int) -> dict:
    env = dict(os.environ)
    env.pop("RAYON_NUM_THREADS", None)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
    out = subprocess.run([sys.executable, "-c", CHILD, model, str(count), str(max_model_len)], env=env, cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    times = json.loads(out.splitlines()[-1])
    return {"threads": threads or "default", "median_ms": round(statistics.median(times["ms"]), 2),
            "min_ms": round(min(times["ms"]), 2), "tokens_last_request": times["tokens"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a model folder (a tokenizer folder with the model's config.json)")
    ap.add_argument("--threads", default="1,2,4,8,16,0", help="comma-separated; 0 = the tokenizer's default")
    ap.add_argument("--count", type=int, default=16, help="requests timed per thread count")
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rows = [measure(args.model, int(n), args.count, args.max_model_len) for n in args.threads.split(",")]
    print(f"{'threads':>8} {'median ms':>10} {'min ms':>8}")
    for row in rows:
        print(f"{row['threads']:>8} {row['median_ms']:>10} {row['min_ms']:>8}")
    if args.out:
        result = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "machine": platform.processor() or
                  platform.machine(), "model": args.model, "requests": args.count, "rows": rows}
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
