"""Calibration and ranking metrics (scikit-learn's), thresholds, and old -> new threshold mapping.

Threshold convention everywhere: a pair is *kept* (predicted relevant) when score >= threshold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, roc_auc_score
from sklearn.metrics import log_loss as sklearn_log_loss

ArrayLike = np.ndarray | Sequence[float]


def _scores_labels(scores: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).ravel()
    y = np.asarray(labels, dtype=np.float64).ravel()
    if s.shape != y.shape:
        raise ValueError(f"{s.size} scores but {y.size} labels")
    if s.size == 0:
        raise ValueError("no pairs")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("labels must be 0 or 1")
    return s, y


def _probs_labels(probs: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    p, y = _scores_labels(probs, labels)
    if p.min() < 0.0 or p.max() > 1.0:
        raise ValueError("probabilities must lie in [0, 1]")
    return p, y


@dataclass(frozen=True)
class ReliabilityBins:
    """Equal-width bins of predicted probability; empty bins have NaN means and count 0."""

    edges: np.ndarray  # n_bins + 1 edges, 0 .. 1
    mean_predicted: np.ndarray
    fraction_positive: np.ndarray
    count: np.ndarray


def reliability_bins(probs: ArrayLike, labels: ArrayLike, n_bins: int = 10) -> ReliabilityBins:
    """scikit-learn's ``calibration_curve`` (uniform strategy) with the bin counts it does not return: bin b holds
    p in (b/n_bins, (b+1)/n_bins], the first bin also p = 0."""
    p, y = _probs_labels(probs, labels)
    if n_bins < 1:
        raise ValueError("n_bins must be >= 1")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    count = np.bincount(np.searchsorted(edges[1:-1], p, side="left"), minlength=n_bins)  # calibration_curve's rule
    fraction_positive, mean_predicted = np.full(n_bins, np.nan), np.full(n_bins, np.nan)
    fraction_positive[count > 0], mean_predicted[count > 0] = calibration_curve(y, p, n_bins=n_bins, strategy="uniform")
    return ReliabilityBins(edges, mean_predicted, fraction_positive, count)


def expected_calibration_error(probs: ArrayLike, labels: ArrayLike, n_bins: int = 10) -> float:
    """ECE = sum over non-empty bins b of |mean(p in b) - mean(y in b)| * n_b / n (bins as in
    ``reliability_bins``: equal width on [0, 1])."""
    bins = reliability_bins(probs, labels, n_bins)
    filled = bins.count > 0
    gaps = np.abs(bins.mean_predicted[filled] - bins.fraction_positive[filled])
    return float(np.sum(gaps * bins.count[filled]) / bins.count.sum())


def brier_score(probs: ArrayLike, labels: ArrayLike) -> float:
    """Mean squared error of the probability against the 0/1 label."""
    p, y = _probs_labels(probs, labels)
    return float(brier_score_loss(y, p, pos_label=1.0))


def log_loss(probs: ArrayLike, labels: ArrayLike) -> float:
    """Mean cross-entropy; scikit-learn clips p to [eps, 1 - eps] (float64 eps, 2.2e-16), so a confident miss
    costs ~36, not inf."""
    p, y = _probs_labels(probs, labels)
    return float(sklearn_log_loss(y, p, labels=[0.0, 1.0]))


def roc_auc(scores: ArrayLike, labels: ArrayLike) -> float:
    """ROC-AUC; tied scores count 1/2 (the Mann-Whitney U)."""
    s, y = _scores_labels(scores, labels)
    if np.unique(y).size < 2:
        raise ValueError("ROC-AUC needs both classes")
    return float(roc_auc_score(y, s))


@dataclass(frozen=True)
class Metrics:
    """The calibration quality of one set of probabilities."""

    ece: float
    brier: float
    log_loss: float
    auc: float


def evaluate(probs: np.ndarray, labels: np.ndarray, n_bins: int) -> Metrics:
    return Metrics(
        ece=expected_calibration_error(probs, labels, n_bins),
        brier=brier_score(probs, labels),
        log_loss=log_loss(probs, labels),
        auc=roc_auc(probs, labels),
    )


@dataclass(frozen=True)
class OperatingPoint:
    """What keeping the pairs with score >= threshold gives; precision is NaN when none is kept."""

    threshold: float
    precision: float
    recall: float
    kept_fraction: float


def operating_point(scores: ArrayLike, labels: ArrayLike, threshold: float) -> OperatingPoint:
    s, y = _scores_labels(scores, labels)
    kept = s >= threshold
    tp = float(y[kept].sum())
    n_kept = int(kept.sum())
    n_pos = float(y.sum())
    return OperatingPoint(
        threshold=float(threshold),
        precision=tp / n_kept if n_kept else float("nan"),
        recall=tp / n_pos if n_pos else float("nan"),
        kept_fraction=n_kept / s.size,
    )


def _curve(scores: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Every distinct score as a threshold, highest first, with precision, recall and kept count."""
    s, y = _scores_labels(scores, labels)
    n_pos = int(y.sum())
    if n_pos == 0:
        raise ValueError("thresholds need at least one relevant pair")
    order = np.argsort(-s, kind="mergesort")
    s_desc, y_desc = s[order], y[order]
    last_of_group = np.flatnonzero(np.r_[s_desc[1:] != s_desc[:-1], True])
    tp = np.cumsum(y_desc)[last_of_group]
    kept = last_of_group + 1
    return s_desc[last_of_group], tp / kept, tp / n_pos, kept, s.size


def threshold_for_precision(scores: ArrayLike, labels: ArrayLike, target: float) -> OperatingPoint | None:
    """Lowest threshold whose precision is >= target (so the highest recall at that precision);
    None when no threshold reaches it."""
    thresholds, precision, recall, kept, n = _curve(scores, labels)
    ok = np.flatnonzero(precision >= target)
    if ok.size == 0:
        return None
    i = int(ok[-1])
    return OperatingPoint(float(thresholds[i]), float(precision[i]), float(recall[i]), float(kept[i]) / n)


def threshold_for_recall(scores: ArrayLike, labels: ArrayLike, target: float) -> OperatingPoint:
    """Highest threshold whose recall is >= target (recall only grows as the threshold falls)."""
    thresholds, precision, recall, kept, n = _curve(scores, labels)
    i = int(np.flatnonzero(recall >= min(target, 1.0))[0])
    return OperatingPoint(float(thresholds[i]), float(precision[i]), float(recall[i]), float(kept[i]) / n)


def map_threshold_by_quantile(old_scores: ArrayLike, new_scores: ArrayLike, old_threshold: float) -> float:
    """New-scale threshold that keeps as many of the same pairs as ``old_threshold`` kept.

    If the old threshold kept k of n pairs, this is the k-th highest new score (ties at it can keep
    a few more); above every new score when k = 0. Needs no labels.
    """
    old = np.asarray(old_scores, dtype=np.float64).ravel()
    new = np.sort(np.asarray(new_scores, dtype=np.float64).ravel())[::-1]
    if old.shape != new.shape or old.size == 0:
        raise ValueError("old and new scores must be non-empty and of the same pairs")
    k = int(np.sum(old >= old_threshold))
    if k == 0:
        return float(np.nextafter(new[0], np.inf))
    return float(new[k - 1])


def map_threshold_by_precision(
    old_scores: ArrayLike, new_scores: ArrayLike, labels: ArrayLike, old_threshold: float
) -> OperatingPoint | None:
    """New-scale threshold with at least the precision that ``old_threshold`` had on these pairs
    (highest recall among those); None when the old threshold kept nothing or the new scores
    cannot reach that precision."""
    old_point = operating_point(old_scores, labels, old_threshold)
    if np.isnan(old_point.precision):
        return None
    return threshold_for_precision(new_scores, labels, old_point.precision)
