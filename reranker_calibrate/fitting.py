"""Fit calibrators from (raw score, 0/1 label) pairs with scikit-learn.

Platt, affine and temperature are one-feature logistic regressions (temperature without an intercept: p =
sigmoid(u * raw), T = 1/u), fitted unpenalised by Newton's method to a tight tolerance (a refit of a shipped profile
agrees with it to ~1e-12); isotonic is scikit-learn's pool-adjacent-violators. The fitted parameters go into the server's
calibrator classes, which apply them with numpy alone.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from python_backends.calibrate.profiles import (
    CALIBRATORS,
    AffineCalibrator,
    Calibrator,
    IdentityCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    SigmoidCalibrator,
    TemperatureCalibrator,
)

#: Newton steps allowed; the fits of the shipped data sets take under 10.
MAX_NEWTON_STEPS = 100
#: Stop when the largest gradient component of the mean cross-entropy is below this.
GRADIENT_TOLERANCE = 1e-10


class CalibrationFitError(ValueError):
    """A method cannot be fitted on this data (one class only, reversed ranking, no convergence)."""


def _check_xy(raw: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """1-D float64 scores and labels, checked for what every fit needs."""
    x = np.asarray(raw, dtype=np.float64).ravel()
    y = np.asarray(labels, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise CalibrationFitError(f"{x.size} scores but {y.size} labels")
    if not np.isfinite(x).all():
        raise CalibrationFitError("scores must be finite")
    if not np.isin(y, (0.0, 1.0)).all():
        raise CalibrationFitError("labels must be 0 or 1")
    if y.min(initial=1.0) == y.max(initial=0.0):
        raise CalibrationFitError("labels must contain both classes (0 and 1)")
    if np.unique(x).size < 2:
        raise CalibrationFitError("scores must take at least 2 distinct values")
    return x, y


def platt_targets(labels: np.ndarray, target_smoothing: bool) -> np.ndarray:
    """Regression targets; with smoothing, Platt's (1999) t+ = (N+ + 1)/(N+ + 2), t- = 1/(N- + 2).

    Smoothing keeps the fit finite when a small calibration set is perfectly separated.
    """
    if not target_smoothing:
        return labels
    n_pos = float(labels.sum())
    n_neg = float(labels.size - n_pos)
    return np.where(labels == 1.0, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))


def _separable(x: np.ndarray, t: np.ndarray, fit_intercept: bool) -> bool:
    """Whether 0/1 targets are split by one cut of the score (at 0 without an intercept): then the likelihood
    grows without bound as the slope does, and the solver stops at an arbitrary large slope."""
    if not np.isin(t, (0.0, 1.0)).all():
        return False  # smoothed targets: every pair pulls toward a finite slope
    pos, neg = x[t == 1.0], x[t == 0.0]
    if fit_intercept:
        return bool(neg.max() <= pos.min() or pos.max() <= neg.min())
    return bool(neg.max() <= 0.0 <= pos.min() or pos.max() <= 0.0 <= neg.min())


def _logistic(x: np.ndarray, t: np.ndarray, fit_intercept: bool) -> tuple[float, float]:
    """Slope and intercept (0 without one) minimising the cross-entropy of sigmoid(w * x [+ c]) against targets
    t in [0, 1]: each pair enters twice, as class 1 with weight t and as class 0 with weight 1 - t."""
    if _separable(x, t, fit_intercept):
        raise CalibrationFitError(
            "logistic fit has no finite optimum (relevant and irrelevant scores are separable: fit with target smoothing)"
        )
    model = LogisticRegression(
        C=np.inf, solver="newton-cholesky", tol=GRADIENT_TOLERANCE, max_iter=MAX_NEWTON_STEPS, fit_intercept=fit_intercept
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        try:
            model.fit(np.r_[x, x][:, None], np.r_[np.ones_like(x), np.zeros_like(x)], sample_weight=np.r_[t, 1.0 - t])
        except ConvergenceWarning:
            raise CalibrationFitError(f"logistic fit did not converge in {MAX_NEWTON_STEPS} Newton steps") from None
    return float(model.coef_[0, 0]), float(model.intercept_[0]) if fit_intercept else 0.0


def fit_platt(
    raw: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[int], target_smoothing: bool = True
) -> PlattCalibrator:
    """Maximum-likelihood a, b of p = sigmoid(a * raw + b)."""
    x, y = _check_xy(raw, labels)
    a, b = _logistic(x, platt_targets(y, target_smoothing), fit_intercept=True)
    if not a > 0:
        raise CalibrationFitError(f"platt fit gave a={a:.4g} <= 0: the scores do not rank relevant pairs higher")
    return PlattCalibrator(a=a, b=b)


def fit_temperature(
    raw: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[int], target_smoothing: bool = True
) -> TemperatureCalibrator:
    """Maximum-likelihood T of p = sigmoid(raw / T): Platt with b fixed at 0, fitted as u = 1/T."""
    x, y = _check_xy(raw, labels)
    u, _ = _logistic(x, platt_targets(y, target_smoothing), fit_intercept=False)
    if not u > 0 and x[y == 1].mean() <= x[y == 0].mean():
        raise CalibrationFitError("temperature fit gave 1/T <= 0: the scores do not rank relevant pairs higher")
    if not u > 0:
        # Not a ranking problem: sigmoid(raw / T) has no bias term, so raw 0 always maps to 0.5. Scores that are all
        # positive with few relevant pairs (cosines) can only be pushed toward a low probability by a negative 1/T.
        raise CalibrationFitError(
            f"temperature scaling has no bias term (raw score 0 always maps to 0.5), so it cannot fit these scores: "
            f"{y.mean():.1%} of the pairs are relevant while the mean raw score is {x.mean():.3g}; "
            "use platt or affine, which fit an offset"
        )
    return TemperatureCalibrator(temperature=1.0 / u)


def fit_affine(
    raw: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[int], target_smoothing: bool = True
) -> AffineCalibrator:
    """vLLM's logit_mean/logit_sigma: the Platt fit reparametrised, mean = -b/a, sigma = 1/a."""
    platt = fit_platt(raw, labels, target_smoothing)
    return AffineCalibrator(logit_mean=-platt.b / platt.a, logit_sigma=1.0 / platt.a)


def fit_isotonic(raw: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[int]) -> IsotonicCalibrator:
    """Pool-adjacent-violators (tied scores pooled first); the knots are the ends of each flat block, between
    which the server interpolates linearly as scikit-learn's ``predict`` does."""
    x, y = _check_xy(raw, labels)
    fit = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip").fit(x, y)
    return IsotonicCalibrator(x=fit.X_thresholds_.tolist(), y=fit.y_thresholds_.tolist())


def fit_calibrator(
    method: str,
    raw: np.ndarray | Sequence[float],
    labels: np.ndarray | Sequence[int],
    target_smoothing: bool = True,
) -> Calibrator:
    """Fit ``method`` (a key of CALIBRATORS) on the pairs; identity and sigmoid have nothing to fit."""
    if method not in CALIBRATORS:
        raise CalibrationFitError(f"unknown method {method!r} (expected one of: {', '.join(sorted(CALIBRATORS))})")
    if method == "identity":
        return IdentityCalibrator()
    if method == "sigmoid":
        return SigmoidCalibrator()
    if method == "isotonic":
        return fit_isotonic(raw, labels)
    fit = {"platt": fit_platt, "temperature": fit_temperature, "affine": fit_affine}[method]
    return fit(raw, labels, target_smoothing)
