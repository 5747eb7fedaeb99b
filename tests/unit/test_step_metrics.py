"""The steps' shared Prometheus base (python_backends/prometheus.py), against a stand-in for pb_utils' metric API:
refusals counted once each by reason, and every series released by `close` (what Triton's stub needs before its
interpreter shuts down)."""

from __future__ import annotations

import types
import weakref

import numpy as np

from python_backends.calibrate.metrics import ScoreDriftMetrics
from python_backends.calibrate.profiles import CalibrationProfile, PlattCalibrator
from python_backends.engine.deadline import DeadlineExceeded
from python_backends.engine.step import EngineDead
from python_backends.errors import InvalidRequest, Overloaded
from python_backends.preprocess.metrics import PreprocessMetrics
from python_backends.preprocess.step import Preprocessed
from python_backends.prometheus import Refusals, StepMetrics
from python_backends.sequences import SequenceBatch


class Metric:
    def __init__(self, labels: dict[str, str], buckets: list[float] | None = None) -> None:
        self.labels, self.value, self.observed = labels, 0.0, []

    def increment(self, value: float) -> None:
        self.value += value

    def set(self, value: float) -> None:
        self.value = value

    def observe(self, value: float) -> None:
        self.observed.append(value)


class MetricFamily:
    COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"
    made: list[weakref.ref] = []

    def __init__(self, name: str, description: str, kind: str) -> None:
        self.name, self.metrics = name, []
        MetricFamily.made.append(weakref.ref(self))

    def Metric(self, labels: dict[str, str], buckets: list[float] | None = None) -> Metric:  # noqa: N802 - pb_utils'
        self.metrics.append(Metric(labels, buckets))
        return self.metrics[-1]


PB_UTILS = types.SimpleNamespace(MetricFamily=MetricFamily)
LABELS = {"model": "rerank_engine", "version": "1"}
PROFILE = CalibrationProfile(name="p", version="1", model="m", score_type="cosine", calibrator=PlattCalibrator(a=1.0, b=0.0))


def _values(refusals: Refusals) -> dict[str, float]:
    return {reason: metric.value for reason, metric in refusals._by_reason.items()}


def test_preprocess_counts_each_answer_and_its_time_from_execute():
    metrics = PreprocessMetrics(PB_UTILS, {"model": "rerank_preprocess", "version": "1"})
    tokens = np.zeros(40, dtype=np.int32)  # 3 documents in 4 sequences of 10 tokens, one of them windowed
    sequences = SequenceBatch(tokens, tokens, np.full(4, 10, dtype=np.int32), np.array([0, 1, 2, 2], dtype=np.int32))
    admitted = Preprocessed(sequences, truncated=1)
    metrics.record(admitted, 0.25)
    metrics.record(admitted, 0.5)
    counted = (metrics.requests, metrics.seconds, metrics.pairs, metrics.tokens, metrics.truncated)
    assert [m.value for m in counted] == [2, 0.75, 6, 80, 2]


def test_each_refusal_is_counted_once_under_its_reason():
    refusals = Refusals(PB_UTILS, LABELS, (InvalidRequest, Overloaded, EngineDead))
    assert _values(refusals) == {"invalid": 0.0, "work_budget": 0.0, "engine_dead": 0.0, "internal": 0.0}
    for exc in (InvalidRequest("bad"), InvalidRequest("bad"), Overloaded("busy"), EngineDead("gone"), KeyError("x"),
                DeadlineExceeded("late")):
        refusals.count(exc)
    assert _values(refusals) == {"invalid": 2.0, "work_budget": 1.0, "engine_dead": 1.0, "internal": 1.0,
                                 "deadline": 1.0}  # a reason the step did not name: counted all the same
    assert [m.labels for m in refusals._by_reason.values()][0] == {**LABELS, "reason": "invalid"}


def test_close_releases_every_family():
    MetricFamily.made.clear()
    metrics = StepMetrics(PB_UTILS, LABELS)
    metrics.counter("reranker_a_total", "a")
    metrics.family("reranker_b", "b", "GAUGE").Metric(labels=LABELS)
    assert [ref() is not None for ref in MetricFamily.made] == [True, True]
    metrics.close()
    assert [ref() for ref in MetricFamily.made] == [None, None]  # at once, not at the interpreter's shutdown


def test_close_observes_what_is_queued_then_releases_the_raw_score_series():
    """The histogram's own thread holds the object; `close` stops it, so its families go too."""
    MetricFamily.made.clear()
    drift = ScoreDriftMetrics(PB_UTILS, LABELS, "cosine", window=8)
    histogram = drift._histogram
    drift.observe(PROFILE, np.array([0.1, 0.2, 0.3]))
    drift.close()
    assert histogram.observed == [0.1, 0.2, 0.3]
    del histogram
    assert [ref() for ref in MetricFamily.made] == [None, None]
