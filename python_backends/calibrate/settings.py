"""The calibrate step's configuration, read once from rerank_calibrate's config.pbtxt (or configs/<variant>.pbtxt)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..families import detect_model
from ..model_repository import VariantModel
from ..model_source import local_identity, resolve_model
from ..triton_params import ModelParameters


@dataclass(frozen=True)
class CalibrateSettings:
    """The step's settings: the served checkpoint and its profile file (the variant's engine file states both),
    the checkpoint's score type, which the profile must match, the most scores a request may carry and the drift
    window."""

    model: str
    score_type: str
    checkpoint: str | None  # its identity, where its files are on this machine (a hub id may be vLLM's to fetch)
    profile_path: Path
    max_scores: int  # the engine's max_sequences: no engine answer carries more. The public limit, max_documents,
    # lives in rerank_preprocess's file alone, which checks at its load that the engine takes that many and more
    drift_window: int

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> "CalibrateSettings":
        """From what Triton passes to `initialize`: the step's config and folder, and through them its variant."""
        config, model_dir = json.loads(args["model_config"]), Path(args["model_repository"])
        return cls.from_model_config(config, model_dir, VariantModel.for_step(model_dir, config))

    @classmethod
    def from_model_config(cls, config: Mapping[str, Any], model_dir: Path, variant: VariantModel) -> "CalibrateSettings":
        """From the step's model configuration, its folder (profile paths are under it) and the variant it serves,
        whose engine file states the checkpoint and its profile."""
        params = ModelParameters.from_model_config(config)
        return cls(
            model=variant.model,
            score_type=detect_model(resolve_model(variant.model)).score_type,  # from the checkpoint's own config.json
            checkpoint=local_identity(variant.model),
            profile_path=model_dir / variant.calibration_profile,
            max_scores=ModelParameters.from_model_config(variant.engine_config).integer("max_sequences", minimum=1),
            drift_window=params.integer("drift_window", minimum=1),
        )
