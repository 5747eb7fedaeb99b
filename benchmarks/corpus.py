"""The reference load shape cut from real English text, in the benchmark model's own tokens.

Per request: one query of ~20 tokens and 64 documents of 450-550 tokens (``loadtest/corpus.py``'s
constants), top_n 10. The text is the prose of the Python documentation topics that every CPython ships
(``pydoc_data.topics``: ~25,000 words of English sentences once code, tables and headings are dropped), so nothing
is downloaded and the same interpreter gives the same text. Passages are cut in the model's tokenizer's ids at
seeded offsets and decoded back to text, so a document of N ids re-tokenizes to ~N tokens (the BPE may merge
differently at the two cut ends). Same seed, same requests (``random.Random``, no global state).

    python -m benchmarks.corpus --model /tmp/bench/hf/.../snapshots/<rev> --count 1
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The reference load shape, one definition for the load tests and the benchmark.
from loadtest.corpus import DOC_TOKENS, LENGTH_JITTER, N_DOCS, QUERY_TOKENS, TOP_N  # noqa: E402


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
    """What a client sends; `instruction` None = the model's default (the field loadtest/payload.py reads)."""

    query: str
    documents: tuple[str, ...]
    top_n: int
    instruction: str | None = field(default=None)


WORD = re.compile(r"[A-Za-z][a-z'-]*[.,;:!?]?")


def _is_prose(line: str) -> bool:
    """A sentence-like line: six words or more, four in five of them plain words (not code, not a heading rule)."""
    words = line.split()
    return len(words) >= 6 and sum(1 for w in words if WORD.fullmatch(w)) >= 0.8 * len(words)


@functools.lru_cache(maxsize=1)
def english_text() -> str:
    """Prose lines of pydoc_data.topics: indented lines (code, tables), headings and code-like lines dropped."""
    from pydoc_data.topics import topics

    lines = []
    for key in sorted(topics):
        for line in topics[key].splitlines():
            text = line.strip()
            if line.startswith((" ", "\t")) or not _is_prose(text):
                continue
            lines.append(text)
    return " ".join(lines)


def corpus_info() -> dict:
    text = english_text()
    return {"source": f"pydoc_data.topics of Python {sys.version.split()[0]} (prose lines)",
            "words": len(text.split()), "sha256": hashlib.sha256(text.encode()).hexdigest()[:16]}


def _passage(rng: random.Random, ids: list[int], decode, length: int) -> str:
    start = rng.randrange(0, len(ids) - length)
    return decode(ids[start:start + length]).strip()


def make_requests(model_dir: str | Path, count: int, seed: int = 0, shape: Shape = Shape()) -> list[Request]:
    """`count` distinct requests of real text in the model's tokens (tokenizer.json of `model_dir`)."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
    ids = tok.encode(english_text(), add_special_tokens=False).ids

    def decode(piece: list[int]) -> str:
        return tok.decode(piece, skip_special_tokens=True)

    lo = max(1, round(shape.doc_tokens * (1 - shape.length_jitter)))
    hi = max(lo, round(shape.doc_tokens * (1 + shape.length_jitter)))
    out = []
    for k in range(count):
        rng = random.Random(seed + k)
        query = _passage(rng, ids, decode, shape.query_tokens)
        docs = tuple(_passage(rng, ids, decode, rng.randint(lo, hi)) for _ in range(shape.n_docs))
        out.append(Request(query, docs, shape.top_n))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a folder with tokenizer.json")
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
