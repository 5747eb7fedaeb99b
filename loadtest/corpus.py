"""Deterministic generator of the reference load shape for the `reranker` ensemble.

The reference load shape: one request = one query of ~20 tokens and 64 candidate documents of
~500 tokens each, `top_n=10`. The text is drawn from a small word list shipped next to this
file (`words.txt`, plain English words), so nothing is downloaded. "Tokens" here are
whitespace-separated words; a real sub-word tokenizer gives about the same count or a little
more for such common words, so ~500 words is ~500-650 model tokens per document.

The same seed always gives the same request (``random.Random(seed)``, no global state), so
two runs of a load test, or a load test and the shipped perf_analyzer input file, send the
same text. A few documents per request (``relevant_fraction``) have query words mixed in, so
the ranking the engine returns is not arbitrary.

    python -m loadtest.corpus --count 2 --pretty      # print requests as JSON
    python -m loadtest.corpus --count 4 --perf-analyzer-json loadtest/perf_analyzer/reranker_input.json
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

WORDS_PATH = Path(__file__).with_name("words.txt")

N_DOCS = 64
DOC_TOKENS = 500
QUERY_TOKENS = 20
TOP_N = 10
LENGTH_JITTER = 0.10  # document lengths uniform in DOC_TOKENS * [0.9, 1.1]
RELEVANT_FRACTION = 0.125  # 8 of 64 documents carry query words


@dataclass(frozen=True)
class LoadRequest:
    """One reranking request: what a client sends to the `reranker` ensemble."""

    query: str
    documents: tuple[str, ...]
    top_n: int
    instruction: str | None = None
    # indices of the documents that had query words mixed in (for sanity checks, not sent)
    relevant: tuple[int, ...] = field(default=())

    def as_dict(self) -> dict:
        d = asdict(self)
        d["documents"] = list(self.documents)
        d["relevant"] = list(self.relevant)
        return d


def whitespace_tokens(text: str) -> int:
    """The token count this module targets: whitespace-separated words."""
    return len(text.split())


@functools.lru_cache(maxsize=4)
def load_words(path: str | Path = WORDS_PATH) -> tuple[str, ...]:
    words = tuple(w.strip() for w in Path(path).read_text(encoding="utf-8").split() if w.strip())
    if len(words) < 100:
        raise ValueError(f"word list {path} has only {len(words)} words")
    return words


def _sentences(rng: random.Random, words: list[str]) -> str:
    """Join words into sentences of 8..20 words (capitalised, full stop) without changing
    the whitespace token count."""
    out: list[str] = []
    i = 0
    while i < len(words):
        n = rng.randint(8, 20)
        chunk = words[i : i + n]
        chunk[0] = chunk[0].capitalize()
        chunk[-1] = chunk[-1] + "."
        out.extend(chunk)
        i += n
    return " ".join(out)


def make_request(
    seed: int = 0,
    *,
    n_docs: int = N_DOCS,
    doc_tokens: int = DOC_TOKENS,
    query_tokens: int = QUERY_TOKENS,
    top_n: int = TOP_N,
    length_jitter: float = LENGTH_JITTER,
    relevant_fraction: float = RELEVANT_FRACTION,
    instruction: str | None = None,
    words_path: str | Path = WORDS_PATH,
) -> LoadRequest:
    """Build request number ``seed`` of the load shape (deterministic)."""
    if n_docs < 1 or doc_tokens < 1 or query_tokens < 1 or top_n < 1:
        raise ValueError("n_docs, doc_tokens, query_tokens and top_n must be >= 1")
    if not 0.0 <= length_jitter < 1.0:
        raise ValueError("length_jitter must be in [0, 1)")
    vocab = load_words(str(words_path))
    rng = random.Random(seed)

    query_words = rng.choices(vocab, k=query_tokens)
    query = " ".join(query_words) + "?"

    n_relevant = min(n_docs, max(0, round(n_docs * relevant_fraction)))
    relevant = tuple(sorted(rng.sample(range(n_docs), n_relevant)))
    relevant_set = set(relevant)

    documents = []
    for i in range(n_docs):
        lo = max(1, round(doc_tokens * (1.0 - length_jitter)))
        hi = max(lo, round(doc_tokens * (1.0 + length_jitter)))
        length = rng.randint(lo, hi)
        doc_words = rng.choices(vocab, k=length)
        if i in relevant_set:
            # overwrite ~15% of positions with query words
            for pos in rng.sample(range(length), max(1, length * 15 // 100)):
                doc_words[pos] = rng.choice(query_words)
        documents.append(_sentences(rng, doc_words))

    return LoadRequest(
        query=query,
        documents=tuple(documents),
        top_n=top_n,
        instruction=instruction,
        relevant=relevant,
    )


def make_requests(count: int, seed: int = 0, **kwargs) -> list[LoadRequest]:
    """``count`` distinct requests, seeds ``seed .. seed+count-1``."""
    return [make_request(seed + k, **kwargs) for k in range(count)]


# The request shape's command-line flags (the generator's and grpc_load's), each with its default.
SHAPE_FLAGS = {"n_docs": N_DOCS, "doc_tokens": DOC_TOKENS, "query_tokens": QUERY_TOKENS, "top_n": TOP_N}


def add_shape_arguments(ap: argparse.ArgumentParser) -> None:
    for name, default in SHAPE_FLAGS.items():
        ap.add_argument("--" + name.replace("_", "-"), type=int, default=default)


def request_shape(args: argparse.Namespace) -> dict[str, int]:
    """The shape flags as parsed: the keyword arguments of make_request."""
    return {name: getattr(args, name) for name in SHAPE_FLAGS}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    add_shape_arguments(ap)
    ap.add_argument("--pretty", action="store_true")
    ap.add_argument(
        "--perf-analyzer-json",
        metavar="PATH",
        help="write perf_analyzer --input-data JSON (one entry per request) to PATH instead",
    )
    args = ap.parse_args(argv)
    reqs = make_requests(args.count, args.seed, **request_shape(args))
    if args.perf_analyzer_json:
        from loadtest.payload import perf_analyzer_input_data

        text = json.dumps(perf_analyzer_input_data(reqs), indent=2 if args.pretty else None)
        Path(args.perf_analyzer_json).write_text(text + "\n", encoding="utf-8")
        return 0
    json.dump([r.as_dict() for r in reqs], sys.stdout, indent=2 if args.pretty else None)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):  # run as a script: make `loadtest` importable
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main())
