"""Fitting with scikit-learn: parameter recovery from data drawn from the model, the exact optimum, PAV against a
hand-worked example, and refusals."""

import numpy as np
import pytest

from python_backends.calibrate.profiles import IdentityCalibrator, SigmoidCalibrator, sigmoid
from reranker_calibrate import fitting
from reranker_calibrate.fitting import (
    CalibrationFitError,
    fit_affine,
    fit_calibrator,
    fit_isotonic,
    fit_platt,
    fit_temperature,
    platt_targets,
)


def _draw(rng, raw, a, b):
    """Labels drawn from the Platt model p = sigmoid(a * raw + b)."""
    return (rng.random(raw.size) < sigmoid(a * raw + b)).astype(np.int64)


@pytest.mark.parametrize(
    "a, b, make_raw",
    [
        (1.5, -2.0, lambda rng, n: rng.normal(1.0, 2.0, n)),  # cross-encoder logits
        (12.0, -5.0, lambda rng, n: rng.uniform(-0.2, 0.9, n)),  # bi-encoder cosines: a large, scores off-centre
    ],
    ids=["logit", "cosine"],
)
def test_platt_recovers_known_parameters(a, b, make_raw):
    rng = np.random.default_rng(7)
    raw = make_raw(rng, 20000)
    labels = _draw(rng, raw, a, b)
    fit = fit_platt(raw, labels, target_smoothing=False)
    assert fit.a == pytest.approx(a, rel=0.05)
    assert fit.b == pytest.approx(b, rel=0.05)


def test_temperature_recovers_known_temperature():
    rng = np.random.default_rng(11)
    raw = rng.normal(0.0, 4.0, 20000)
    labels = _draw(rng, raw, 1 / 2.5, 0.0)
    assert fit_temperature(raw, labels, target_smoothing=False).temperature == pytest.approx(2.5, rel=0.05)


def test_platt_fit_is_the_exact_maximum_likelihood():
    # At the optimum the gradient of the cross-entropy vanishes: mean(p - t) = 0 and mean((p - t) * raw) = 0.
    # scikit-learn's default tolerance leaves ~1e-7 here; a refit of a committed profile must agree to ~1e-12.
    rng = np.random.default_rng(9)
    raw = rng.uniform(-0.1, 0.8, 4000)
    labels = _draw(rng, raw, 11.0, -6.8)
    fit = fit_platt(raw, labels)
    p = sigmoid(fit.a * raw + fit.b)
    residual = p - platt_targets(labels.astype(np.float64), True)
    assert abs(residual.mean()) < 1e-12 and abs((residual * raw).mean()) < 1e-12


def test_affine_is_the_platt_fit_reparametrised():
    rng = np.random.default_rng(3)
    raw = rng.normal(0.3, 0.2, 5000)
    labels = _draw(rng, raw, 8.0, -2.0)
    platt, affine = fit_platt(raw, labels), fit_affine(raw, labels)
    assert affine.logit_mean == pytest.approx(-platt.b / platt.a)
    assert affine.logit_sigma == pytest.approx(1 / platt.a)
    np.testing.assert_allclose(affine.apply(raw), platt.apply(raw), rtol=1e-5)


def test_platt_targets_follow_platt_1999():
    labels = np.array([1.0, 1.0, 1.0, 0.0])  # N+ = 3, N- = 1
    np.testing.assert_allclose(platt_targets(labels, True), [4 / 5, 4 / 5, 4 / 5, 1 / 3])
    np.testing.assert_array_equal(platt_targets(labels, False), labels)


def test_separable_scores_need_target_smoothing():
    raw = np.array([-3.0, -2.0, -1.0, 1.0, 2.0, 3.0])
    labels = np.array([0, 0, 0, 1, 1, 1])
    with pytest.raises(CalibrationFitError, match=r"no finite optimum \(relevant and irrelevant scores are separable"):
        fit_platt(raw, labels, target_smoothing=False)
    with pytest.raises(CalibrationFitError, match="separable: fit with target smoothing"):
        fit_temperature(raw, labels, target_smoothing=False)  # split at 0: no intercept needed to separate them
    fit = fit_platt(raw, labels, target_smoothing=True)
    probs = fit.apply(raw)
    assert np.isfinite(fit.a) and fit.a > 0
    assert 0.0 < probs.min() < 0.5 < probs.max() < 1.0


def test_scores_split_off_zero_are_separable_for_platt_only():
    raw, labels = np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 0, 1, 1])
    with pytest.raises(CalibrationFitError, match="separable"):
        fit_platt(raw, labels, target_smoothing=False)
    # sigmoid(raw / T) cannot cut at 2.5 (it has no bias), so its likelihood has a finite optimum
    assert 0.0 < fit_temperature(raw, labels, target_smoothing=False).temperature < np.inf


def test_a_fit_that_runs_out_of_newton_steps_is_refused(monkeypatch):
    monkeypatch.setattr(fitting, "MAX_NEWTON_STEPS", 1)
    rng = np.random.default_rng(4)
    raw = rng.normal(1.0, 2.0, 500)
    with pytest.raises(CalibrationFitError, match="^logistic fit did not converge in 1 Newton steps$"):
        fit_platt(raw, _draw(rng, raw, 1.5, -2.0))


def test_reversed_scores_are_refused():
    rng = np.random.default_rng(5)
    raw = rng.normal(0, 2, 2000)
    labels = _draw(rng, raw, -1.0, 0.0)  # higher score, less relevant
    with pytest.raises(CalibrationFitError, match=r"a=-.* <= 0: the scores do not rank relevant pairs higher"):
        fit_platt(raw, labels)
    with pytest.raises(CalibrationFitError, match="1/T <= 0"):
        fit_temperature(raw, labels)


def test_isotonic_is_pav_worked_by_hand():
    # labels 0 1 0 1 1 0 at x = 1..6. PAV: [0] [1,0]->0.5 [1,1,0]->2/3 (equal means pool too).
    fit = fit_isotonic([1, 2, 3, 4, 5, 6], [0, 1, 0, 1, 1, 0])
    assert fit.x == (1.0, 2.0, 3.0, 4.0, 6.0)
    np.testing.assert_allclose(fit.y, [0.0, 0.5, 0.5, 2 / 3, 2 / 3])


def test_isotonic_weights_tied_scores():
    fit = fit_isotonic([1.0, 1.0, 2.0, 2.0, 2.0], [1, 0, 1, 1, 0])  # means 1/2 at x=1, 2/3 at x=2
    assert fit.x == (1.0, 2.0)
    np.testing.assert_allclose(fit.y, [0.5, 2 / 3])


def test_isotonic_output_is_monotone_and_in_0_1():
    rng = np.random.default_rng(1)
    raw = rng.normal(0, 3, 3000)
    fit = fit_isotonic(raw, _draw(rng, raw, 1.0, 0.5))
    grid = np.linspace(-15, 15, 5001)
    out = fit.apply(grid)
    assert (np.diff(out) >= 0).all()
    assert out.min() >= 0.0 and out.max() <= 1.0
    assert out[0] < 0.1 and out[-1] > 0.9  # it did learn the trend, it is not flat


def test_isotonic_reduces_squared_error_against_the_best_constant():
    rng = np.random.default_rng(2)
    raw = rng.normal(0, 2, 2000)
    labels = _draw(rng, raw, 1.0, 0.0)
    pred = fit_isotonic(raw, labels).apply(raw)
    assert np.mean((pred - labels) ** 2) < 0.8 * np.mean((labels.mean() - labels) ** 2)


@pytest.mark.parametrize(
    "raw, labels, message",
    [
        ([0.1, 0.2, 0.3], [1, 1, 1], "labels must contain both classes"),
        ([0.1, 0.2, 0.3], [0, 2, 1], "labels must be 0 or 1"),
        ([0.5, 0.5, 0.5], [0, 1, 1], "at least 2 distinct values"),
        ([0.1, np.inf], [0, 1], "scores must be finite"),
        ([0.1, 0.2], [0, 1, 1], "2 scores but 3 labels"),
    ],
)
@pytest.mark.parametrize("method", ["platt", "temperature", "affine", "isotonic"])
def test_fits_refuse_unusable_data(method, raw, labels, message):
    with pytest.raises(CalibrationFitError, match=message):
        fit_calibrator(method, raw, labels)


def test_fit_calibrator_dispatch():
    raw, labels = [0.0, 1.0, 2.0, 3.0], [0, 1, 0, 1]
    assert fit_calibrator("identity", raw, labels) == IdentityCalibrator()
    assert fit_calibrator("sigmoid", raw, labels) == SigmoidCalibrator()
    assert fit_calibrator("isotonic", raw, labels).method == "isotonic"
    with pytest.raises(CalibrationFitError, match="unknown method 'logistic'"):
        fit_calibrator("logistic", raw, labels)
