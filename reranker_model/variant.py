"""`reranker-model add`: one variant of the three steps (configs/<NAME>.pbtxt of rerank_preprocess, rerank_engine and
rerank_calibrate) written from one description. The engine's file states the checkpoint, max_model_len and the
profile; the other two name that file (`engine_config`) and read them from there.

Each file is the step's config.pbtxt parsed with protobuf and re-serialized by text_format with the variant's values;
the reasons for each setting stay in the commented config.pbtxt and configs/gpu.pbtxt. The first line of every file
written is the command that writes it again.
"""

from __future__ import annotations

import datetime
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from python_backends.calibrate.profile_schema import dump_profile, load_profile, profile_from_dict

from .beside import name_clash
from .checkpoint import ModelCheck
from python_backends.model_repository import (
    CALIBRATE, CALIBRATION_PROFILE, DEFAULT, ENGINE_CONFIG, ENSEMBLE, STEPS, config_path, engine_args as repository_engine_args,
    engine_reference, read_config, set_parameters, variant_file, write_config,
)

# One GPU's engine, as the committed GPU variants run it: compiled, bf16, 85% of the GPU's memory, small requests
# scheduled first (the engine step gives each request's sequences its size as priority), a request's sequences
# queued together (python_backends/engine/scheduler.py), vLLM's own statistics off (rerank_engine/config.pbtxt says why).
GPU_ENGINE_ARGS = {"dtype": "bfloat16", "max_num_batched_tokens": 65536, "max_num_seqs": 256,
                   "scheduling_policy": "priority", "scheduler_cls": "python_backends.engine.scheduler.WholeRequestScheduler",
                   "disable_log_stats": True, "gpu_memory_utilization": 0.85, "enforce_eager": False}
# The engine core is spawned, a fresh python3, not forked from the stub (rerank_engine/configs/gpu.pbtxt says why).
GPU_PARAMETERS = {
    "rerank_preprocess": {"batch_token_budget": "10485760", "tokenizer_threads": "12"},
    "rerank_engine": {"model_sha256": "{}", "max_inflight_tokens": "524288",
                      "vllm_env": json.dumps({"VLLM_NO_USAGE_STATS": "1", "VLLM_WORKER_MULTIPROC_METHOD": "spawn"})},
}
# vLLM reads it in the engine's processes; the engine step sets vllm_env before it imports vLLM (compute capability
# >= 9.0 per vLLM's docs)
BATCH_INVARIANT_ENV = "VLLM_BATCH_INVARIANT"
GPU_PREPROCESS_INSTANCES = 1
# The H200 numbers are measured with preprocess batches of up to 64; config.pbtxt's 4 bounds the shared-memory region
# on a small CPU machine, where a GPU host has the memory for 64.
GPU_PREPROCESS_MAX_BATCH_SIZE = 64
GPU_QUEUE_DELAY_US = (0, 0, 0)  # preprocess, engine, calibrate: a lone request starts at once


@dataclass(frozen=True)
class VariantSpec:
    """What a variant is made of; everything else is the step's config.pbtxt."""

    name: str
    model: ModelCheck
    max_model_len: int
    gpu: bool = False
    preprocess_instances: int | None = None  # None: the target's default (config.pbtxt's, or 1 on GPU)
    tokenizer_threads: int | None = None
    queue_delay_us: tuple[int, int, int] | None = None
    quantization: str | None = None  # vLLM's, of the weights at load (fp8)
    batch_invariant: bool = False  # vLLM's batch-invariant kernels: a pair's score whatever shares its batch
    command: list[str] = field(default_factory=list)  # the add command line, written as each file's first line


def profile_file(spec: VariantSpec, repository: Path) -> str:
    """Where the variant's profile lives, under rerank_calibrate/: profiles/<model name>.json, unless that file is
    the profile of another checkpoint (one whose folder has the same name), then profiles/<model name>-<identity>.json:
    a profile goes with its checkpoint, never with a folder name."""
    stem = spec.model.profile_stem
    path = repository / CALIBRATE / "profiles" / f"{stem}.json"
    if path.is_file():
        existing = load_profile(path).checkpoint
        if existing and existing != spec.model.identity:
            return f"profiles/{stem}-{spec.model.identity.removeprefix('sha256:')[:8]}.json"
    return f"profiles/{stem}.json"


def engine_args(spec: VariantSpec, base: dict[str, Any]) -> dict[str, Any]:
    """The base's engine_args (the GPU ones with --gpu), this model and length, and what its family needs."""
    args = {"model": spec.model.reference, "runner": "pooling"}
    if spec.gpu:
        args.update(GPU_ENGINE_ARGS)
    else:
        args.update({key: value for key, value in base.items() if key not in args})
        args["max_num_batched_tokens"] = max(base["max_num_batched_tokens"], spec.max_model_len)
    args["max_model_len"] = spec.max_model_len
    if spec.quantization:
        args["quantization"] = spec.quantization
    ordered = {key: args[key] for key in ("model", "runner", "dtype", "max_model_len") if key in args}
    return {**ordered, **args, **spec.model.engine_args}


def step_configs(spec: VariantSpec, repository: Path) -> dict[str, Any]:
    """The three steps' configs of the variant, as ModelConfig messages."""
    configs = {step: read_config(config_path(repository, step)) for step in STEPS}
    preprocess, engine, calibrate = configs.values()
    for config in (preprocess, calibrate):
        set_parameters(config, {ENGINE_CONFIG: engine_reference(spec.name)})
    if not spec.gpu:  # the base's budget is one request of max_documents x max_model_len
        budget = int(preprocess.parameters["max_documents"].string_value) * spec.max_model_len
        set_parameters(preprocess, {"batch_token_budget": str(budget)})
    base_args = repository_engine_args(engine)
    set_parameters(engine, {"engine_args": json.dumps(engine_args(spec, base_args)), "model_sha256": "{}",
                            CALIBRATION_PROFILE: profile_file(spec, repository)})
    if spec.gpu:
        for step, values in GPU_PARAMETERS.items():
            set_parameters(configs[step], values)
        for group in engine.instance_group:
            group.kind = type(group).KIND_GPU
        preprocess.max_batch_size = GPU_PREPROCESS_MAX_BATCH_SIZE
    if spec.batch_invariant:
        vllm_env = json.loads(engine.parameters["vllm_env"].string_value or "{}")
        set_parameters(engine, {"vllm_env": json.dumps({**vllm_env, BATCH_INVARIANT_ENV: "1"})})
    instances = spec.preprocess_instances or (GPU_PREPROCESS_INSTANCES if spec.gpu else None)
    if instances:
        preprocess.instance_group[0].count = instances
    if spec.tokenizer_threads is not None:
        set_parameters(preprocess, {"tokenizer_threads": str(spec.tokenizer_threads)})
    delays = spec.queue_delay_us or (GPU_QUEUE_DELAY_US if spec.gpu else None)
    for config, delay in zip(configs.values(), delays or ()):
        config.dynamic_batching.max_queue_delay_microseconds = delay
    return configs


def unfitted_profile(spec: VariantSpec, name: str) -> dict[str, Any]:
    """The variant's first profile, named ``name`` (its file's): bound to its model and score type, honestly
    unfitted, which its version says (the CALIBRATION output shows it as NAME@DATE-unfitted)."""
    score_type, family = spec.model.score_type, spec.model.family
    method, why = family.unfitted_method, family.unfitted_why
    return {
        "schema_version": 1, "name": name, "version": f"{datetime.date.today().isoformat()}-unfitted",
        "model": spec.model.reference, "checkpoint": spec.model.identity, "score_type": score_type, "method": method,
        "params": {},
        "fitted_on": {"fitted": False, "note": f"Not fitted: {why}. Fit a profile on labelled pairs of your domain "
                                               "with reranker-calibrate fit and replace this file."},
    }


# A variant's name is a file name, a --model-config-name value and a profile's name: lower-case letters, digits,
# '-' and '_', starting with a letter or digit. `default` is config.pbtxt, and the repository's own model names would
# read as those models.
VARIANT_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")
RESERVED = frozenset({DEFAULT, ENSEMBLE, *STEPS})


def check_name(name: str, repository: Path, force: bool) -> list[Path]:
    """Refuse a name that is not a plain one, is reserved, or is a variant already there (unless `force`); the
    existing files `force` will replace."""
    if not VARIANT_NAME.fullmatch(name):
        raise ValueError(f"variant name {name!r}: use lower-case letters, digits, '-' and '_' (e.g. tiny-bert)")
    if name in RESERVED:
        raise ValueError(f"variant name {name!r} is reserved (taken: {', '.join(sorted(RESERVED))})")
    if clash := name_clash(name, repository):  # `reranker-model ensemble NAME` serves it under these names
        raise ValueError(f"variant name {clash}: pick another name")
    existing = [path for step in STEPS if (path := variant_file(repository, step, name)).is_file()]
    if existing and not force:
        raise ValueError(f"variant '{name}' exists ({', '.join(str(p.relative_to(repository)) for p in existing)}): "
                         "--force replaces it")
    return existing


def write_variant(spec: VariantSpec, repository: Path) -> list[Path]:
    """Write configs/<name>.pbtxt of each step (and the profile, unless one for this score type is there)."""
    header = f"# {shlex.join(spec.command)}\n" if spec.command else ""
    header += f"# Variant '{spec.name}' ({spec.model.reference}); the settings' reasons: config.pbtxt, configs/gpu.pbtxt.\n"
    written = []
    for step, config in step_configs(spec, repository).items():
        written.append(write_config(variant_file(repository, step, spec.name), config, header))
    profile = repository / CALIBRATE / profile_file(spec, repository)
    if profile.is_file():
        existing = load_profile(profile)
        if existing.score_type != spec.model.score_type:
            raise ValueError(f"{profile} is a profile for '{existing.score_type}' scores, this model gives "
                             f"'{spec.model.score_type}': remove it or pick another variant name")
    else:
        dump_profile(profile_from_dict(unfitted_profile(spec, profile.stem), str(profile)), profile)
        written.append(profile)
    return written
