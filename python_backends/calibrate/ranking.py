"""Order documents by score, best first; ties keep input order so results are deterministic."""

from __future__ import annotations

import numpy as np


def top_n_ranking(scores: np.ndarray, top_n: int) -> np.ndarray:
    order = np.argsort(-scores.astype(np.float64), kind="stable")
    return order[:top_n].astype(np.int32)
