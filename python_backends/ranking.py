"""The ranking rule of the whole contract: documents by raw score, best first, ties in input order (a stable sort of
float64 scores). The calibrate step ranks a request with it, the client merges a split call with it, and the gateway
compares a shadow's ranking with it: one rule, so the three cannot drift apart. Ranking by raw score is ranking by
calibrated score (calibration is monotone, per document), and raw scores still separate the ties a flat isotonic
step makes."""

from __future__ import annotations

import numpy as np


def top_n_ranking(scores: np.ndarray, top_n: int) -> np.ndarray:
    """The indices of the `top_n` best documents, best first."""
    order = np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")
    return order[:top_n].astype(np.int32)
