"""Calibration profiles: map a reranker's raw engine scores to relevance probabilities.

Why this exists: older stacks (sentence-transformers CrossEncoder, TEI) served sigmoid(logit),
vLLM's classify path serves the raw logit, and a bi-encoder serves a cosine. Ranking is the same
in all three, but every absolute threshold downstream ("drop below 0.3") silently changes meaning.
A profile, fitted per model on labelled pairs (``reranker-calibrate fit``), turns the raw score into
"probability that this pair is relevant", so thresholds survive a change of model or framework.

Only numpy is imported here: this module is on the serving path (the ``rerank_calibrate`` model).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from .drift import ScoreDistribution

#: What the engine's raw score is; a profile is only valid for the score type it was fitted on. Each family states its
#: own (python_backends/families); this is their list for the calibrate step, which does not import the families
#: (their tokenizers): tests/unit/test_family_detection.py holds the two equal.
SCORE_TYPES = ("cosine", "logit", "yes_no_logit")


def _as_scores(raw: np.ndarray | Sequence[float]) -> np.ndarray:
    """Float64 copy of ``raw``; NaN is refused because it would silently become a probability."""
    x = np.asarray(raw, dtype=np.float64)
    if np.isnan(x).any():
        raise ValueError(f"raw scores contain NaN ({int(np.isnan(x).sum())} of {x.size})")
    return x


def sigmoid(raw: np.ndarray | Sequence[float]) -> np.ndarray:
    """Logistic function in float64 that cannot overflow: exp is only ever taken of -|x|.

    Finite for every non-NaN input, infinities included (sigmoid(+inf) = 1, sigmoid(-inf) = 0).
    """
    x = _as_scores(raw)
    with np.errstate(under="ignore"):
        e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _finite_param(name: str, value: Any) -> float:
    """A JSON number (bool excluded) that is finite, as float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"param '{name}' must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"param '{name}' must be a finite number, got {value}")
    return float(value)


def _positive_param(name: str, value: Any, why: str = "") -> float:
    """A finite number > 0; ``why`` explains the bound in the error message."""
    v = _finite_param(name, value)
    if v <= 0:
        raise ValueError(f"param '{name}' must be > 0{why}, got {v}")
    return v


def _knots_param(name: str, value: Any) -> tuple[float, ...]:
    """A list of at least two finite numbers."""
    if not isinstance(value, (list, tuple)) or len(value) < 2:
        raise ValueError(f"param '{name}' must be a list of at least 2 numbers")
    return tuple(_finite_param(f"{name}[{i}]", v) for i, v in enumerate(value))


class Calibrator:
    """Base of the per-method classes: one place for input checks, float32 output and params.

    Subclasses set ``method`` and ``PARAMS`` (the JSON parameter names, also the attribute names)
    and implement ``_map`` on a float64 array without NaN.
    """

    method: ClassVar[str]
    PARAMS: ClassVar[tuple[str, ...]] = ()
    #: False only for ``identity``: its output is whatever the engine produced.
    is_probability: ClassVar[bool] = True

    def apply(self, raw: np.ndarray | Sequence[float]) -> np.ndarray:
        """Calibrated scores, float32, same shape as ``raw``; raises ValueError on NaN input."""
        x = _as_scores(raw)
        # Overflow of an affine map (huge x times a) goes to +-inf, which sigmoid maps to 1 or 0.
        with np.errstate(over="ignore", under="ignore"):
            return self._map(x).astype(np.float32)

    def _map(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        """Parameters as JSON values, keyed as in the profile file."""
        out: dict[str, Any] = {}
        for k in self.PARAMS:
            v = getattr(self, k)
            out[k] = list(v) if isinstance(v, tuple) else v
        return out

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.params() == other.params()  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash((self.method, repr(self.params())))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class IdentityCalibrator(Calibrator):
    """Returns the raw score unchanged. NOT a probability: logits are unbounded, cosines lie in
    [-1, 1]. Use it only where the engine already emits a calibrated probability, or to serve raw
    scores on purpose."""

    method = "identity"
    is_probability = False

    def _map(self, x: np.ndarray) -> np.ndarray:
        return x


class SigmoidCalibrator(Calibrator):
    """sigmoid(raw): what sentence-transformers CrossEncoder and TEI served. For a yes/no logit
    difference it is the model's own P(yes); for a BCE-trained logit it is the model's belief,
    calibrated or not; for a cosine it is not meaningful (squashed into 0.27..0.73)."""

    method = "sigmoid"

    def _map(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(x)


class PlattCalibrator(Calibrator):
    """Platt scaling, p = sigmoid(a * raw + b), a > 0 so that the ranking is kept."""

    method = "platt"
    PARAMS = ("a", "b")

    def __init__(self, a: float, b: float) -> None:
        self.a = _positive_param("a", a, " (a calibration must not reverse the ranking)")
        self.b = _finite_param("b", b)

    def _map(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(self.a * x + self.b)


class TemperatureCalibrator(Calibrator):
    """Temperature scaling, p = sigmoid(raw / T): Platt with b = 0, for scores centred at 0."""

    method = "temperature"
    PARAMS = ("temperature",)

    def __init__(self, temperature: float) -> None:
        self.temperature = _positive_param("temperature", temperature)

    def _map(self, x: np.ndarray) -> np.ndarray:
        return sigmoid(x / self.temperature)


class AffineCalibrator(Calibrator):
    """vLLM's PoolerConfig calibration, p = sigmoid((raw - logit_mean) / logit_sigma).

    Same family as Platt (logit_mean = -b/a, logit_sigma = 1/a), kept under vLLM's names so the
    parameters can be compared with, or moved into, a vLLM pooler configuration.
    """

    method = "affine"
    PARAMS = ("logit_mean", "logit_sigma")

    def __init__(self, logit_mean: float, logit_sigma: float) -> None:
        self.logit_mean = _finite_param("logit_mean", logit_mean)
        self.logit_sigma = _positive_param("logit_sigma", logit_sigma)

    def _map(self, x: np.ndarray) -> np.ndarray:
        return sigmoid((x - self.logit_mean) / self.logit_sigma)


class IsotonicCalibrator(Calibrator):
    """Monotone non-decreasing piecewise-linear map through knots (x[i], y[i]).

    Between knots it interpolates linearly; outside [x[0], x[-1]] it is clamped to y[0] / y[-1].
    Knots come from pool-adjacent-violators (``reranker_calibrate.fitting.fit_isotonic``).
    """

    method = "isotonic"
    PARAMS = ("x", "y")

    def __init__(self, x: Sequence[float], y: Sequence[float]) -> None:
        xs, ys = _knots_param("x", x), _knots_param("y", y)
        if len(xs) != len(ys):
            raise ValueError(f"params 'x' and 'y' must have the same length ({len(xs)} != {len(ys)})")
        for i in range(1, len(xs)):
            if not xs[i] > xs[i - 1]:
                raise ValueError(
                    f"isotonic knots x must be strictly increasing (x[{i}]={xs[i]} <= x[{i - 1}]={xs[i - 1]})"
                )
        for i, v in enumerate(ys):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"isotonic knots y must lie in [0, 1] (y[{i}]={v})")
        for i in range(1, len(ys)):
            if ys[i] < ys[i - 1]:
                raise ValueError(f"isotonic knots y must be non-decreasing (y[{i}]={ys[i]} < y[{i - 1}]={ys[i - 1]})")
        self.x, self.y = xs, ys

    def _map(self, x: np.ndarray) -> np.ndarray:
        # np.interp clamps to the end values outside the knots, infinities included.
        return np.interp(x, self.x, self.y)


#: method name -> class, the single registry the loader and the fitter use.
CALIBRATORS: dict[str, type[Calibrator]] = {
    cls.method: cls
    for cls in (
        IdentityCalibrator,
        SigmoidCalibrator,
        PlattCalibrator,
        TemperatureCalibrator,
        AffineCalibrator,
        IsotonicCalibrator,
    )
}


def _non_empty_str(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"field '{field}' must be a non-empty string")
    return value


class CalibrationProfile:
    """A calibrator plus what it is valid for: one model's one score type, at one version.

    ``tag`` ("<name>@<version>") is what the ensemble returns in its CALIBRATION output, so a
    client can tell which mapping produced the SCORES it got. ``raw_score_distribution`` (optional) is the
    distribution of the raw scores it was fitted on, against which the server measures drift.
    """

    def __init__(
        self,
        name: str,
        version: str,
        model: str,
        score_type: str,
        calibrator: Calibrator,
        fitted_on: Mapping[str, Any] | None = None,
        raw_score_distribution: ScoreDistribution | None = None,
        checkpoint: str | None = None,
    ) -> None:
        self.name = _non_empty_str("name", name)
        self.version = _non_empty_str("version", version)
        self.model = _non_empty_str("model", model)
        if score_type not in SCORE_TYPES:
            raise ValueError(f"unknown score_type {score_type!r} (expected one of: {', '.join(SCORE_TYPES)})")
        self.score_type = score_type
        self.calibrator = calibrator
        self.fitted_on: dict[str, Any] = dict(fitted_on or {})
        self.raw_score_distribution = raw_score_distribution
        # the identity of the checkpoint it was made for (model_source.checkpoint_identity); None: not recorded
        self.checkpoint = None if checkpoint is None else _non_empty_str("checkpoint", checkpoint)

    @property
    def method(self) -> str:
        return self.calibrator.method

    @property
    def tag(self) -> str:
        return f"{self.name}@{self.version}"

    def apply(self, raw: np.ndarray | Sequence[float]) -> np.ndarray:
        """Calibrated relevance probabilities (raw scores for ``identity``), float32, shape kept."""
        return self.calibrator.apply(raw)

    def __repr__(self) -> str:
        return (
            f"CalibrationProfile({self.tag}, model={self.model!r}, score_type={self.score_type!r}, {self.calibrator!r})"
        )
