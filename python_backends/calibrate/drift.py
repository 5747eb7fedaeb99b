"""Score drift: is the live raw-score distribution still the one the calibration profile was fitted on?

A profile's probabilities hold only for raw scores distributed like its fitting data. When traffic moves to
another domain the scores move too and every calibrated threshold silently changes meaning, while the
ranking looks fine. So a profile stores the distribution it was fitted on (quantile bins), and the calibrate
step compares a sliding window of live raw scores with it by the population stability index:

    PSI = sum_i (live_i - fitted_i) * ln(live_i / fitted_i)

over the profile's bins. Common reading: < 0.1 no shift, 0.1-0.25 moderate, > 0.25 the profile no longer
describes the traffic (refit it). numpy only: this runs on the serving path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: PSI above which the profile is taken not to hold (the Helm alert's threshold).
PSI_ALERT = 0.25
#: Floor on a bin's fraction, so an empty bin gives a large but finite PSI term instead of infinity.
MIN_FRACTION = 1e-4
DEFAULT_BINS = 10


@dataclass(frozen=True)
class ScoreDistribution:
    """Bins of the raw scores a profile was fitted on: ``edges`` are the k-1 inner cut points (bin i holds
    edges[i-1] <= s < edges[i]; the outer bins are open-ended), ``fractions`` the k shares of fitting scores."""

    edges: tuple[float, ...]
    fractions: tuple[float, ...]

    def __post_init__(self) -> None:
        edges, fractions = np.asarray(self.edges, dtype=np.float64), np.asarray(self.fractions, dtype=np.float64)
        if fractions.size < 2 or edges.size != fractions.size - 1:
            raise ValueError(f"needs k >= 2 fractions and k - 1 edges, got {fractions.size} and {edges.size}")
        if not (np.isfinite(edges).all() and np.isfinite(fractions).all()):
            raise ValueError("edges and fractions must be finite numbers")
        if (np.diff(edges) <= 0).any():
            raise ValueError("edges must be strictly increasing")
        if (fractions < 0).any() or abs(float(fractions.sum()) - 1.0) > 1e-6:
            raise ValueError(f"fractions must be >= 0 and sum to 1, sum is {float(fractions.sum()):.6g}")

    @classmethod
    def fit(cls, raw_scores: Sequence[float] | np.ndarray, n_bins: int = DEFAULT_BINS) -> "ScoreDistribution":
        """Quantile bins of the fitting scores (ties merged, so every edge is distinct)."""
        x = np.asarray(raw_scores, dtype=np.float64)
        edges = np.unique(np.quantile(x, np.linspace(0, 1, n_bins + 1)[1:-1]))
        counts = np.bincount(np.searchsorted(edges, x, side="right"), minlength=edges.size + 1)
        return cls(tuple(edges.tolist()), tuple((counts / counts.sum()).tolist()))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ScoreDistribution":
        if not isinstance(data, Mapping) or set(data) != {"edges", "fractions"}:
            raise ValueError("raw_score_distribution must be an object with exactly 'edges' and 'fractions'")
        values = {}
        for key in ("edges", "fractions"):
            items = data[key]
            if not isinstance(items, list) or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in items):
                raise ValueError(f"raw_score_distribution.{key} must be a list of numbers")
            values[key] = tuple(float(v) for v in items)
        return cls(**values)

    def to_dict(self) -> dict[str, list[float]]:
        return {"edges": list(self.edges), "fractions": list(self.fractions)}

    def bin_of(self, raw_scores: np.ndarray) -> np.ndarray:
        return np.searchsorted(np.asarray(self.edges), np.asarray(raw_scores, dtype=np.float64), side="right")


def population_stability_index(expected: Sequence[float] | np.ndarray, actual: Sequence[float] | np.ndarray) -> float:
    """PSI of two distributions over the same bins, both floored at MIN_FRACTION."""
    e = np.maximum(np.asarray(expected, dtype=np.float64), MIN_FRACTION)
    a = np.maximum(np.asarray(actual, dtype=np.float64), MIN_FRACTION)
    return float(np.sum((a - e) * np.log(a / e)))


class DriftWindow:
    """The last ``size`` raw scores, kept as bin numbers with running counts (O(1) memory per score)."""

    def __init__(self, distribution: ScoreDistribution, size: int) -> None:
        if size < 1:
            raise ValueError(f"drift window must hold at least 1 score, got {size}")
        self.distribution = distribution
        self.size = size
        self._ring = np.zeros(size, dtype=np.int64)
        self._counts = np.zeros(len(distribution.fractions), dtype=np.int64)
        self._seen = 0

    def add(self, raw_scores: np.ndarray) -> None:
        scores = np.asarray(raw_scores, dtype=np.float64).ravel()
        if scores.size >= self.size:  # the batch alone fills the window: start it again from its tail
            self._ring[:] = self.distribution.bin_of(scores[-self.size:])
            self._counts[:] = np.bincount(self._ring, minlength=self._counts.size)
            self._seen = self.size  # the ring now starts at slot 0 with the oldest kept score
            return
        bins = self.distribution.bin_of(scores)
        slots = (self._seen + np.arange(bins.size)) % self.size
        replaced = slots[self._seen + np.arange(bins.size) >= self.size]  # slots that already hold a score
        np.subtract.at(self._counts, self._ring[replaced], 1)
        self._ring[slots] = bins
        np.add.at(self._counts, bins, 1)
        self._seen += bins.size

    @property
    def full(self) -> bool:
        return self._seen >= self.size

    def psi(self) -> float | None:
        """PSI of the window against the profile's distribution; None until the window is full."""
        if not self.full:
            return None
        return population_stability_index(self.distribution.fractions, self._counts / self.size)
