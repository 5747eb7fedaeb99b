"""Calibration profiles: hand-computed outputs, numerical stability, NaN refusal, shape and dtype."""

import math
import warnings

import numpy as np
import pytest

from python_backends.calibrate.profiles import (
    AffineCalibrator,
    CalibrationProfile,
    IdentityCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    SigmoidCalibrator,
    TemperatureCalibrator,
    sigmoid,
)

F32_MAX = float(np.finfo(np.float32).max)
EXTREMES = np.array([1e30, -1e30, F32_MAX, -F32_MAX, np.inf, -np.inf, 0.0], dtype=np.float64)

ALL_CALIBRATORS = [
    IdentityCalibrator(),
    SigmoidCalibrator(),
    PlattCalibrator(a=2.0, b=-1.0),
    TemperatureCalibrator(temperature=2.0),
    AffineCalibrator(logit_mean=1.0, logit_sigma=0.5),
    IsotonicCalibrator(x=[0.0, 1.0, 3.0], y=[0.1, 0.5, 0.9]),
]
PROBABILITY_CALIBRATORS = [c for c in ALL_CALIBRATORS if c.is_probability]


def _logistic(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def test_sigmoid_known_values():
    out = sigmoid([0.0, math.log(3.0), -math.log(3.0), 2.0])
    np.testing.assert_allclose(out, [0.5, 0.75, 0.25, _logistic(2.0)], rtol=1e-12)


def test_sigmoid_is_stable_at_extremes_without_any_floating_point_warning():
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        out = sigmoid(EXTREMES)
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.5])


def test_sigmoid_keeps_precision_in_the_tails():
    # 1 - sigmoid(x) computed naively loses everything past x ~ 37; the stable form keeps e^-x.
    assert sigmoid([-50.0])[0] == pytest.approx(math.exp(-50.0), rel=1e-12)


@pytest.mark.parametrize("calibrator", PROBABILITY_CALIBRATORS, ids=lambda c: c.method)
def test_probability_calibrators_are_finite_in_0_1_at_extremes(calibrator):
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        out = calibrator.apply(EXTREMES)
    assert np.isfinite(out).all()
    assert ((out >= 0.0) & (out <= 1.0)).all()
    assert out[0] >= out[1] and out[2] >= out[3] and out[4] >= out[5]


def test_platt_with_a_huge_slope_saturates_instead_of_overflowing():
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        out = PlattCalibrator(a=1e300, b=0.0).apply([1e30, -1e30])
    np.testing.assert_array_equal(out, [1.0, 0.0])


@pytest.mark.parametrize("calibrator", ALL_CALIBRATORS, ids=lambda c: c.method)
def test_nan_input_is_refused(calibrator):
    with pytest.raises(ValueError, match=r"raw scores contain NaN \(1 of 3\)"):
        calibrator.apply(np.array([0.0, np.nan, 1.0], dtype=np.float32))


def test_sigmoid_refuses_nan():
    with pytest.raises(ValueError, match="NaN"):
        sigmoid([np.nan])


@pytest.mark.parametrize(
    "calibrator, raw, expected",
    [
        (IdentityCalibrator(), [-3.75, 0.0, 7.5], [-3.75, 0.0, 7.5]),
        (SigmoidCalibrator(), [-3.75], [_logistic(-3.75)]),
        (PlattCalibrator(a=2.0, b=-1.0), [0.5, 1.0, -1.0], [0.5, _logistic(1.0), _logistic(-3.0)]),
        (TemperatureCalibrator(temperature=2.0), [2.0, -4.0], [_logistic(1.0), _logistic(-2.0)]),
        (AffineCalibrator(logit_mean=1.0, logit_sigma=0.5), [1.5, 1.0, 0.0], [_logistic(1.0), 0.5, _logistic(-2.0)]),
        # knots (0, .1) (1, .5) (3, .9): clamped below 0 and above 3, linear between.
        (
            IsotonicCalibrator(x=[0.0, 1.0, 3.0], y=[0.1, 0.5, 0.9]),
            [-5.0, 0.5, 2.0, 3.0, 10.0],
            [0.1, 0.3, 0.7, 0.9, 0.9],
        ),
    ],
    ids=lambda v: getattr(v, "method", None),
)
def test_hand_computed_outputs(calibrator, raw, expected):
    np.testing.assert_allclose(calibrator.apply(raw), expected, rtol=1e-6)


def test_affine_is_platt_reparametrised():
    raw = np.linspace(-10, 10, 41)
    a, b = 0.8, 1.6
    np.testing.assert_allclose(
        AffineCalibrator(logit_mean=-b / a, logit_sigma=1 / a).apply(raw),
        PlattCalibrator(a=a, b=b).apply(raw),
        rtol=1e-6,
    )


@pytest.mark.parametrize("calibrator", ALL_CALIBRATORS, ids=lambda c: c.method)
def test_output_is_float32_with_the_input_shape(calibrator):
    raw = np.arange(6, dtype=np.float32).reshape(1, 6) - 2.5  # a [1, N] tensor as in the ensemble
    out = calibrator.apply(raw)
    assert out.dtype == np.float32
    assert out.shape == (1, 6)


@pytest.mark.parametrize("calibrator", ALL_CALIBRATORS, ids=lambda c: c.method)
def test_every_calibrator_is_monotone_non_decreasing(calibrator):
    out = calibrator.apply(np.linspace(-20, 20, 2001))
    assert (np.diff(out) >= 0).all()


def test_profile_delegates_and_tags():
    profile = CalibrationProfile("m-cos", "2026-12-02.1", "org/model", "cosine", PlattCalibrator(a=10.0, b=-4.0))
    assert profile.tag == "m-cos@2026-12-02.1"
    assert profile.method == "platt"
    np.testing.assert_allclose(profile.apply([0.4]), [0.5])


def test_equal_calibrators_compare_equal():
    assert PlattCalibrator(a=1.0, b=2.0) == PlattCalibrator(a=1, b=2)
    assert PlattCalibrator(a=1.0, b=2.0) != AffineCalibrator(logit_mean=1.0, logit_sigma=2.0)
