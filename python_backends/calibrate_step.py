"""The calibrate step: raw engine scores -> calibrated probabilities and a ranking.

The profile file is re-read when it changes on disk, so a newly fitted profile takes effect
without reloading the engine; a broken new file is refused and the old profile stays in use.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .calibration.profiles import CalibrationProfile
from .calibration.schema import CalibrationProfileError, load_profile
from .ranking import top_n_ranking

log = logging.getLogger(__name__)


class ProfileStore:
    """The calibration profile in force, swapped atomically when its file's mtime or size changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp = self._file_stamp()
        self.profile: CalibrationProfile = load_profile(path)  # a bad profile fails the model load

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
                        self.profile = load_profile(self.path)
                        log.warning("calibration profile reloaded: %s", self.profile.tag)
                    except CalibrationProfileError as exc:
                        log.error("new calibration profile refused, keeping %s: %s", self.profile.tag, exc)
        return self.profile


@dataclass
class CalibratedResult:
    scores: np.ndarray
    ranking: np.ndarray
    profile_tag: str


def calibrate(profile: CalibrationProfile, raw_scores: np.ndarray, top_n: int) -> CalibratedResult:
    """Rank by the raw score: calibration is monotone, and raw scores still separate ties a flat isotonic step makes."""
    scores = profile.apply(raw_scores).astype(np.float32)
    return CalibratedResult(scores, top_n_ranking(raw_scores, top_n), profile.tag)
