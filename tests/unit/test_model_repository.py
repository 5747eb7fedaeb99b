"""The model repository itself: every config parses as Triton's ModelConfig, a variant states its model once (in
the engine's file), and a step whose file names another variant's engine refuses to load."""

from __future__ import annotations

import json
import shutil

import pytest
from tritonclient.grpc import model_config_pb2

from python_backends.calibrate.profile_schema import load_profile
from python_backends.contract import RequestLimits
from python_backends.families import Qwen3YesNo
from python_backends.model_source import ModelSourceError, resolve_model, verify_sha256
from python_backends.model_repository import (
    CALIBRATE, DEFAULT, ENGINE, PREPROCESS, REPOSITORY as REPO, STEPS as PYTHON_MODELS, VariantModel, config_dict,
    config_path, copy_with_variant, read_config, variant_file,
)
from python_backends.preprocess.settings import PreprocessSettings
from python_backends.triton_params import ConfigError

GPU_VARIANTS = ("gpu", "gpu-bge-m3", "gpu-deterministic", "gpu-fp8")  # the committed configs/NAME.pbtxt

def config(name: str) -> model_config_pb2.ModelConfig:
    return read_config(REPO / name / "config.pbtxt")


def param(cfg: model_config_pb2.ModelConfig, key: str) -> str:
    return cfg.parameters[key].string_value


@pytest.mark.parametrize("name", PYTHON_MODELS)
def test_python_steps_batch_dynamically_and_have_a_model_py(name):
    assert sorted(path.stem for path in (REPO / name / "configs").glob("*.pbtxt")) == list(GPU_VARIANTS)
    cfg = config(name)
    assert cfg.backend == "python"
    assert cfg.HasField("dynamic_batching")
    assert cfg.max_batch_size > 0
    assert (REPO / name / "1" / "model.py").is_file()


@pytest.mark.parametrize("variant", [DEFAULT, *GPU_VARIANTS])
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


@pytest.mark.parametrize("variant", [DEFAULT, *GPU_VARIANTS])
def test_a_variant_states_its_model_once_in_the_engine_file_the_other_steps_read(variant):
    engine_file = config_path(REPO, ENGINE, variant)
    engine = read_config(engine_file)
    for step in (PREPROCESS, CALIBRATE):
        step_config = config_dict(config_path(REPO, step, variant))
        assert not {"model", "max_model_len", "calibration_profile"} & set(step_config["parameters"]), step
        variant_model = VariantModel.for_step(REPO / step, step_config)
        assert variant_model.engine_file == engine_file
        assert variant_model.model == engine_args(engine)["model"]
    limits = RequestLimits.from_model_configs(config_dict(config_path(REPO, PREPROCESS, variant)), config_dict(engine_file))
    assert limits.max_model_len == engine_args(engine)["max_model_len"]


def test_the_checkpoint_reference_is_written_once_per_variant():
    references = [line for path in sorted(REPO.glob("*/**/*.pbtxt"))
                  for line in path.read_text().splitlines() if '\\"model\\":' in line or 'key: "model"' in line]
    # config.pbtxt and the GPU variants' configs/NAME.pbtxt: the engine's files
    assert len(references) == 1 + len(GPU_VARIANTS), references


def test_a_step_file_copied_to_another_variant_without_its_engine_config_fails_the_load_naming_both(tmp_path):
    """configs/mine.pbtxt of the preprocess step, copied from configs/gpu.pbtxt and still naming the engine's gpu file,
    would tokenize for Qwen3 while the engine runs the variant's own model: the step refuses to load."""
    repository = copy_with_variant(tmp_path / "repo", "mine", base="gpu-bge-m3")
    mine = variant_file(repository, PREPROCESS, "mine")
    shutil.copyfile(variant_file(repository, PREPROCESS, "gpu"), mine)
    args = {"model_config": json.dumps(config_dict(mine)), "model_repository": str(repository / PREPROCESS)}
    with pytest.raises(ConfigError) as caught:
        PreprocessSettings.from_args(args)
    gpu_engine, mine_engine = (variant_file(repository, ENGINE, v) for v in ("gpu", "mine"))
    assert str(caught.value) == (
        f"{mine} (variant 'mine') has engine_config naming {gpu_engine}, but Triton loads {mine_engine} as the engine "
        "of variant 'mine': the steps would serve different models; point engine_config at it (reranker-model add "
        "writes both)")


def test_an_engine_config_that_is_not_a_file_fails_the_load_naming_it(tmp_path):
    repository = copy_with_variant(tmp_path / "repo", "mine")
    config = config_dict(variant_file(repository, CALIBRATE, "mine"))
    config["parameters"]["engine_config"]["string_value"] = "../rerank_engine/configs/typo.pbtxt"
    with pytest.raises(ConfigError) as caught:
        VariantModel.for_step(repository / CALIBRATE, config)
    assert str(caught.value) == (f"rerank_calibrate: engine_config '../rerank_engine/configs/typo.pbtxt' is not a file "
                                 f"({repository / ENGINE / 'configs' / 'typo.pbtxt'})")


def test_the_qwen3_config_carries_the_engine_args_its_family_requires():
    """vLLM's arguments are written whole in the config; the family says what they must hold (the engine checks
    the same at load)."""
    args = engine_args(read_config(config_path(REPO, "rerank_engine", "gpu")))
    assert args["model"] == "Qwen/Qwen3-Reranker-0.6B"
    assert {key: args.get(key) for key in Qwen3YesNo.engine_args} == dict(Qwen3YesNo.engine_args)


# The variants that are the gpu variant with one engine setting changed, and that setting
GPU_VARIANT_CHANGES = {
    "gpu-fp8": ("engine_args", lambda gpu: {**gpu, "quantization": "fp8"}),
    "gpu-deterministic": ("vllm_env", lambda gpu: {**gpu, "VLLM_BATCH_INVARIANT": "1"}),
}


@pytest.mark.parametrize("variant", sorted(GPU_VARIANT_CHANGES))
def test_a_gpu_variant_of_one_engine_change_differs_from_gpu_only_there(variant):
    """configs/gpu-fp8.pbtxt and configs/gpu-deterministic.pbtxt may differ from configs/gpu.pbtxt only in their one
    engine setting, the other steps' engine_config (each names its own variant's engine file) and comments."""
    key, changed = GPU_VARIANT_CHANGES[variant]
    for name in PYTHON_MODELS:
        gpu, other = (read_config(REPO / name / "configs" / f"{v}.pbtxt") for v in ("gpu", variant))
        if name == "rerank_engine":
            assert json.loads(param(other, key)) == changed(json.loads(param(gpu, key)))
            cleared = key
        else:
            assert (param(gpu, "engine_config"), param(other, "engine_config")) == tuple(
                f"../rerank_engine/configs/{v}.pbtxt" for v in ("gpu", variant))
            cleared = "engine_config"
        for cfg in (gpu, other):
            cfg.parameters[cleared].string_value = ""
        assert other == gpu, name


def test_embedded_default_weights_match_their_pinned_sha256():
    engine = config("rerank_engine")
    pins = json.loads(param(engine, "model_sha256"))
    folder = resolve_model(engine_args(engine)["model"])
    verify_sha256(folder, pins)  # raises on a mismatch
    with pytest.raises(ModelSourceError, match="does not match the pinned"):
        verify_sha256(folder, {"model.safetensors": "0" * 64})


def test_calibration_profile_in_the_repository_loads():
    profile = load_profile(REPO / "rerank_calibrate" / param(config("rerank_engine"), "calibration_profile"))
    assert profile.score_type == "cosine"


def test_a_preprocess_step_that_can_send_more_sequences_than_its_engine_takes_refuses_to_load():
    """Window mode multiplies a request's sequences: 1024 documents of up to 8 windows each are more than the
    default engine's max_sequences (the public maximum in truncate mode, which a direct call is held to)."""
    config = config_dict(config_path(REPO, PREPROCESS))
    config["parameters"]["long_documents"]["string_value"] = "window"
    variant = VariantModel.for_step(REPO / PREPROCESS, config)
    with pytest.raises(ConfigError) as caught:
        PreprocessSettings.from_model_config(config, variant)
    assert str(caught.value) == (
        "max_documents x max_windows_per_document + 1 = 8193 sequences per request, but the engine takes at most 1025 "
        f"(max_sequences in {REPO / ENGINE / 'config.pbtxt'}): raise it there or lower max_documents")
    config["parameters"]["max_documents"]["string_value"] = "128"
    assert PreprocessSettings.from_model_config(config, variant).max_windows == 8
