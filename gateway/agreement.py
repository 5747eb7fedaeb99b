"""How far a candidate model's ranking agrees with the primary's on the same documents: Spearman's rank correlation
and the overlap of their top k. Exact and numpy only (the gateway does not carry scipy)."""

from __future__ import annotations

import numpy as np

from python_backends.ranking import top_n_ranking


def average_ranks(scores: np.ndarray) -> np.ndarray:
    """Ranks 1..n of `scores`, ties sharing the mean of the ranks they span (scipy.stats.rankdata's 'average')."""
    order = np.argsort(scores, kind="stable")
    ordered = scores[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])  # first position of each run of equal scores
    ends = np.r_[starts[1:], ordered.size]
    ranks = np.empty(ordered.size, dtype=np.float64)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def spearman(primary: np.ndarray, candidate: np.ndarray) -> float | None:
    """Pearson correlation of the two rankings' average ranks; None when either ranks nothing (fewer than two
    documents, or all scores equal)."""
    a = average_ranks(np.asarray(primary, dtype=np.float64)) if len(primary) > 1 else None
    b = average_ranks(np.asarray(candidate, dtype=np.float64)) if len(candidate) > 1 else None
    if a is None or b is None or a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def top_k_overlap(primary: np.ndarray, candidate: np.ndarray, k: int) -> float | None:
    """Share of the primary's top k documents that are also in the candidate's (ties: the earlier document); None
    for k or fewer documents, where every document is in both top k and the overlap would say 1 whatever the
    rankings."""
    if len(primary) <= k:
        return None
    return len(_best(primary, k) & _best(candidate, k)) / k


def _best(scores: np.ndarray, k: int) -> set[int]:
    return set(top_n_ranking(scores, k).tolist())
