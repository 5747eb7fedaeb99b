"""The chart's Grafana dashboard reads what the servers export: every metric each panel's PromQL names, and every
label it matches or groups by, is in the /metrics of the running CPU server and of a gateway in front of it (with a
shadow candidate, so the comparison's series exist), scraped after a drift window of scores through the server and
one request through the gateway. A renamed metric or
label fails here, not on an operator's empty panel."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections import defaultdict

import pytest

from reranker_client import RerankClient
from tests.support.gateway import start_gateway, stop_gateway
from tests.support.triton_server import PROBE_DOCUMENTS, PROBE_QUERY, ROOT

DASHBOARD = ROOT / "deploy" / "helm" / "reranker" / "dashboards" / "reranker.json"
DRIFT_WINDOW = 500  # rerank_calibrate's drift_window (config.pbtxt)
# Triton's NVML series: exported only where it sees a GPU (docs: Triton metrics, "GPU Metrics")
GPU_ONLY = {"nv_gpu_memory_used_bytes": {"gpu_uuid"}, "nv_gpu_utilization": {"gpu_uuid"}}
# PromQL words that are not metric names
PROMQL = {"sum", "max", "min", "avg", "count", "rate", "increase", "histogram_quantile", "vector", "by", "without",
          "on", "ignoring", "and", "or", "unless", "le"}
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\bby\s*\(([^)]*)\)")


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+", re.MULTILINE)
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="')


def exported(text: str) -> dict[str, set[str]]:
    """Sample name, as the exposition text writes it (Triton's counters have no _total), -> its label names."""
    labels: dict[str, set[str]] = defaultdict(set)
    for name, label_text in SAMPLE.findall(text):
        labels[name].update(LABEL.findall(label_text))
    return labels


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


def expressions() -> list[tuple[str, str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(panel["title"], target["expr"]) for panel in panels for target in panel.get("targets", [])]


def problems(expr: str, series: dict[str, set[str]]) -> list[str]:
    """What `expr` asks of the exported series that they do not have."""
    text = re.sub(r'"[^"]*"', '""', expr.replace("$__rate_interval", "5m").replace("$model", "reranker"))
    text = re.sub(r"\[[^\]]*\]", "", text)
    groups = GROUPING.findall(text)
    found, named = [], []
    for name, matchers in SELECTOR.findall(GROUPING.sub("", text)):
        if name in PROMQL or re.fullmatch(r"[0-9.eE]+", name):
            continue
        known = series.get(name, GPU_ONLY.get(name))
        if known is None:
            found.append(f"no series {name}")
            continue
        named.append(name)
        found += [f"{name} has no label {label}" for label in MATCHER.findall(matchers) if label not in known]
    for group in groups:
        for label in (word.strip() for word in group.split(",") if word.strip()):
            if not any(label in series.get(name, GPU_ONLY.get(name, set())) for name in named):
                found.append(f"no series of {named} has label {label} (by)")
    return found


@pytest.fixture(scope="module")
def series(server, tmp_path_factory) -> dict[str, set[str]]:
    """The series of the server and of a gateway with a shadow candidate, after one request through each."""
    client = RerankClient(server.grpc_url, protocol="grpc")
    for start in range(0, DRIFT_WINDOW, 64):  # the drift gauge is exported once a window of scores was seen
        client.rerank(PROBE_QUERY, [f"{PROBE_DOCUMENTS[start % 2]} ({start + i})" for i in range(64)])
    client.close()
    profile = ROOT / "model_repository" / "rerank_calibrate" / "profiles" / "all-minilm-l6-v2.json"
    gateway = start_gateway(server.grpc_url, tmp_path_factory.mktemp("dashboard") / "gateway.log",
                            GATEWAY_SHADOW_MODEL="reranker", GATEWAY_SHADOW_FRACTION="1",
                            GATEWAY_SHADOW_PROFILE=str(profile), GATEWAY_SHADOW_DRIFT_WINDOW="2")
    try:
        body = json.dumps({"query": PROBE_QUERY, "documents": PROBE_DOCUMENTS}).encode()
        call = urllib.request.Request(f"{gateway.url}/v1/rerank", data=body, headers={"Content-Type": "application/json"})
        urllib.request.urlopen(call, timeout=60).close()
        shadow = r'gateway_shadow_calls_total\{[^}]*outcome="compared"[^}]*\} 1\.0'
        deadline = time.monotonic() + 30  # the shadow compares off the request path
        while not re.search(shadow, text := scrape(f"{gateway.url}/metrics")) and time.monotonic() < deadline:
            time.sleep(0.2)
        gateway_series = exported(text)
    finally:
        stop_gateway(gateway)
    return {**exported(scrape(f"http://{server.metrics_url}/metrics")), **gateway_series}


@pytest.mark.parametrize(("title", "expr"), expressions())
def test_each_panel_queries_series_the_servers_export(series, title, expr):
    assert problems(expr, series) == [], title


def test_the_checker_sees_a_renamed_metric_and_a_missing_label(series):
    assert problems("sum(rate(reranker_admitted_pairs[5m]))", series) == ["no series reranker_admitted_pairs"]
    assert problems('sum by (model, colour) (rate(reranker_admitted_pairs_total{shard="1"}[5m]))', series) == [
        "reranker_admitted_pairs_total has no label shard",
        "no series of ['reranker_admitted_pairs_total'] has label colour (by)"]
