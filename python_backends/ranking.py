"""The ranking rules of the whole contract: how long RANKING is (`ranking_length`, TOP_N's rule), and its order:
documents by raw score, best first, ties in input order (a stable sort of float64 scores). The calibrate step ranks a
request with them, the client merges a split call with them, and the gateway compares a shadow's ranking with them:
one rule each, so the three cannot drift apart. Ranking by raw score is ranking by calibrated score (calibration is
monotone, per document), and raw scores still separate the ties a flat isotonic step makes."""

from __future__ import annotations

import numpy as np

from .contract import TOP_N
from .errors import InvalidRequest


def top_n_ranking(scores: np.ndarray, top_n: int) -> np.ndarray:
    """The indices of the `top_n` best documents, best first."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return order[:top_n].astype(np.int32)


def ranking_length(top_n: int | None, n_documents: int) -> int:
    """TOP_N's one rule, for the steps, the client and the gateway: absent means every document, otherwise
    1 <= TOP_N <= N. Returns the length of RANKING."""
    if top_n is None:
        return n_documents
    if not 1 <= top_n <= n_documents:
        raise InvalidRequest(f"TOP_N must be between 1 and the number of documents ({n_documents}), got {top_n}", TOP_N)
    return top_n
