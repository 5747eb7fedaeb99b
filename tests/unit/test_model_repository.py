"""The model repository itself: every config parses as Triton's ModelConfig and the steps agree with each other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from python_backends.calibrate.profile_schema import load_profile
from python_backends.model_source import ModelSourceError, resolve_model, verify_sha256

REPO = Path(__file__).resolve().parents[2] / "model_repository"
PYTHON_MODELS = ("rerank_preprocess", "rerank_engine", "rerank_calibrate")


def config(name: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse((REPO / name / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())


def param(cfg: model_config_pb2.ModelConfig, key: str) -> str:
    return cfg.parameters[key].string_value


@pytest.mark.parametrize("name", PYTHON_MODELS)
def test_python_steps_batch_dynamically_and_have_a_model_py(name):
    cfg = config(name)
    assert cfg.backend == "python"
    assert cfg.HasField("dynamic_batching")
    assert cfg.max_batch_size > 0
    assert (REPO / name / "1" / "model.py").is_file()


def test_ensemble_wires_every_output_of_the_contract():
    cfg = config("reranker")
    assert cfg.platform == "ensemble"
    assert [step.model_name for step in cfg.ensemble_scheduling.step] == list(PYTHON_MODELS)
    assert {o.name for o in cfg.output} == {"SCORES", "RAW_SCORES", "RANKING", "TRUNCATED", "CALIBRATION"}
    produced = {v for step in cfg.ensemble_scheduling.step for v in step.output_map.values()}
    assert {o.name for o in cfg.output} <= produced
    assert all(cfg.max_batch_size <= config(name).max_batch_size for name in PYTHON_MODELS)


def engine_args(cfg: model_config_pb2.ModelConfig) -> dict:
    return json.loads(param(cfg, "engine_args"))


@pytest.mark.parametrize("variant", ["config.pbtxt", "configs/gpu.pbtxt", "configs/gpu-bge-m3.pbtxt"])
def test_preprocess_and_engine_name_the_same_model_and_length(variant):
    read = lambda name: text_format.Parse((REPO / name / variant).read_text(), model_config_pb2.ModelConfig())  # noqa: E731
    pre, engine = read("rerank_preprocess"), read("rerank_engine")
    assert param(pre, "model") == engine_args(engine)["model"]
    assert int(param(pre, "max_model_len")) == engine_args(engine)["max_model_len"]


def test_embedded_default_weights_match_their_pinned_sha256():
    engine = config("rerank_engine")
    pins = json.loads(param(engine, "model_sha256"))
    folder = resolve_model(engine_args(engine)["model"])
    verify_sha256(folder, pins)  # raises on a mismatch
    with pytest.raises(ModelSourceError, match="does not match the pinned"):
        verify_sha256(folder, {"model.safetensors": "0" * 64})


def test_calibration_profile_in_the_repository_loads():
    profile = load_profile(REPO / "rerank_calibrate" / param(config("rerank_calibrate"), "calibration_profile"))
    assert profile.score_type == "cosine"
