"""How long the preprocess step's encoder takes for one reference request, by the number of threads the Rust tokenizer
may use (``RAYON_NUM_THREADS``), in the Python that runs it.

At one request at a time the document tokenizing is all of the preprocess step's time and none of it overlaps the
GPU, so it is the first thing a single request waits for. The tokenizer spreads a request's documents over its thread
pool; this finds how far that scales on the host (each thread count in a fresh child process, since the pool is sized
once per process). A Qwen3 checkpoint's encoder tokenizes its documents on the tokenizer's tiktoken twin
(python_backends/encoding/fast_bpe.py, on as many threads); `--compare-tokenizers` also times the same encoder with
the twin refused (the `tokenizers` library alone), the two alternated request by request, and their ratio. Same
requests as the GPU benchmark (benchmarks/corpus.py). Printed as a table and written as JSON:

    python -m benchmarks.tokenize_threads --model MODEL_DIR --compare-tokenizers --out /tmp/tokenize-threads.json

MODEL_DIR: a checkpoint folder (config.json, tokenizer files; a Qwen3 reranker's model card front matter), e.g. one
that benchmarks/build_models.py built.
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

# Encoders by name: "served" as the step builds it, "tokenizers" with the tiktoken twin refused.
CHILD = r"""
import json, sys, time
from benchmarks.corpus import make_requests
from python_backends.families import detect_model, qwen3_yes_no
from python_backends.families import make_encoder
model, count, max_model_len, names = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
requests = make_requests(model, count)
twins = []  # the twin the served encoder was given (a Qwen3 one only)
qwen3_yes_no.fast_bpe = lambda tokenizer, build=qwen3_yes_no.fast_bpe: twins.append(build(tokenizer)) or twins[-1]
encoders = {}
for name in names:
    if name == "tokenizers":
        qwen3_yes_no.fast_bpe = lambda tokenizer: None
    encoders[name] = make_encoder(detect_model(model).family, model, max_model_len)
    encoders[name].encode(requests[0].query, list(requests[0].documents), None)  # pools start, caches fill, once
times = {name: [] for name in names}
for r in requests:  # alternated: the host's drift falls on both
    for name, encoder in encoders.items():
        t = time.perf_counter()
        encoded = encoder.encode(r.query, list(r.documents), None)
        times[name].append((time.perf_counter() - t) * 1000)
print(json.dumps({"ms": times, "tokens": sum(len(x) for x in encoded.token_ids), "twin": any(twins)}))
"""


def measure(model: str, threads: int | None, count: int, max_model_len: int, compare: bool) -> dict:
    env = dict(os.environ)
    env.pop("RAYON_NUM_THREADS", None)
    if threads:
        env["RAYON_NUM_THREADS"] = str(threads)
    names = "served,tokenizers" if compare else "served"
    out = subprocess.run([sys.executable, "-c", CHILD, model, str(count), str(max_model_len), names], env=env,
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    result = json.loads(out.splitlines()[-1])
    row = {"threads": threads or "default", "twin": result["twin"], "tokens_last_request": result["tokens"]}
    for name, times in result["ms"].items():
        prefix = "" if name == "served" else f"{name}_"
        row |= {f"{prefix}median_ms": round(statistics.median(times), 2), f"{prefix}min_ms": round(min(times), 2)}
    if compare:
        row["ratio"] = round(row["median_ms"] / row["tokenizers_median_ms"], 3)  # served / tokenizers alone
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a model folder (a tokenizer folder with the model's config.json)")
    ap.add_argument("--threads", default="1,2,4,8,16,0", help="comma-separated; 0 = the tokenizer's default")
    ap.add_argument("--count", type=int, default=16, help="requests timed per thread count")
    ap.add_argument("--max-model-len", type=int, default=8192)
    ap.add_argument("--compare-tokenizers", action="store_true",
                    help="also time the encoder with the tiktoken twin refused (the tokenizers library alone)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rows = [measure(args.model, int(n), args.count, args.max_model_len, args.compare_tokenizers)
            for n in args.threads.split(",")]
    extra = ("tokenizers median ms", "served / tokenizers") if args.compare_tokenizers else ()
    print(f"{'threads':>8} {'twin':>5} {'median ms':>10} {'min ms':>8}" + "".join(f" {name:>21}" for name in extra))
    for row in rows:
        line = f"{row['threads']:>8} {str(row['twin']):>5} {row['median_ms']:>10} {row['min_ms']:>8}"
        print(line + (f" {row['tokenizers_median_ms']:>21} {row['ratio']:>21}" if extra else ""))
    if args.out:
        result = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "machine": platform.processor() or
                  platform.machine(), "model": args.model, "requests": args.count, "max_model_len": args.max_model_len,
                  "rows": rows}
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
