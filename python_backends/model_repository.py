"""The model repository on disk: its models' names, which file a variant of a model is, reading and writing those
files with protobuf `text_format`, and what a variant serves (`VariantModel`). The steps, the model tool, the
benchmarks and the tests all go through here.

A variant is what `tritonserver --model-config-name=NAME` loads: each model's `configs/NAME.pbtxt`, or its
`config.pbtxt` where it has none (Triton's rule). The variant `default` is the `config.pbtxt` files.

A variant states its model once, in the engine's file: the checkpoint and max_model_len in `engine_args` (passed
whole to vLLM), the calibration profile beside them. The preprocess and calibrate steps read them from there at load:
their own files carry only `engine_config`, the path of that file, which `VariantModel.for_step` checks against the
files on disk before it trusts it (a Python model is not told which file Triton loaded).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .triton_params import ConfigError, ModelParameters

REPOSITORY = Path(__file__).resolve().parent.parent / "model_repository"
ENSEMBLE = "reranker"
STEPS = ("rerank_preprocess", "rerank_engine", "rerank_calibrate")
PREPROCESS, ENGINE, CALIBRATE = STEPS
DEFAULT = "default"  # the variant whose files are config.pbtxt
ENGINE_CONFIG = "engine_config"  # preprocess's and calibrate's parameter: their variant's engine file, from their folder
CALIBRATION_PROFILE = "calibration_profile"  # the engine file's parameter naming the variant's profile


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


def variant_files(folder: Path) -> dict[str, Path]:
    """Every variant file of one model: {variant name: path}."""
    files = {DEFAULT: folder / "config.pbtxt"} if (folder / "config.pbtxt").is_file() else {}
    return files | {path.stem: path for path in sorted(folder.glob("configs/*.pbtxt"))}


def engine_reference(variant: str, engine: str = ENGINE) -> str:
    """The `engine_config` of a step's file of `variant`: the engine's file of that variant, beside the step."""
    return str(Path("..") / variant_file(Path(), engine, variant))


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
        if ENGINE_CONFIG in config.parameters:
            set_parameters(config, {ENGINE_CONFIG: engine_reference(name)})
        write_config(variant_file(out, model_dir.name, name), config)
    return out


@dataclass(frozen=True)
class VariantModel:
    """What a variant serves, as its engine file states it once: the checkpoint reference (in engine_args) and the
    calibration profile (a path under the calibrate step's folder). Its max_model_len, a request limit, is read from
    the same file by RequestLimits.from_model_configs, as clients read it."""

    engine_file: Path
    engine_config: dict[str, Any]  # the engine file in JSON form

    @property
    def engine_args(self) -> dict[str, Any]:
        return ModelParameters.from_model_config(self.engine_config).json_object("engine_args")

    @property
    def model(self) -> str:
        return _stated(self.engine_args, "model", str, f"{self.engine_file}, engine_args")

    @property
    def calibration_profile(self) -> str:
        values = ModelParameters.from_model_config(self.engine_config).values()
        return _stated(values, CALIBRATION_PROFILE, str, f"{self.engine_file}, parameters")

    @classmethod
    def for_step(cls, model_dir: Path, model_config: Mapping[str, Any]) -> "VariantModel":
        """The variant a preprocess or calibrate step was loaded as, read from the engine file its `engine_config`
        names. `model_dir` is the step's folder (Triton's `args["model_repository"]`), `model_config` the config
        Triton loaded (its JSON)."""
        loaded = ModelParameters.from_model_config(model_config)
        engine_file = Path(os.path.normpath(model_dir / loaded.text(ENGINE_CONFIG)))
        if not engine_file.is_file():
            raise ConfigError(f"{model_dir.name}: {ENGINE_CONFIG} {loaded.text(ENGINE_CONFIG)!r} is not a file "
                              f"({engine_file})")
        check_engine_file(model_dir, loaded.values(), engine_file)
        return cls(engine_file, config_dict(engine_file))


def _stated(values: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = values.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) or not value:
        raise ConfigError(f"{where}: no {key!r} (the variant's {key}, which every step reads from there)")
    return value


def check_engine_file(model_dir: Path, loaded: Mapping[str, str], engine_file: Path) -> None:
    """A step's file of variant N must name the engine file Triton loads as N (the engine's configs/N.pbtxt, or its
    config.pbtxt where it has none). Triton does not say which file it loaded, so every file of the step with the
    loaded parameters is held to it: configs/mine.pbtxt copied from configs/gpu.pbtxt and left naming the engine's
    gpu file would have the step serve one checkpoint while the engine runs another."""
    engine_dir = engine_file.parent.parent if engine_file.parent.name == "configs" else engine_file.parent
    for variant, path in variant_files(model_dir).items():
        try:
            same = ModelParameters.from_model_config(config_dict(path)).values() == loaded
        except Exception:  # noqa: BLE001 - a file Triton could not have loaded is not the loaded one
            continue
        expected = config_path(engine_dir.parent, engine_dir.name, variant)
        if same and expected != engine_file:
            raise ConfigError(f"{path} (variant '{variant}') has {ENGINE_CONFIG} naming {engine_file}, but Triton "
                              f"loads {expected} as the engine of variant '{variant}': the steps would serve "
                              f"different models; point {ENGINE_CONFIG} at it (reranker-model add writes both)")
