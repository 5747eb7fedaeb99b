"""Triton adapter of the calibrate step; the logic is `python_backends.calibrate_step`."""

from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils

from python_backends.calibrate_step import ProfileStore, calibrate
from python_backends.metrics import CalibrationMetrics, model_labels
from python_backends.triton_io import required_array, respond
from python_backends.triton_params import ModelParameters


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        params = ModelParameters.from_model_config(args["model_config"])
        model_dir = Path(args["model_repository"])
        self.profiles = ProfileStore(model_dir / params.text("calibration_profile"))
        self.metrics = CalibrationMetrics(pb_utils, model_labels(args))
        self.metrics.in_use(self.profiles.profile.tag)

    def execute(self, requests: list) -> list:
        profile = self.profiles.current()  # one profile for the whole batch, even during a swap
        self.metrics.in_use(profile.tag)
        return [respond(pb_utils, lambda r: self._handle(profile, r), request) for request in requests]

    def _handle(self, profile, request) -> dict[str, np.ndarray]:
        raw = required_array(pb_utils, request, "RAW_SCORES")[0]
        top_n = int(required_array(pb_utils, request, "RANK_LIMIT")[0, 0])
        result = calibrate(profile, raw, top_n)
        return {
            "SCORES": result.scores[None, :],
            "RAW_SCORES_OUT": raw[None, :].astype(np.float32),
            "RANKING": result.ranking[None, :],
            "CALIBRATION": np.array([[result.profile_tag.encode()]], dtype=np.object_),
        }
