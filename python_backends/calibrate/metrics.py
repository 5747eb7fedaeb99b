"""Prometheus series of the calibrate step (python_backends/prometheus.py): the profile in force, the raw scores it
sees and their drift.

- `reranker_calibration_profile_info` (gauge, labels model, version, profile): 1 for the profile in use;
- `reranker_calibration_profile_refused` (gauge, labels model, version): 1 while the profile file on disk is one the
  step refused to swap in (another score type, checkpoint or name; the log says which), 0 otherwise;
- `reranker_raw_score` (histogram, labels model, version): every raw engine score, buckets fit for the
  served model's score type;
- `reranker_score_drift_psi` (gauge, labels model, version, profile): population stability index of the
  last `drift_window` raw scores against the distribution the profile in force was fitted on
  (python_backends/calibrate/drift.py). Absent until the window is full, and when the profile stores no distribution.

Each histogram observation is one message to the Triton process (~0.5 ms measured on the CPU server), so a
background thread makes them, off the request path; a backlog past MAX_PENDING batches is dropped and logged rather
than grown.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

import numpy as np

from ..prometheus import StepMetrics
from .drift import DriftWindow
from .profiles import CalibrationProfile

log = logging.getLogger(__name__)

#: Histogram buckets per score type: a cosine lies in [-1, 1]; logits of rerankers mostly in [-12, 12].
SCORE_BUCKETS: dict[str, list[float]] = {
    "cosine": [round(-1.0 + 0.1 * i, 1) for i in range(21)],
    "logit": [float(v) for v in range(-12, 13)],
    "yes_no_logit": [float(v) for v in range(-12, 13)],
}


MAX_PENDING = 4096


class CalibrationMetrics(StepMetrics):
    """The calibration profile in force, as an info-style gauge (1 for the current name@version)."""

    def __init__(self, pb_utils: Any, labels: dict[str, str]) -> None:
        super().__init__(pb_utils, labels)
        self._info = self.family("reranker_calibration_profile_info", "Calibration profile in use (value 1)", "GAUGE")
        self._current: tuple[str, Any] | None = None
        self._refused = self.family("reranker_calibration_profile_refused",
                                    "1 while the profile file on disk was refused and the previous one serves",
                                    "GAUGE").Metric(labels=labels)
        self._refused_now = False
        self._refused.set(0)

    def file_refused(self, refused: bool) -> None:
        if refused != self._refused_now:  # a set is a message to the Triton process: only when it changes
            self._refused.set(1 if refused else 0)
            self._refused_now = refused

    def in_use(self, tag: str) -> None:
        if self._current is not None and self._current[0] == tag:
            return
        if self._current is not None:
            self._current[1].set(0)
        metric = self._info.Metric(labels={**self.labels, "profile": tag})
        metric.set(1)
        self._current = (tag, metric)


class ScoreDriftMetrics(StepMetrics):
    """Raw-score histogram and the drift gauge of the profile in force; a new profile starts a new window."""

    def __init__(self, pb_utils: Any, labels: dict[str, str], score_type: str, window: int) -> None:
        super().__init__(pb_utils, labels)
        self._window_size = window
        histogram = self.family("reranker_raw_score", "Raw engine scores seen by the calibrate step", "HISTOGRAM")
        self._histogram = histogram.Metric(labels=labels, buckets=SCORE_BUCKETS[score_type])
        self._gauge_family = self.family(
            "reranker_score_drift_psi",
            "Population stability index of the recent raw scores vs the calibration profile's fitting scores",
            "GAUGE",
        )
        self._profile_tag: str | None = None
        self._window: DriftWindow | None = None
        self._gauge: Any = None
        self._pending: queue.Queue[list[float] | None] = queue.Queue(maxsize=MAX_PENDING)
        self._observer = threading.Thread(target=self._observe_forever, name="raw-score-histogram", daemon=True)
        self._observer.start()

    def _observe_forever(self) -> None:
        while (values := self._pending.get()) is not None:
            for value in values:
                self._histogram.observe(value)

    def close(self) -> None:
        """Observe what is queued, then delete the series (StepMetrics.close)."""
        self._pending.put(None)
        self._observer.join(timeout=10)
        super().close()

    def _follow(self, profile: CalibrationProfile) -> None:
        """Start a fresh window (and gauge series) for a profile not seen before."""
        if profile.tag == self._profile_tag:
            return
        self._profile_tag = profile.tag
        self._gauge = None  # dropping the Metric object removes the old profile's series
        distribution = profile.raw_score_distribution
        self._window = None if distribution is None else DriftWindow(distribution, self._window_size)
        if self._window is None:
            log.warning("calibration profile %s stores no raw_score_distribution: no drift metric", profile.tag)

    def observe(self, profile: CalibrationProfile, raw_scores: np.ndarray) -> None:
        self._follow(profile)
        try:
            self._pending.put_nowait(np.asarray(raw_scores, dtype=np.float64).ravel().tolist())
        except queue.Full:
            log.error("raw-score histogram backlog full: %d scores not counted", np.asarray(raw_scores).size)
        if self._window is None:
            return
        self._window.add(raw_scores)
        psi = self._window.psi()
        if psi is not None:
            if self._gauge is None:
                self._gauge = self._gauge_family.Metric(labels={**self.labels, "profile": profile.tag})
            self._gauge.set(psi)
