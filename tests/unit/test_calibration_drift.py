"""Drift: quantile bins of the fitting scores, PSI of a sliding window, the profile field that stores the bins,
and the temperature fit's message where it cannot fit."""

from __future__ import annotations

import numpy as np
import pytest

from python_backends.calibrate.drift import DriftWindow, ScoreDistribution, population_stability_index
from python_backends.calibrate.profile_schema import CalibrationProfileError, profile_from_dict, profile_to_dict
from reranker_calibrate.fitting import CalibrationFitError, fit_temperature



def test_quantile_bins_split_the_fitting_scores_evenly():
    dist = ScoreDistribution.fit(np.arange(1000, dtype=float), n_bins=10)
    assert len(dist.edges) == 9 and dist.fractions == pytest.approx([0.1] * 10)
    assert dist.bin_of(np.array([-5.0, 99.0, 100.0, 5000.0])).tolist() == [0, 0, 1, 9]


def test_psi_is_zero_for_equal_distributions_and_matches_the_formula():
    assert population_stability_index([0.5, 0.5], [0.5, 0.5]) == 0.0
    assert population_stability_index([0.5, 0.5], [0.9, 0.1]) == pytest.approx(0.4 * np.log(1.8) - 0.4 * np.log(0.2))


def test_window_psi_stays_low_for_the_fitting_distribution_and_crosses_0_25_for_a_shifted_one():
    rng = np.random.default_rng(7)
    dist = ScoreDistribution.fit(rng.normal(0.3, 0.1, 5000))
    same, shifted = DriftWindow(dist, 500), DriftWindow(dist, 500)
    for _ in range(10):  # batches of 64, like requests
        same.add(rng.normal(0.3, 0.1, 64))
        shifted.add(rng.normal(0.45, 0.1, 64))
    assert same.psi() < 0.1 < 0.25 < shifted.psi()


def test_window_is_none_until_full_and_then_holds_only_the_last_scores():
    dist = ScoreDistribution((0.0,), (0.5, 0.5))
    window = DriftWindow(dist, 4)
    window.add(np.array([-1.0, -1.0, -1.0]))
    assert window.psi() is None
    window.add(np.array([1.0, 1.0, 1.0]))  # window: -1, 1, 1, 1
    assert window.psi() == pytest.approx(population_stability_index([0.5, 0.5], [0.25, 0.75]))
    window.add(np.array([-1.0] * 9))  # one batch larger than the window
    assert window.psi() == pytest.approx(population_stability_index([0.5, 0.5], [1.0, 0.0]))


PROFILE = {"schema_version": 1, "name": "p", "version": "1", "model": "m", "score_type": "cosine",
           "method": "sigmoid", "params": {}}


def test_profile_stores_its_distribution_and_reads_it_back():
    doc = {**PROFILE, "raw_score_distribution": {"edges": [0.1, 0.2], "fractions": [0.3, 0.3, 0.4]}}
    profile = profile_from_dict(doc)
    assert profile.raw_score_distribution == ScoreDistribution((0.1, 0.2), (0.3, 0.3, 0.4))
    assert profile_to_dict(profile) == doc


@pytest.mark.parametrize(
    ("dist", "message"),
    [
        ({"edges": [0.1]}, "raw_score_distribution must be an object with exactly 'edges' and 'fractions'"),
        ({"edges": [0.2, 0.1], "fractions": [0.3, 0.3, 0.4]}, "edges must be strictly increasing"),
        ({"edges": [0.1], "fractions": [0.3, 0.3]}, "fractions must be >= 0 and sum to 1, sum is 0.6"),
        ({"edges": [0.1, 0.2], "fractions": [1.0]}, "needs k >= 2 fractions and k - 1 edges, got 1 and 2"),
        ({"edges": ["a"], "fractions": [0.5, 0.5]}, "raw_score_distribution.edges must be a list of numbers"),
    ],
)
def test_a_bad_distribution_fails_the_profile_with_its_message(dist, message):
    with pytest.raises(CalibrationProfileError) as caught:
        profile_from_dict({**PROFILE, "raw_score_distribution": dist}, source="x.json")
    assert str(caught.value) == f"x.json: {message}"


def test_temperature_says_it_has_no_bias_term_where_a_low_base_rate_needs_one():
    rng = np.random.default_rng(7)  # its own: the message below holds the sample's mean
    raw = np.concatenate([rng.normal(0.55, 0.1, 100), rng.normal(0.33, 0.1, 700)])
    labels = np.array([1] * 100 + [0] * 700)
    with pytest.raises(CalibrationFitError) as caught:
        fit_temperature(raw, labels)
    assert str(caught.value) == (
        "temperature scaling has no bias term (raw score 0 always maps to 0.5), so it cannot fit these scores: "
        "12.5% of the pairs are relevant while the mean raw score is 0.347; use platt or affine, which fit an offset"
    )
