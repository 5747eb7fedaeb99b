"""Triton adapter of the calibrate step; the logic is `python_backends.calibrate`."""

import numpy as np
import triton_python_backend_utils as pb_utils

from python_backends.calibrate.metrics import CalibrationMetrics, ScoreDriftMetrics
from python_backends.calibrate.settings import CalibrateSettings
from python_backends.calibrate.step import REFUSED_AS, ProfileStore, calibrate, validated_inputs
from python_backends.prometheus import Refusals, model_labels
from python_backends.seal import ScoreSeal
from python_backends.triton_io import input_array, release_senders, required_array, respond


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        self.settings = settings = CalibrateSettings.from_args(args)
        self.profiles = ProfileStore(settings.profile_path, settings.model, settings.score_type, settings.checkpoint)
        labels = model_labels(args)
        self.metrics = CalibrationMetrics(pb_utils, labels)
        self.metrics.in_use(self.profiles.profile.tag)
        self.drift = ScoreDriftMetrics(pb_utils, labels, self.settings.score_type, self.settings.drift_window)
        self.refusals = Refusals(pb_utils, labels, REFUSED_AS)
        self.seal = ScoreSeal()  # drift counts the engine's sealed scores only: a direct call cannot move the alert

    def execute(self, requests: list) -> list:
        profile = self.profiles.current()  # one profile for the whole batch, even during a swap
        self.metrics.in_use(profile.tag)
        self.metrics.file_refused(self.profiles.refused is not None)
        return [respond(pb_utils, lambda r: self._handle(profile, r), request, self.refusals.count) for request in requests]

    def finalize(self) -> None:
        self.drift.close()
        self.metrics.close()
        self.refusals.close()
        release_senders()

    def _handle(self, profile, request) -> dict[str, np.ndarray]:
        raw, top_n = validated_inputs(
            required_array(pb_utils, request, "RAW_SCORES"),
            input_array(pb_utils, request, "TOP_N"),  # absent: rank every document
            self.settings.max_scores,
        )
        result = calibrate(profile, raw, top_n)
        if self.seal.counts(raw, input_array(pb_utils, request, "SCORE_SEAL")):
            self.drift.observe(profile, raw)
        return {
            "SCORES": result.scores[None, :],
            "RAW_SCORES_OUT": raw[None, :].astype(np.float32),
            "RANKING": result.ranking[None, :],
            "CALIBRATION": np.array([[result.profile_tag.encode()]], dtype=np.object_),
        }
