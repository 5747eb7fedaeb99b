"""Triton's per-model statistics (/v2/models/<m>/stats) before and after a level: each step's queue and compute time
per request, its batches and busy share, and the shares of the mean end-to-end latency the client saw. vLLM's own
time per request comes from the engine step's counters on the metrics port (python_backends/engine/answer_metrics.py
EngineMetrics): Triton's compute time for rerank_engine covers only the hand-over."""

from __future__ import annotations

import urllib.request

from benchmarks.procs import http_json

TRITON_MODELS = ("reranker", "rerank_preprocess", "rerank_engine", "rerank_calibrate")
# the seconds counter sums every request handed to vLLM, whatever its outcome: divide by all of them
ENGINE_COUNTERS = {"vllm_s": "reranker_engine_vllm_seconds_total",
                   "vllm_requests": 'reranker_engine_requests_total{model="rerank_engine"'}


def _engine_counters(metrics: str) -> dict:
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as response:
        lines = response.read().decode().splitlines()
    return {key: sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix))
            for key, prefix in ENGINE_COUNTERS.items()}


def snapshot(http: str, metrics: str) -> dict:
    out = {"engine_counters": _engine_counters(metrics)}
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
    vllm_ms = d["engine_counters"]["vllm_s"] * 1000 / max(1, d["engine_counters"]["vllm_requests"])
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
    pre_cal = per["rerank_preprocess"]["compute_ms"] + per["rerank_calibrate"]["compute_ms"]
    engine = per["rerank_engine"]["compute_ms"]
    queues = sum(per[m]["queue_ms"] for m in per)
    ens_ms = d["reranker"]["success_ns"] / max(1, d["reranker"]["count"]) / 1e6
    return {"triton_stats": {
        "timeline_ms": timeline(per, vllm_ms, e2e_ms),
        "ensemble_requests": d["reranker"]["count"],
        "per_model": per,
        "ensemble_server_ms": round(ens_ms, 3),
        "pre_calibrate_compute_ms": round(pre_cal, 3),
        "engine_compute_ms": round(engine, 3),
        "queue_ms": round(queues, 3),
        "vllm_ms": round(vllm_ms, 3),  # hand-over to answer, inside the engine step (EngineMetrics)
        "share_pre_calibrate": round(pre_cal / e2e_ms, 4),
        "share_engine": round(engine / e2e_ms, 4),  # the hand-over (and the wait while the in-flight budget is spent)
        "share_queue": round(queues / e2e_ms, 4),
        "share_vllm": round(vllm_ms / e2e_ms, 4),
        "share_other": round(1 - (pre_cal + engine + queues + vllm_ms) / e2e_ms, 4),  # network, ensemble hops, client
    }}


def timeline(per: dict, vllm_ms: float, e2e_ms: float) -> dict:
    """Where a request's time goes, as milliseconds since the client sent it (means over the level; exact for one
    request at a time): each step's queue wait, then its compute; the engine step's compute is the hand-over, after
    which vLLM holds the request until its scores are done. What is left of the client's latency after calibrate
    (network, the ensemble's hops, the client's own work) ends at `response`."""
    marks, t = {"send": 0.0}, 0.0
    for step, start, end in (("rerank_preprocess", "preprocess_start", "preprocess_end"),
                             ("rerank_engine", "handover_start", "handover_end"),
                             ("rerank_calibrate", "calibrate_start", "calibrate_end")):
        t += per[step]["queue_ms"]
        marks[start] = t
        t += per[step]["compute_ms"]
        marks[end] = t
        if step == "rerank_engine":
            t += vllm_ms
            marks["vllm_done"] = t
    marks["response"] = e2e_ms
    return {k: round(v, 2) for k, v in marks.items()}
