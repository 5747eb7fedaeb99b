"""Okapi BM25, the lexical baseline the reranker is compared with (and the man-page set's hard-negative miner)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

TOKEN = re.compile(r"[a-z0-9_]+")
STOPWORDS = frozenset("a an and are as at be by for from in into is it of on or that the this to with".split())


def tokens(text: str) -> list[str]:
    return [t for t in TOKEN.findall(text.lower()) if t not in STOPWORDS]


class BM25:
    """BM25 (k1 = 1.2, b = 0.75) over a fixed corpus; ``score(query, i)`` scores the corpus's i-th document."""

    def __init__(self, documents: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.docs = [Counter(tokens(d)) for d in documents]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.avg = sum(self.lengths) / len(self.lengths)
        df = Counter(t for d in self.docs for t in d)
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    def score(self, query: str, i: int) -> float:
        doc, norm = self.docs[i], self.k1 * (1 - self.b + self.b * self.lengths[i] / self.avg)
        return sum(self.idf[t] * doc[t] * (self.k1 + 1) / (doc[t] + norm) for t in tokens(query) if t in doc)
