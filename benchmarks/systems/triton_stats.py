"""Triton's per-model statistics (/v2/models/<m>/stats) before and after a level: each step's queue and compute time
per request, its batches and busy share, and the shares of the mean end-to-end latency the client saw. Preprocess and
the engine step answer through response senders, so Triton's compute time for them ends when `execute` hands the
work on; their own counters on the metrics port give the rest: preprocess's time from `execute` to each answer
(python_backends/preprocess/metrics.py) and vLLM's time from hand-over to scores
(python_backends/engine/metrics.py)."""

from __future__ import annotations

import urllib.request

from benchmarks.procs import http_json
from python_backends.model_repository import ENSEMBLE, STEPS

TRITON_MODELS = (ENSEMBLE, *STEPS)
# the engine's seconds counter sums every request handed to vLLM, whatever its outcome: divide by all of them;
# preprocess's sums the admitted requests it answered
STEP_COUNTERS = {"vllm_s": "reranker_engine_vllm_seconds_total",
                 "vllm_requests": 'reranker_engine_requests_total{model="rerank_engine"',
                 "preprocess_s": "reranker_preprocess_seconds_total",
                 "preprocess_requests": 'reranker_admitted_requests_total{model="rerank_preprocess"'}


def _step_counters(metrics: str) -> dict:
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as response:
        lines = response.read().decode().splitlines()
    return {key: sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix))
            for key, prefix in STEP_COUNTERS.items()}


def snapshot(http: str, metrics: str) -> dict:
    out = {"step_counters": _step_counters(metrics)}
    for m in TRITON_MODELS:
        st = http_json(f"http://{http}/v2/models/{m}/stats", timeout=10)["model_stats"][0]
        inf = st["inference_stats"]
        out[m] = {
            "count": int(inf["success"]["count"]),
            "success_ns": int(inf["success"]["ns"]),
            "queue_ns": int(inf["queue"]["ns"]),
            "compute_ns": sum(int(inf[p]["ns"]) for p in ("compute_input", "compute_infer", "compute_output")),
            "compute_infer_ns": int(inf["compute_infer"]["ns"]),
            "executions": int(st.get("execution_count", 0)),
            "batch_busy_ns": sum(int(b["compute_input"]["ns"]) + int(b["compute_infer"]["ns"])
                                 + int(b["compute_output"]["ns"]) for b in st.get("batch_stats", [])),
        }
    return out


def delta(before: dict, after: dict, level: dict) -> dict:
    """Per request (means, ms) and as shares of the mean end-to-end latency the client saw."""
    d = {m: {k: after[m][k] - before[m][k] for k in after[m]} for m in after}
    e2e_ms = level["latency_ms"]["mean"] or float("nan")
    counters = d["step_counters"]
    vllm_ms = counters["vllm_s"] * 1000 / max(1, counters["vllm_requests"])
    per = {}
    for m in TRITON_MODELS[1:]:
        n = max(1, d[m]["count"])  # its own requests: stats of the last batch may land after the client's answer
        per[m] = {
            "requests": d[m]["count"],
            "executions": d[m]["executions"],
            "mean_batch": round(d[m]["count"] / d[m]["executions"], 2) if d[m]["executions"] else None,
            "queue_ms": round(d[m]["queue_ns"] / n / 1e6, 3),
            "compute_ms": round(d[m]["compute_ns"] / n / 1e6, 3),
            "busy_s": round(d[m]["batch_busy_ns"] / 1e9, 3),
            "busy_share_of_wall": round(d[m]["batch_busy_ns"] / 1e9 / level["wall_s"], 4) if level["wall_s"] else None,
        }
    if counters["preprocess_requests"]:  # a server without the counter: Triton's compute time stands
        answer_ms = counters["preprocess_s"] * 1000 / counters["preprocess_requests"]
        per["rerank_preprocess"]["answer_ms"] = round(answer_ms, 3)
    pre_cal = _step_ms(per["rerank_preprocess"]) + per["rerank_calibrate"]["compute_ms"]
    engine = per["rerank_engine"]["compute_ms"]
    queues = sum(per[m]["queue_ms"] for m in per)
    ens_ms = d["reranker"]["success_ns"] / max(1, d["reranker"]["count"]) / 1e6
    return {"triton_stats": {
        "timeline_ms": timeline(per, vllm_ms, e2e_ms),
        "ensemble_requests": d["reranker"]["count"],
        "per_model": per,
        "ensemble_server_ms": round(ens_ms, 3),
        "pre_calibrate_ms": round(pre_cal, 3),
        "engine_compute_ms": round(engine, 3),
        "queue_ms": round(queues, 3),
        "vllm_ms": round(vllm_ms, 3),  # hand-over to answer, inside the engine step (EngineMetrics)
        "share_pre_calibrate": round(pre_cal / e2e_ms, 4),
        "share_engine": round(engine / e2e_ms, 4),  # the hand-over (and the wait while the in-flight budget is spent)
        "share_queue": round(queues / e2e_ms, 4),
        "share_vllm": round(vllm_ms / e2e_ms, 4),
        "share_other": round(1 - (pre_cal + engine + queues + vllm_ms) / e2e_ms, 4),  # network, ensemble hops, client
    }}


def _step_ms(step: dict) -> float:
    """A step's time per request: from its `execute` to its answer where it counts that itself (`answer_ms`),
    else Triton's compute time."""
    return step.get("answer_ms", step["compute_ms"])


def timeline(per: dict, vllm_ms: float, e2e_ms: float) -> dict:
    """Where a request's time goes, as milliseconds since the client sent it (means over the level; exact for one
    request at a time): each step's queue wait, then its time to the answer; the engine step's compute is the
    hand-over, after which vLLM holds the request until its scores are done. What is left of the client's latency
    after calibrate (network, the ensemble's hops, the client's own work) ends at `response`."""
    marks, t = {"send": 0.0}, 0.0
    for step, start, end in (("rerank_preprocess", "preprocess_start", "preprocess_end"),
                             ("rerank_engine", "handover_start", "handover_end"),
                             ("rerank_calibrate", "calibrate_start", "calibrate_end")):
        t += per[step]["queue_ms"]
        marks[start] = t
        t += _step_ms(per[step])
        marks[end] = t
        if step == "rerank_engine":
            t += vllm_ms
            marks["vllm_done"] = t
    marks["response"] = e2e_ms
    return {k: round(v, 2) for k, v in marks.items()}
