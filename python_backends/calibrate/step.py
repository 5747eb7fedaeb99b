"""The calibrate step: raw engine scores -> calibrated probabilities and a ranking.

The profile file is re-read when it changes on disk, so a newly fitted profile takes effect
without reloading the engine; a broken new file, or one fitted for another score type than the
served model's, is refused and the old profile stays in use. A profile for the wrong score type
fails the model load itself, with a message naming both.

The step is callable on its own (any client reaches internal models on the same ports), so it checks
its inputs completely: one bad direct call fails itself only, never the requests batched with it.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InvalidRequest
from ..ranking import ranking_length, top_n_ranking
from .profile_schema import CalibrationProfileError, load_profile
from .profiles import CalibrationProfile

# What the calibrate step refuses a request with, each error's `reason` a label of reranker_rejected_requests_total
REFUSED_AS = (InvalidRequest,)

log = logging.getLogger(__name__)


def bound_profile(path: Path, served_model: str, served_score_type: str,
                  served_checkpoint: str | None = None) -> CalibrationProfile:
    """Load ``path`` and check that it is named after its file (so the CALIBRATION output names the file to replace)
    and was made for the served model: its score type, and its checkpoint identity where both the profile and the
    server know it."""
    profile = load_profile(path)
    if profile.name != path.stem:
        raise CalibrationProfileError(
            f"{path}: profile {profile.tag} is named '{profile.name}', but a served profile is named after its file; "
            f"set its \"name\" to '{path.stem}' (or fit it with --name {path.stem})"
        )
    if profile.checkpoint and served_checkpoint and profile.checkpoint != served_checkpoint:
        raise CalibrationProfileError(
            f"{path}: profile {profile.tag} was made for checkpoint {profile.checkpoint} (model '{profile.model}'), "
            f"but the served model '{served_model}' is checkpoint {served_checkpoint}; fit a profile for this model "
            "(reranker-calibrate fit) or point calibration_profile at its own"
        )
    if profile.score_type != served_score_type:
        raise CalibrationProfileError(
            f"{path}: profile {profile.tag} was fitted for score type '{profile.score_type}' (model "
            f"'{profile.model}'), but the served model '{served_model}' gives '{served_score_type}' scores; "
            "fit a profile for this model (reranker-calibrate fit) or use an unfitted sigmoid profile"
        )
    if profile.model != served_model:  # same score type: usable, but its numbers belong to another checkpoint
        log.warning("calibration profile %s was fitted for model '%s', serving '%s'", profile.tag, profile.model, served_model)
    return profile


class ProfileStore:
    """The calibration profile in force, swapped atomically when its file's mtime or size changes."""

    def __init__(self, path: Path, served_model: str, served_score_type: str, served_checkpoint: str | None = None) -> None:
        self.path = path
        self.served_model = served_model
        self.served_score_type = served_score_type
        self.served_checkpoint = served_checkpoint
        self._lock = threading.Lock()
        self._stamp = self._file_stamp()
        self.profile: CalibrationProfile = self._load()  # a bad or mismatched profile fails the model load
        self.refused: str | None = None  # why the file on disk is not the profile in force (a refused swap), or None

    def _load(self) -> CalibrationProfile:
        return bound_profile(self.path, self.served_model, self.served_score_type, self.served_checkpoint)

    def _file_stamp(self) -> tuple[int, int]:
        stat = os.stat(self.path)
        return stat.st_mtime_ns, stat.st_size

    def current(self) -> CalibrationProfile:
        try:
            stamp = self._file_stamp()
        except FileNotFoundError:
            return self.profile  # mid-replace (rename) or removed: keep serving with what we have
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    self._stamp = stamp
                    try:
                        self.profile, self.refused = self._load(), None
                        log.warning("calibration profile reloaded: %s", self.profile.tag)
                    except CalibrationProfileError as exc:
                        self.refused = str(exc)
                        log.error("new calibration profile refused, keeping %s: %s", self.profile.tag, exc)
        return self.profile


def validated_inputs(raw_scores: np.ndarray, top_n: np.ndarray | None, max_scores: int) -> tuple[np.ndarray, int]:
    """RAW_SCORES [1, N] with 1 <= N <= max_scores, all finite; TOP_N [1, 1] in 1..N, absent = N.
    Checked in this order, each failure an InvalidRequest naming the tensor and the limit."""
    if raw_scores.ndim != 2 or raw_scores.shape[0] != 1:
        raise InvalidRequest(f"RAW_SCORES must have shape [1, n] (one query per request), got {list(raw_scores.shape)}",
                             "RAW_SCORES")
    n = raw_scores.shape[1]
    if not 1 <= n <= max_scores:
        raise InvalidRequest(f"RAW_SCORES has {n} scores; 1 to {max_scores} (the engine's max_sequences) are allowed",
                             "RAW_SCORES")
    if not np.isfinite(raw_scores).all():
        bad = int((~np.isfinite(raw_scores)).sum())
        raise InvalidRequest(f"RAW_SCORES has {bad} non-finite values (NaN or inf)", "RAW_SCORES")
    if top_n is not None and top_n.shape != (1, 1):
        raise InvalidRequest(f"TOP_N must have shape [1, 1], got {list(top_n.shape)}", "TOP_N")
    return raw_scores[0], ranking_length(None if top_n is None else int(top_n[0, 0]), n)


@dataclass
class CalibratedResult:
    scores: np.ndarray
    ranking: np.ndarray
    profile_tag: str


def calibrate(profile: CalibrationProfile, raw_scores: np.ndarray, top_n: int) -> CalibratedResult:
    """Rank by the raw score: calibration is monotone, and raw scores still separate ties a flat isotonic step makes."""
    scores = profile.apply(raw_scores).astype(np.float32)
    return CalibratedResult(scores, top_n_ranking(raw_scores, top_n), profile.tag)
