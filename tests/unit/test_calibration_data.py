"""The shipped labelled set in data/calibration/ keeps the shape its README promises."""

import hashlib
from collections import Counter
from pathlib import Path

from python_backends.calibrate.profile_schema import load_profile
from reranker_calibrate.pair_scoring import read_pairs
from reranker_calibrate.selection import query_folds

PAIRS = Path(__file__).resolve().parents[2] / "data" / "calibration" / "pairs.jsonl"


def test_shipped_set_shape():
    pairs = read_pairs(PAIRS)
    per_query = Counter(p.query for p in pairs)
    relevant = Counter(p.query for p in pairs if p.label == 1)
    assert len(per_query) == 40
    assert set(per_query.values()) == {6}
    assert all(1 <= relevant[q] <= 2 for q in per_query)
    assert all(p.old_score is None for p in pairs)  # no invented legacy scores
    assert len({(p.query, p.document) for p in pairs}) == len(pairs)


def test_shipped_set_folds_keep_both_classes_in_every_training_part():
    pairs = read_pairs(PAIRS)
    folds = query_folds([p.query for p in pairs], 5)
    assert sorted(Counter(folds.tolist()).values()) == [48] * 5  # 8 queries x 6 documents per fold
    for k in range(5):
        assert {p.label for p, f in zip(pairs, folds, strict=True) if f != k} == {0, 1}


def test_shipped_minilm_profile_was_fitted_on_the_shipped_set():
    folder = PAIRS.parent / "all-minilm-l6-v2"
    profile = load_profile(folder / "all-minilm-l6-v2.json")
    assert profile.score_type == "cosine" and profile.calibrator.is_probability
    # Editing pairs.jsonl without refitting would leave a profile of another data set.
    assert profile.fitted_on["data_sha256"] == hashlib.sha256(PAIRS.read_bytes()).hexdigest()
    scored = read_pairs(folder / "scored.jsonl")
    assert scored == read_pairs(PAIRS)
