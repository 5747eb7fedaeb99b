"""The model repository on disk: its models' names, which file a variant of a model is, and reading and writing
those files with protobuf `text_format` (the model tool, the benchmarks and the tests all go through here).

A variant is what `tritonserver --model-config-name=NAME` loads: each model's `configs/NAME.pbtxt`, or its
`config.pbtxt` where it has none (Triton's rule). The variant `default` is the `config.pbtxt` files.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent / "model_repository"
ENSEMBLE = "reranker"
STEPS = ("rerank_preprocess", "rerank_engine", "rerank_calibrate")
PREPROCESS, ENGINE, CALIBRATE = STEPS
DEFAULT = "default"  # the variant whose files are config.pbtxt


def variant_file(repository: Path, model: str, variant: str = DEFAULT) -> Path:
    """The variant's own file of `model`: configs/<variant>.pbtxt (config.pbtxt for `default`), there or not."""
    folder = repository / model
    return folder / "config.pbtxt" if variant == DEFAULT else folder / "configs" / f"{variant}.pbtxt"


def config_path(repository: Path, model: str, variant: str = DEFAULT, fallback: bool = True) -> Path:
    """The file `model` loads as `variant`: its own file, or config.pbtxt where it has none (`fallback`, as Triton
    does); without `fallback` a variant the model lacks is an error naming the command that writes it."""
    own = variant_file(repository, model, variant)
    if own.is_file():
        return own
    if fallback:
        return variant_file(repository, model)
    raise FileNotFoundError(f"{own}: no variant '{variant}' (reranker-model add {variant} MODEL writes it)")


def read_config(path: Path) -> Any:
    """A config file as Triton's ModelConfig message."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


def config_dict(path: Path) -> dict[str, Any]:
    """A config file as the dict Triton passes to a Python model's `initialize` (ModelConfig in JSON form)."""
    from google.protobuf import json_format

    return json_format.MessageToDict(read_config(path), preserving_proto_field_name=True)


def write_config(path: Path, config: Any, header: str = "") -> Path:
    """Write a ModelConfig message to `path` (its folder made), after `header` (comment lines)."""
    from google.protobuf import text_format

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + text_format.MessageToString(config))
    return path


def set_parameters(config: Any, values: dict[str, str]) -> None:
    """Set string parameters that the config already has (a new key is a typo, not a setting)."""
    for key, value in values.items():
        if key not in config.parameters:
            raise KeyError(f"{config.name} has no parameter {key!r}")
        config.parameters[key].string_value = value


def engine_args(config: Any) -> dict[str, Any]:
    """The engine's `engine_args` parameter: vLLM's arguments, one JSON object."""
    return json.loads(config.parameters["engine_args"].string_value)


def copy_with_variant(out: Path, name: str, base: str = DEFAULT, parameters: dict[tuple[str, str], str] | None = None,
                      engine_override: dict[str, Any] | None = None, engine_kind: str | None = None,
                      repository: Path = REPOSITORY) -> Path:
    """Copy `repository` to `out` and give every model a variant `name`: its `base` variant re-serialized, with
    string `parameters` {(model, key): value} set (each must exist), the engine's engine_args updated with
    `engine_override` and its instance kind set to `engine_kind` (e.g. "KIND_GPU") if given."""
    unknown = {model for model, _ in parameters or {}} - {p.name for p in repository.iterdir()}
    if unknown:
        raise KeyError(f"{repository} has no model {sorted(unknown)}")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(repository, out, ignore=shutil.ignore_patterns("__pycache__"))
    for model_dir in sorted(p for p in out.iterdir() if (p / "config.pbtxt").is_file()):
        config = read_config(config_path(out, model_dir.name, base))
        if model_dir.name == ENGINE:
            set_parameters(config, {"engine_args": json.dumps({**engine_args(config), **(engine_override or {})})})
            for group in config.instance_group:
                if engine_kind:
                    group.kind = getattr(type(group), engine_kind)
        set_parameters(config, {key: value for (model, key), value in (parameters or {}).items()
                                if model == model_dir.name})
        write_config(variant_file(out, model_dir.name, name), config)
    return out
