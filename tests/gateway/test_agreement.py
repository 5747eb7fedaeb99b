"""The shadow's per-call agreement statistics, and which calls they count."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from gateway.agreement import spearman, top_k_overlap
from gateway.settings import ShadowSettings
from gateway.shadow import Shadow, ShadowMetrics
from gateway.upstream import UpstreamLatency


def test_top_k_overlap_is_the_shared_share_and_none_where_k_covers_every_document():
    primary = np.array([0.9, 0.8, 0.1, 0.0])
    assert top_k_overlap(primary, np.array([0.9, 0.0, 0.8, 0.1]), 2) == 0.5  # {0, 1} against {0, 2}
    assert top_k_overlap(primary, primary[::-1].copy(), 2) == 0.0
    assert top_k_overlap(primary, -primary, 4) is None  # reversed, yet both top 4 are all four documents
    assert top_k_overlap(primary[:2], primary[:2], 10) is None


def test_spearman_of_reversed_and_equal_rankings():
    a = np.array([0.1, 0.5, 0.9])
    assert spearman(a, a) == pytest.approx(1.0)
    assert spearman(a, -a) == pytest.approx(-1.0)


def test_a_call_with_no_more_documents_than_k_is_compared_but_not_in_the_overlap():
    registry = CollectorRegistry()
    shadow = Shadow(ShadowSettings("candidate", top_k=2), models=None, metrics=ShadowMetrics(registry, "p", "c"),
                    latency=UpstreamLatency(registry))
    shadow.compare(np.array([0.9, 0.1]), np.array([0.1, 0.9]))  # two documents: top 2 is both
    shadow.compare(np.array([0.9, 0.8, 0.1]), np.array([0.9, 0.1, 0.8]))
    labels = {"primary": "p", "candidate": "c"}
    value = lambda name, **extra: registry.get_sample_value(name, {**labels, **extra})  # noqa: E731
    assert value("gateway_shadow_calls_total", outcome="compared") == 2
    assert value("gateway_shadow_spearman_count") == 2
    assert (value("gateway_shadow_top_k_overlap_count"), value("gateway_shadow_top_k_overlap_sum")) == (1, 0.5)
