"""The seed-003 load shape in words of the benchmark tokenizer, so that token counts are exact.

Per request: one query of ~20 tokens, 64 documents of ~500 tokens, top_n=10 (seed 003). Words are the filler
words ``w<i>`` of the tokenizers ``benchmarks/build_models.py`` writes, each exactly one token, so a document of N
words is N tokens (plus the model's template). Same seed, same requests (``random.Random``, no global state).

Unlike ``loadtest/corpus.py`` (English words, ~N whitespace tokens), this one is for the random-weight models,
whose vocabulary has no English.

    python -m benchmarks.corpus --model /tmp/bench/models/qwen3-reranker-0.6b-random --count 1
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.build_models import filler_words  # noqa: E402

# The seed load shape, one definition for the load tests and the benchmark.
from loadtest.corpus import DOC_TOKENS, LENGTH_JITTER, N_DOCS, QUERY_TOKENS, RELEVANT_FRACTION, TOP_N  # noqa: E402,F401


@dataclass(frozen=True)
class Shape:
    n_docs: int = N_DOCS
    doc_tokens: int = DOC_TOKENS
    query_tokens: int = QUERY_TOKENS
    top_n: int = TOP_N
    length_jitter: float = LENGTH_JITTER


TINY_SHAPE = Shape(n_docs=4, doc_tokens=50, query_tokens=10, top_n=2, length_jitter=0.1)


@dataclass(frozen=True)
class Request:
    query: str
    documents: tuple[str, ...]
    top_n: int
    relevant: tuple[int, ...] = field(default=())

    def word_counts(self) -> tuple[int, list[int]]:
        return len(self.query.split()), [len(d.split()) for d in self.documents]


def make_request(words: list[str], seed: int, shape: Shape = Shape()) -> Request:
    if len(words) < 100:
        raise ValueError(f"only {len(words)} filler words")
    rng = random.Random(seed)
    query_words = rng.choices(words, k=shape.query_tokens)
    n_relevant = min(shape.n_docs, round(shape.n_docs * RELEVANT_FRACTION))
    relevant = tuple(sorted(rng.sample(range(shape.n_docs), n_relevant)))
    lo = max(1, round(shape.doc_tokens * (1 - shape.length_jitter)))
    hi = max(lo, round(shape.doc_tokens * (1 + shape.length_jitter)))
    docs = []
    for i in range(shape.n_docs):
        doc = rng.choices(words, k=rng.randint(lo, hi))
        if i in relevant:
            for pos in rng.sample(range(len(doc)), max(1, len(doc) * 15 // 100)):
                doc[pos] = rng.choice(query_words)
        docs.append(" ".join(doc))
    return Request(" ".join(query_words), tuple(docs), shape.top_n, relevant)


def make_requests(model_dir: str | Path, count: int, seed: int = 0, shape: Shape = Shape()) -> list[Request]:
    words = filler_words(model_dir)
    return [make_request(words, seed + k, shape) for k in range(count)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a folder written by benchmarks/build_models.py")
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args(argv)
    reqs = make_requests(args.model, args.count, args.seed, TINY_SHAPE if args.tiny else Shape())
    json.dump([{"query": r.query, "documents": list(r.documents), "top_n": r.top_n} for r in reqs], sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
