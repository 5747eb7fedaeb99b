"""Choose a calibration method: cross-validate every method by query, then compute thresholds.

Why cross-validation by query: the documents of one query are correlated, so a split by pair would
leak; folds follow the sha256 of the query text, so the same data gives the same folds on every
machine; and with a few hundred pairs, scoring every pair out-of-fold is far less noisy than one
small held-out part. The rendering is in ``report.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from python_backends.calibrate.drift import ScoreDistribution
from python_backends.calibrate.profiles import CALIBRATORS, CalibrationProfile, Calibrator

from .fitting import CalibrationFitError, fit_calibrator
from .metrics import (
    Metrics,
    OperatingPoint,
    evaluate,
    map_threshold_by_precision,
    map_threshold_by_quantile,
    operating_point,
    threshold_for_precision,
    threshold_for_recall,
)
from .pair_scoring import LabelledPair, ScoreResult

#: Order in which ties of held-out log-loss (within LOG_LOSS_TIE) are broken: fewer knobs first.
METHOD_PREFERENCE = ("identity", "sigmoid", "temperature", "platt", "affine", "isotonic")
LOG_LOSS_TIE = 1e-9


def query_folds(queries: Sequence[str], n_folds: int) -> np.ndarray:
    """Fold number of every pair: distinct queries in sha256 order are dealt round-robin into
    min(n_folds, Q) folds, so all documents of a query share a fold."""
    unique = sorted(set(queries), key=lambda q: hashlib.sha256(q.encode("utf-8")).hexdigest())
    if len(unique) < 2 or n_folds < 2:
        raise ValueError("cross-validation needs at least 2 distinct queries and 2 folds")
    fold_of = {q: i % n_folds for i, q in enumerate(unique)}
    return np.array([fold_of[q] for q in queries], dtype=np.int64)


@dataclass(frozen=True)
class MethodResult:
    """One method: ``calibrator`` fitted on all pairs, ``held_out`` the out-of-fold predictions
    (each pair predicted by the fit that did not see its query) and their metrics; ``note`` says
    why the method cannot be chosen."""

    method: str
    calibrator: Calibrator | None
    held_out: np.ndarray | None
    metrics: Metrics | None
    note: str | None


def _out_of_fold(
    method: str, raw: np.ndarray, labels: np.ndarray, folds: np.ndarray, target_smoothing: bool
) -> np.ndarray:
    probs = np.empty_like(raw)
    for k in np.unique(folds):
        test = folds == k
        probs[test] = fit_calibrator(method, raw[~test], labels[~test], target_smoothing).apply(raw[test])
    return probs


def compare_methods(
    raw: np.ndarray,
    labels: np.ndarray,
    folds: np.ndarray,
    methods: Sequence[str],
    target_smoothing: bool,
    n_bins: int,
) -> list[MethodResult]:
    """Cross-validate each method by query fold, and fit it once more on all pairs."""
    for k in np.unique(folds):
        if np.unique(labels[folds != k]).size < 2:
            raise ValueError(
                f"the training queries of fold {k} have only one class of label; add data or use fewer --folds"
            )
    results = []
    for method in methods:
        try:
            calibrator = fit_calibrator(method, raw, labels, target_smoothing)
            held_out = _out_of_fold(method, raw, labels, folds, target_smoothing)
        except CalibrationFitError as e:
            results.append(MethodResult(method, None, None, None, f"fit failed: {e}"))
            continue
        if calibrator.is_probability:
            results.append(MethodResult(method, calibrator, held_out, evaluate(held_out, labels, n_bins), None))
            continue
        in_range = held_out.min() >= 0.0 and held_out.max() <= 1.0
        metrics = evaluate(held_out, labels, n_bins) if in_range else None
        results.append(MethodResult(method, calibrator, held_out, metrics, "not a probability: never chosen"))
    return results


def choose_method(results: Sequence[MethodResult]) -> MethodResult:
    """Lowest held-out log-loss; near-ties go to the earlier method in METHOD_PREFERENCE."""
    candidates = sorted(
        (r for r in results if r.metrics is not None and r.note is None),
        key=lambda r: METHOD_PREFERENCE.index(r.method),
    )
    if not candidates:
        raise ValueError("no method could be fitted: " + "; ".join(f"{r.method}: {r.note}" for r in results))
    best = candidates[0]
    for r in candidates[1:]:
        if r.metrics.log_loss < best.metrics.log_loss - LOG_LOSS_TIE:  # type: ignore[union-attr]
            best = r
    return best


@dataclass(frozen=True)
class ThresholdMapping:
    """Where an old-scale threshold lands on the new (calibrated) scale, two ways."""

    old: OperatingPoint
    same_fraction: OperatingPoint
    same_precision: OperatingPoint | None


@dataclass(frozen=True)
class CalibrationRun:
    """Everything the report shows; ``profile`` holds the chosen method's fit on all pairs."""

    pairs: Sequence[LabelledPair]
    raw: np.ndarray
    labels: np.ndarray
    n_folds: int
    truncated: int | None
    results: list[MethodResult]
    chosen: MethodResult
    profile: CalibrationProfile
    calibrated: np.ndarray
    n_bins: int
    target_precision: float
    precision_point: OperatingPoint | None
    target_recall: float
    recall_point: OperatingPoint
    old_mappings: list[ThresholdMapping]

    @property
    def old_scores(self) -> np.ndarray | None:
        if self.pairs[0].old_score is None:
            return None
        return np.array([p.old_score for p in self.pairs], dtype=np.float64)


def analyse(
    pairs: Sequence[LabelledPair],
    scores: ScoreResult,
    *,
    name: str,
    version: str,
    model: str,
    score_type: str,
    methods: Sequence[str] = tuple(CALIBRATORS),
    n_folds: int = 5,
    target_smoothing: bool = True,
    n_bins: int = 10,
    target_precision: float = 0.9,
    target_recall: float = 0.9,
    old_thresholds: Sequence[float] = (),
    provenance: Mapping[str, Any] | None = None,
) -> CalibrationRun:
    """Cross-validate every method by query, choose one, and compute thresholds on its scale."""
    raw = np.asarray(scores.raw_scores, dtype=np.float64)
    labels = np.array([p.label for p in pairs], dtype=np.float64)
    folds = query_folds([p.query for p in pairs], n_folds)
    results = compare_methods(raw, labels, folds, methods, target_smoothing, n_bins)
    chosen = choose_method(results)
    fitted_on: dict[str, Any] = dict(provenance or {})
    fitted_on.update(
        pairs=len(pairs),
        queries=len({p.query for p in pairs}),
        relevant=int(labels.sum()),
        selected_by=f"out-of-fold log-loss, {int(folds.max()) + 1} folds by query",
        held_out_metrics=asdict(chosen.metrics),  # type: ignore[arg-type]
        target_smoothing=target_smoothing,
    )
    profile = CalibrationProfile(
        name, version, model, score_type, chosen.calibrator, fitted_on,  # type: ignore[arg-type]
        raw_score_distribution=ScoreDistribution.fit(raw),  # what the server's drift check compares with
    )
    calibrated = profile.apply(raw).astype(np.float64)
    run_old: list[ThresholdMapping] = []
    if pairs[0].old_score is not None:
        old = np.array([p.old_score for p in pairs], dtype=np.float64)
        for t in old_thresholds:
            new_t = map_threshold_by_quantile(old, calibrated, t)
            run_old.append(
                ThresholdMapping(
                    old=operating_point(old, labels, t),
                    same_fraction=operating_point(calibrated, labels, new_t),
                    same_precision=map_threshold_by_precision(old, calibrated, labels, t),
                )
            )
    return CalibrationRun(
        pairs=pairs,
        raw=raw,
        labels=labels,
        n_folds=int(folds.max()) + 1,
        truncated=scores.truncated,
        results=results,
        chosen=chosen,
        profile=profile,
        calibrated=calibrated,
        n_bins=n_bins,
        target_precision=target_precision,
        precision_point=threshold_for_precision(calibrated, labels, target_precision),
        target_recall=target_recall,
        recall_point=threshold_for_recall(calibrated, labels, target_recall),
        old_mappings=run_old,
    )
