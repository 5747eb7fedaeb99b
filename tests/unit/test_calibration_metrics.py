"""Metrics (scikit-learn's, and the thresholds) against hand-worked examples; the arithmetic is next to each."""

import math

import numpy as np
import pytest

from reranker_calibrate.metrics import (
    brier_score,
    expected_calibration_error,
    log_loss,
    map_threshold_by_precision,
    map_threshold_by_quantile,
    operating_point,
    reliability_bins,
    roc_auc,
    threshold_for_precision,
    threshold_for_recall,
)


def test_ece_worked_example():
    # 10 equal-width bins (b/10, (b+1)/10], the first from 0; n = 8. Non-empty bins:
    #   [0.0, 0.1]: p = .05           y = 0      |.05 - 0|     * 1/8 = 0.00625
    #   (0.1, 0.2]: p = .15 .15       y = 0 1    |.15 - .5|    * 2/8 = 0.08750
    #   (0.3, 0.4]: p = .35           y = 0      |.35 - 0|     * 1/8 = 0.04375
    #   (0.6, 0.7]: p = .65           y = 1      |.65 - 1|     * 1/8 = 0.04375
    #   (0.9, 1.0]: p = .95 .95 1.0   y = 1 1 1  |.96667 - 1|  * 3/8 = 0.01250
    #   ECE = 0.00625 + 0.0875 + 0.04375 + 0.04375 + 0.0125 = 0.19375
    p = [0.05, 0.15, 0.15, 0.35, 0.65, 0.95, 0.95, 1.0]
    y = [0, 0, 1, 0, 1, 1, 1, 1]
    assert expected_calibration_error(p, y) == pytest.approx(0.19375, abs=1e-12)
    # Two bins: [0, .5]: p .05 .15 .15 .35 mean .175, y mean .25 -> .075 * 4/8 = .0375
    #           (.5, 1]: p .65 .95 .95 1.0 mean .8875, y mean 1 -> .1125 * 4/8 = .05625
    assert expected_calibration_error(p, y, n_bins=2) == pytest.approx(0.09375, abs=1e-12)


def test_reliability_bins_counts_and_empty_bins():
    bins = reliability_bins([0.05, 0.15, 0.15, 1.0], [0, 0, 1, 1], n_bins=10)
    np.testing.assert_array_equal(bins.count, [1, 2, 0, 0, 0, 0, 0, 0, 0, 1])
    assert np.isnan(bins.mean_predicted[2])
    assert bins.fraction_positive[1] == 0.5


def test_a_probability_on_a_bin_edge_is_in_the_lower_bin():
    # calibration_curve's rule: bin b is (b/n, (b+1)/n]; isotonic fits give such exact values (1/2, 4/5)
    bins = reliability_bins([0.0, 0.5, 0.5, 0.8, 1.0], [0, 0, 1, 1, 1], n_bins=2)
    np.testing.assert_array_equal(bins.count, [3, 2])
    np.testing.assert_allclose(bins.mean_predicted, [1 / 3, 0.9])
    np.testing.assert_allclose(bins.fraction_positive, [1 / 3, 1.0])


def test_perfectly_calibrated_scores_have_zero_ece():
    assert expected_calibration_error([0.25] * 4 + [0.75] * 4, [1, 0, 0, 0, 1, 1, 1, 0]) == 0.0


def test_brier_worked_example():
    # (.9-1)^2 + (.2-0)^2 + (.6-0)^2 + (.4-1)^2 = .01 + .04 + .36 + .36 = .77; / 4 = .1925
    assert brier_score([0.9, 0.2, 0.6, 0.4], [1, 0, 0, 1]) == pytest.approx(0.1925, abs=1e-12)


def test_log_loss_worked_example_and_clipping():
    # -(ln .8 + ln(1 - .25)) / 2 = (0.2231436 + 0.2876821) / 2
    assert log_loss([0.8, 0.25], [1, 0]) == pytest.approx((-math.log(0.8) - math.log(0.75)) / 2, rel=1e-12)
    # A confident miss is clipped at float64's eps = 2.22e-16: -ln(eps) = 36.0437, not infinity
    # (1 - eps is a float64 too, so the p = 1 side costs the same).
    assert log_loss([0.0], [1]) == pytest.approx(-math.log(np.finfo(np.float64).eps), rel=1e-12)
    assert log_loss([1.0], [0]) == pytest.approx(36.0437, abs=1e-4)


def test_probability_metrics_refuse_values_outside_0_1():
    with pytest.raises(ValueError, match=r"probabilities must lie in \[0, 1\]"):
        brier_score([-3.75, 0.5], [0, 1])


def test_auc_worked_examples():
    # positives .35 .8 vs negatives .1 .4: .35>.1 yes, .35>.4 no, .8>.1 yes, .8>.4 yes -> 3/4
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    # ties count 1/2: positives .5 .9 vs negatives .5 .2: .5=.5 -> .5, then 1, 1, 1 -> 3.5/4
    assert roc_auc([0.5, 0.5, 0.2, 0.9], [1, 0, 0, 1]) == 0.875
    assert roc_auc([0.3] * 4, [0, 1, 0, 1]) == 0.5
    assert roc_auc([3.0, 2.0, 1.0], [0, 1, 1]) == 0.0


def test_auc_is_invariant_under_a_monotone_map():
    rng = np.random.default_rng(0)
    s = rng.normal(size=300)
    y = (rng.random(300) < 1 / (1 + np.exp(-2 * s))).astype(int)
    assert roc_auc(s, y) == pytest.approx(roc_auc(np.exp(s), y))


def test_auc_needs_both_classes():
    with pytest.raises(ValueError, match="both classes"):
        roc_auc([0.1, 0.2], [1, 1])


# scores .9 .8 .7 .6 .5 .4 with labels 1 1 0 1 0 0; keeping score >= t gives
#   t=.9: P 1/1  R 1/3 | t=.8: P 2/2 R 2/3 | t=.7: P 2/3 R 2/3 | t=.6: P 3/4 R 1 | t=.5: P 3/5 | t=.4: P 3/6
SCORES = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
LABELS = [1, 1, 0, 1, 0, 0]


@pytest.mark.parametrize(
    "target, threshold, precision, recall",
    [(0.75, 0.6, 0.75, 1.0), (0.9, 0.8, 1.0, 2 / 3), (1.0, 0.8, 1.0, 2 / 3), (0.5, 0.4, 0.5, 1.0)],
)
def test_threshold_for_precision(target, threshold, precision, recall):
    point = threshold_for_precision(SCORES, LABELS, target)
    assert (point.threshold, point.precision, point.recall) == pytest.approx((threshold, precision, recall))


def test_unreachable_precision_is_none():
    assert threshold_for_precision([0.9, 0.1], [0, 1], 0.9) is None


@pytest.mark.parametrize("target, threshold, precision", [(0.5, 0.8, 1.0), (0.7, 0.6, 0.75), (1.0, 0.6, 0.75)])
def test_threshold_for_recall(target, threshold, precision):
    point = threshold_for_recall(SCORES, LABELS, target)
    assert (point.threshold, point.precision) == pytest.approx((threshold, precision))
    assert point.recall >= target


def test_operating_point():
    point = operating_point(SCORES, LABELS, 0.65)
    assert (point.precision, point.recall, point.kept_fraction) == pytest.approx((2 / 3, 2 / 3, 0.5))
    assert math.isnan(operating_point(SCORES, LABELS, 2.0).precision)


def test_quantile_mapping_keeps_the_same_pairs():
    old = [0.1, 0.2, 0.3, 0.4, 0.5]
    new = [-2.0, -1.0, 0.0, 1.0, 2.0]
    assert map_threshold_by_quantile(old, new, 0.35) == 1.0  # old keeps 2 pairs -> 2nd highest new score
    assert map_threshold_by_quantile(old, new, 0.0) == -2.0  # keeps all
    assert map_threshold_by_quantile(old, new, 0.6) > 2.0  # keeps none


def test_quantile_mapping_on_the_trap_of_seed_003():
    # Old stack served sigmoid(logit), new serves the logit: 0.3 on the old scale is logit(0.3) on the new.
    rng = np.random.default_rng(4)
    logits = rng.normal(0, 3, 1001)
    old = 1 / (1 + np.exp(-logits))
    assert map_threshold_by_quantile(old, logits, 0.3) == pytest.approx(math.log(0.3 / 0.7), abs=0.05)


def test_precision_mapping():
    # old: t = .65 keeps .9 .8 .7 -> precision 2/3. new = 5 4 1 3 2 0 (same labels 1 1 0 1 0 0):
    # descending 5(1) 4(1) 3(1) 2(0) 1(0) 0(0): precision at t=2 is 3/4 >= 2/3, at t=1 it is 3/5 < 2/3.
    point = map_threshold_by_precision(SCORES, [5, 4, 1, 3, 2, 0], LABELS, 0.65)
    assert (point.threshold, point.precision, point.recall) == pytest.approx((2.0, 0.75, 1.0))
    assert map_threshold_by_precision(SCORES, SCORES, LABELS, 2.0) is None  # old kept nothing
