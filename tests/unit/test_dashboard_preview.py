"""tools/dashboard_preview.py asks Prometheus the dashboard's own queries: every variable filled in, each series
named as Grafana's legend would name it."""

from __future__ import annotations

import json

from tools.dashboard_preview import DASHBOARD, filled, legend


def test_every_panel_query_is_left_without_a_grafana_variable():
    panels = json.loads(DASHBOARD.read_text())["panels"]
    queries = [filled(t["expr"], "reranker", "1m") for p in panels for t in p.get("targets", [])]
    assert len(queries) == 26
    assert not [q for q in queries if "$" in q]


def test_a_series_is_named_by_the_targets_legend_or_its_labels():
    assert legend({"legendFormat": "{{model}} {{ quantile }}"}, {"model": "reranker", "quantile": "0.99"}) == (
        "reranker 0.99")
    assert legend({"expr": "x"}, {"__name__": "m", "reason": "invalid", "model": "rerank_preprocess"}) == (
        "model=rerank_preprocess, reason=invalid")
