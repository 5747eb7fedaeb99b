"""The calibrate step's configuration, read once from rerank_calibrate's config.pbtxt (or configs/<variant>.pbtxt)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..families import detect_model
from ..model_source import resolve_model
from ..triton_params import ModelParameters


@dataclass(frozen=True)
class CalibrateSettings:
    """The step's parameters: the served checkpoint (same reference as rerank_preprocess and rerank_engine),
    whose score type the profile must match, the profile file, the document limit and the drift window."""

    model: str
    score_type: str
    profile_path: Path
    max_documents: int
    drift_window: int

    @classmethod
    def from_parameters(cls, params: ModelParameters, model_dir: Path) -> "CalibrateSettings":
        model = params.text("model")
        return cls(
            model=model,
            score_type=detect_model(resolve_model(model)).score_type,  # from the checkpoint's own config.json
            profile_path=model_dir / params.text("calibration_profile"),
            max_documents=params.integer("max_documents", minimum=1),
            drift_window=params.integer("drift_window", minimum=1),
        )
