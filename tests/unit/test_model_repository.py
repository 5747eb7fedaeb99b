"""The model repository itself: every config parses as Triton's ModelConfig and the steps agree with each other."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2

from python_backends.calibrate.profile_schema import load_profile
from python_backends.contract import RequestLimits
from python_backends.families import Qwen3YesNo
from python_backends.model_source import ModelSourceError, resolve_model, verify_sha256
from reranker_model.repository import DEFAULT, REPOSITORY as REPO, STEPS as PYTHON_MODELS, config_path, read_config



def config(name: str) -> model_config_pb2.ModelConfig:
    return read_config(REPO / name / "config.pbtxt")


def param(cfg: model_config_pb2.ModelConfig, key: str) -> str:
    return cfg.parameters[key].string_value


@pytest.mark.parametrize("name", PYTHON_MODELS)
def test_python_steps_batch_dynamically_and_have_a_model_py(name):
    cfg = config(name)
    assert cfg.backend == "python"
    assert cfg.HasField("dynamic_batching")
    assert cfg.max_batch_size > 0
    assert (REPO / name / "1" / "model.py").is_file()


@pytest.mark.parametrize("variant", [DEFAULT, "gpu", "gpu-bge-m3", "gpu-fp8"])
@pytest.mark.parametrize("name", PYTHON_MODELS)
def test_no_step_queue_has_a_policy_so_triton_prefetches_its_batches(name, variant):
    """A queue policy (timeout, size limit, priority levels) turns off the batcher's prefetch, and a burst then waits
    up to 500 ms per batch (benchmarks/queue_policy_burst.py); every bound is the step's own instead."""
    batching = read_config(config_path(REPO, name, variant)).dynamic_batching
    assert not batching.HasField("default_queue_policy")
    assert not batching.priority_queue_policy
    assert batching.priority_levels == 0


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


@pytest.mark.parametrize("variant", [DEFAULT, "gpu", "gpu-bge-m3", "gpu-fp8"])
def test_preprocess_and_engine_name_the_same_model_and_length(variant):
    pre, engine = (read_config(config_path(REPO, name, variant)) for name in ("rerank_preprocess", "rerank_engine"))
    limits = RequestLimits.from_model_config(json_format.MessageToDict(pre, preserving_proto_field_name=True))
    assert param(pre, "model") == engine_args(engine)["model"]
    assert limits.max_model_len == engine_args(engine)["max_model_len"]


def test_the_qwen3_config_carries_the_engine_args_its_family_requires():
    """vLLM's arguments are written whole in the config; the family says what they must hold (the engine checks
    the same at load)."""
    args = engine_args(read_config(config_path(REPO, "rerank_engine", "gpu")))
    assert args["model"] == "Qwen/Qwen3-Reranker-0.6B"
    assert {key: args.get(key) for key in Qwen3YesNo.engine_args} == dict(Qwen3YesNo.engine_args)


def test_the_fp8_variant_is_the_gpu_variant_with_fp8_quantization():
    """configs/gpu-fp8.pbtxt may differ from configs/gpu.pbtxt only in the engine's quantization (and comments)."""
    for name in PYTHON_MODELS:
        gpu, fp8 = (read_config(REPO / name / "configs" / f"{v}.pbtxt") for v in ("gpu", "gpu-fp8"))
        if name == "rerank_engine":
            assert engine_args(fp8) == {**engine_args(gpu), "quantization": "fp8"}
            for cfg in (gpu, fp8):
                cfg.parameters["engine_args"].string_value = ""
        assert fp8 == gpu, name


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
