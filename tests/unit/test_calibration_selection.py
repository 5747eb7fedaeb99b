"""Method comparison: folds by query, out-of-fold predictions, and the choice rule."""

import numpy as np
import pytest

from reranker_calibrate.fitting import fit_calibrator
from reranker_calibrate.metrics import Metrics
from reranker_calibrate.selection import MethodResult, choose_method, compare_methods, query_folds


def _result(method, log_loss, note=None):
    return MethodResult(method, None, None, Metrics(ece=0.0, brier=0.0, log_loss=log_loss, auc=1.0), note)


def test_query_folds_keep_a_query_together_and_are_deterministic():
    queries = [f"q{i % 13}" for i in range(130)]
    folds = query_folds(queries, 5)
    for q in set(queries):
        assert len({int(f) for f, qq in zip(folds, queries, strict=True) if qq == q}) == 1
    np.testing.assert_array_equal(folds, query_folds(list(queries), 5))
    assert sorted(np.bincount(folds).tolist()) == [20, 20, 30, 30, 30]  # 13 queries dealt 3,3,3,2,2


def test_query_folds_need_two_queries():
    with pytest.raises(ValueError, match="at least 2 distinct queries"):
        query_folds(["q", "q"], 5)


def test_choose_lowest_log_loss_with_ties_to_the_simpler_method():
    assert choose_method([_result("isotonic", 0.30), _result("platt", 0.31)]).method == "isotonic"
    # affine is platt reparametrised: equal to rounding, platt is listed first in the preference order
    assert choose_method([_result("affine", 0.2), _result("platt", 0.2 + 1e-12)]).method == "platt"
    assert (
        choose_method([_result("identity", 0.01, "not a probability: never chosen"), _result("sigmoid", 0.5)]).method
        == "sigmoid"
    )


def test_choose_fails_when_nothing_was_fitted():
    failed = MethodResult("platt", None, None, None, "fit failed: labels must contain both classes (0 and 1)")
    with pytest.raises(ValueError, match="no method could be fitted: platt: fit failed"):
        choose_method([failed])


def test_out_of_fold_predictions_come_from_fits_that_did_not_see_the_query():
    rng = np.random.default_rng(0)
    queries = [f"q{i // 6}" for i in range(240)]
    raw = rng.normal(0, 2, 240)
    labels = (rng.random(240) < 1 / (1 + np.exp(-raw))).astype(float)
    folds = query_folds(queries, 4)
    (result,) = compare_methods(raw, labels, folds, ["platt"], target_smoothing=True, n_bins=10)
    for k in range(4):
        test = folds == k
        expected = fit_calibrator("platt", raw[~test], labels[~test]).apply(raw[test])
        np.testing.assert_array_equal(result.held_out[test], expected)
    assert result.calibrator == fit_calibrator("platt", raw, labels)


def test_identity_on_unbounded_scores_is_listed_but_not_measured():
    raw = np.linspace(-5, 5, 60)
    labels = (raw + np.sin(raw * 7) > 0).astype(float)
    folds = query_folds([f"q{i // 6}" for i in range(60)], 5)
    identity, sigmoid = compare_methods(raw, labels, folds, ["identity", "sigmoid"], True, 10)
    assert identity.metrics is None and identity.note == "not a probability: never chosen"
    assert sigmoid.metrics is not None and sigmoid.note is None
