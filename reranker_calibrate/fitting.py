"""Fit calibrators from (raw score, 0/1 label) pairs, in plain numpy.

Why no scikit-learn: the fits are 1-D and small (a logistic regression with two parameters and
pool-adjacent-violators), and keeping them here keeps the tool's dependencies to numpy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from python_backends.calibrate.profiles import (
    CALIBRATORS,
    AffineCalibrator,
    Calibrator,
    IdentityCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    SigmoidCalibrator,
    TemperatureCalibrator,
    sigmoid,
)

MAX_NEWTON_STEPS = 100


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


def _logistic_loss(z: np.ndarray, t: np.ndarray) -> float:
    """Sum of cross-entropies of sigmoid(z) against targets t, without exp overflow."""
    return float(np.sum(np.logaddexp(0.0, z) - t * z))


def _newton_logistic(x: np.ndarray, t: np.ndarray, fit_intercept: bool) -> np.ndarray:
    """Minimise the cross-entropy of sigmoid(w0 * x [+ w1]) by damped Newton steps; returns w."""
    design = np.stack([x, np.ones_like(x)], axis=1) if fit_intercept else x[:, None]
    w = np.zeros(design.shape[1])
    loss = _logistic_loss(design @ w, t)
    for _ in range(MAX_NEWTON_STEPS):
        p = sigmoid(design @ w)
        grad = design.T @ (p - t)
        hess = design.T @ (design * (p * (1.0 - p))[:, None])
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:
            break
        scale = 1.0
        while scale > 1e-10:  # backtracking keeps every step a descent step
            new_w = w - scale * step
            new_loss = _logistic_loss(design @ new_w, t)
            if new_loss <= loss:
                break
            scale /= 2.0
        else:
            return w  # no descent possible: at the optimum to rounding
        w, loss = new_w, new_loss
        if np.max(np.abs(scale * step)) < 1e-10 * (1.0 + np.max(np.abs(w))):
            return w
    raise CalibrationFitError(
        f"logistic fit did not converge in {MAX_NEWTON_STEPS} Newton steps "
        "(relevant and irrelevant scores are separable: fit with target smoothing)"
    )


def fit_platt(
    raw: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[int], target_smoothing: bool = True
) -> PlattCalibrator:
    """Maximum-likelihood a, b of p = sigmoid(a * raw + b), by Newton (IRLS) on standardised scores."""
    x, y = _check_xy(raw, labels)
    mu, sd = float(x.mean()), float(x.std())
    w_std, b_std = _newton_logistic((x - mu) / sd, platt_targets(y, target_smoothing), fit_intercept=True)
    a, b = w_std / sd, b_std - w_std * mu / sd
    if not a > 0:
        raise CalibrationFitError(f"platt fit gave a={a:.4g} <= 0: the scores do not rank relevant pairs higher")
    return PlattCalibrator(a=float(a), b=float(b))


def fit_temperature(
    raw: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[int], target_smoothing: bool = True
) -> TemperatureCalibrator:
    """Maximum-likelihood T of p = sigmoid(raw / T): Platt with b fixed at 0, fitted as u = 1/T."""
    x, y = _check_xy(raw, labels)
    sd = float(np.sqrt(np.mean(x * x)))
    (u_std,) = _newton_logistic(x / sd, platt_targets(y, target_smoothing), fit_intercept=False)
    if not u_std > 0 and x[y == 1].mean() <= x[y == 0].mean():
        raise CalibrationFitError("temperature fit gave 1/T <= 0: the scores do not rank relevant pairs higher")
    if not u_std > 0:
        # Not a ranking problem: sigmoid(raw / T) has no bias term, so raw 0 always maps to 0.5. Scores that are all
        # positive with few relevant pairs (cosines) can only be pushed toward a low probability by a negative 1/T.
        raise CalibrationFitError(
            f"temperature scaling has no bias term (raw score 0 always maps to 0.5), so it cannot fit these scores: "
            f"{y.mean():.1%} of the pairs are relevant while the mean raw score is {x.mean():.3g}; "
            "use platt or affine, which fit an offset"
        )
    return TemperatureCalibrator(temperature=float(sd / u_std))


def fit_affine(
    raw: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[int], target_smoothing: bool = True
) -> AffineCalibrator:
    """vLLM's logit_mean/logit_sigma: the Platt fit reparametrised, mean = -b/a, sigma = 1/a."""
    platt = fit_platt(raw, labels, target_smoothing)
    return AffineCalibrator(logit_mean=-platt.b / platt.a, logit_sigma=1.0 / platt.a)


def fit_isotonic(raw: np.ndarray | Sequence[float], labels: np.ndarray | Sequence[int]) -> IsotonicCalibrator:
    """Pool-adjacent-violators on the distinct scores; each pooled block gives a flat knot pair."""
    x, y = _check_xy(raw, labels)
    ux, inverse = np.unique(x, return_inverse=True)
    weight = np.bincount(inverse).astype(np.float64)
    total = np.bincount(inverse, weights=y)
    blocks: list[list[float]] = []  # [weight, sum of labels, first index, last index]
    for i in range(ux.size):
        blocks.append([weight[i], total[i], i, i])
        # Pool while the previous block's mean is >= this one's (cross-multiplied: no division).
        while len(blocks) > 1 and blocks[-2][1] * blocks[-1][0] >= blocks[-1][1] * blocks[-2][0]:
            w, s, _, last = blocks.pop()
            blocks[-1][0] += w
            blocks[-1][1] += s
            blocks[-1][3] = last
    knots_x: list[float] = []
    knots_y: list[float] = []
    for w, s, first, last in blocks:
        for j in sorted({int(first), int(last)}):
            knots_x.append(float(ux[j]))
            knots_y.append(s / w)
    return IsotonicCalibrator(x=knots_x, y=knots_y)


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
