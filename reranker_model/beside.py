"""`reranker-model ensemble`: a second model repository that serves a variant under its own ensemble name, next to
`reranker` in the same tritonserver (`--model-repository` given twice).

Triton names a model by its folder and wants every name once across its repositories, so the variant's steps are
copied under names of their own: ensemble NAME runs NAME_preprocess -> NAME_engine -> NAME_calibrate. Each step's
config.pbtxt is the variant's configs/<variant>.pbtxt (config.pbtxt for `default`) with only the name changed, its
1/model.py the repository's thin adapter byte for byte, and the calibrate step gets its own copy of the profile, so
each model keeps its own instances and its own calibration. The ensemble is `reranker`'s with the step names mapped.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from python_backends.model_repository import (
    CALIBRATE, CALIBRATION_PROFILE, DEFAULT, ENGINE, ENGINE_CONFIG, ENSEMBLE, STEPS, config_path, engine_reference,
    read_config, set_parameters, variant_file, write_config,
)

ADAPTER = Path("1") / "model.py"


def step_name(ensemble: str, step: str) -> str:
    """rerank_preprocess -> NAME_preprocess."""
    return f"{ensemble}_{step.removeprefix('rerank_')}"


STEP_SUFFIXES = tuple(step_name("", step) for step in STEPS)  # _preprocess, _engine, _calibrate


def name_clash(name: str, repository: Path) -> str | None:
    """Why ensemble `name` cannot be served beside `repository`'s models, or None: Triton wants every model name once
    across its repositories, and a name ending like a step would be another ensemble's step."""
    if name.endswith(STEP_SUFFIXES):
        return f"'{name}' ends like a step of ensemble '{name.rsplit('_', 1)[0]}' ({', '.join(STEP_SUFFIXES)})"
    models = {path.parent.name for path in repository.glob("*/config.pbtxt")}
    taken = sorted(models & {name, *(step_name(name, step) for step in STEPS)})
    return (f"'{name}' served beside {repository} would take the names {', '.join(taken)}, which its models have"
            if taken else None)


@dataclass(frozen=True)
class SecondEnsemble:
    """Variant `variant` of `repository`, served from folder `out` as ensemble `name`."""

    repository: Path
    variant: str
    out: Path
    name: str
    command: tuple[str, ...] = ()

    def header(self) -> str:
        line = f"# {shlex.join(self.command)}\n" if self.command else ""
        return line + (f"# Variant '{self.variant}' of {self.repository} served as ensemble '{self.name}' beside "
                       f"'{ENSEMBLE}'; the settings' reasons: that repository's config.pbtxt files.\n")

    def write(self) -> list[Path]:
        """Write the ensemble and its three steps; returns the files written."""
        if clash := name_clash(self.name, self.repository):
            raise ValueError(f"ensemble name {clash}: choose another with --as")
        names = {step: step_name(self.name, step) for step in STEPS}
        engine = read_config(config_path(self.repository, ENGINE, self.variant, fallback=False))
        written = []
        for step, name in names.items():
            config = read_config(config_path(self.repository, step, self.variant, fallback=False))
            config.name = name
            if ENGINE_CONFIG in config.parameters:  # each step is its folder's config.pbtxt there
                set_parameters(config, {ENGINE_CONFIG: engine_reference(DEFAULT, names[ENGINE])})
            folder = self.out / name
            (folder / ADAPTER.parent).mkdir(parents=True, exist_ok=True)
            written.append(write_config(variant_file(self.out, name), config, self.header()))
            written.append(Path(shutil.copyfile(self.repository / step / ADAPTER, folder / ADAPTER)))
            if step == CALIBRATE:  # the profile the engine's file names, under the calibrate step
                written.append(self._copy_profile(folder, engine.parameters[CALIBRATION_PROFILE].string_value))
        ensemble = read_config(variant_file(self.repository, ENSEMBLE))
        ensemble.name = self.name
        for step in ensemble.ensemble_scheduling.step:
            step.model_name = names[step.model_name]
        (self.out / self.name / "1").mkdir(parents=True, exist_ok=True)  # an ensemble needs a version folder
        written.insert(0, write_config(variant_file(self.out, self.name), ensemble, self.header()))
        return written

    def _copy_profile(self, folder: Path, relative: str) -> Path:
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copyfile(self.repository / CALIBRATE / relative, target))
