"""The GPU benchmark's harness on the CPU: sweep-point names usable as folder and config names, a server that fails
to load stops the wait at once with its own words, the single request's timeline from Triton's statistics, and the
invariance check's other load and its counts."""

from __future__ import annotations

import re
import sys
import time

import asyncio

import pytest

from benchmarks.corpus import Request
from benchmarks.engine_config import engine_args, point_name, split_override
from benchmarks.procs import ServerProcess
from benchmarks.run_gpu_benchmark import points
from benchmarks.systems import invariance
from benchmarks.systems.triton_ensemble import LOAD_FAILURE
from benchmarks.systems.triton_stats import TRITON_MODELS, delta, timeline
from python_backends.model_repository import PREPROCESS, config_dict, copy_with_variant, variant_file

SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


@pytest.mark.parametrize(("override", "name"), [
    ('quantization="fp8"', "quantization-fp8"),
    ("quantization=fp8", "quantization-fp8"),
    ("max_num_batched_tokens=32768", "max_num_batched_tokens-32768"),
    ('compilation_config={"pass_config": {"enable_fusion": true}}',
     "compilation_config-pass_config-enable_fusion-true"),
])
def test_sweep_points_are_named_in_safe_characters(override, name):
    base, (point, values, config) = points([override])
    assert base == ("base", {}, "")
    assert point == name and SAFE.match(point)
    assert config == "" and len(values) == 1


def test_a_step_parameter_point_changes_that_step_of_the_triton_copy_and_no_engine(tmp_path):
    (base, (point, override, config)) = points(["rerank_preprocess:tokenizer_threads=4"])
    assert (point, override, config) == ("rerank_preprocess-tokenizer_threads-4",
                                         {"rerank_preprocess:tokenizer_threads": 4}, "")
    assert split_override({**override, "max_num_seqs": 128}) == ({"max_num_seqs": 128},
                                                                 {("rerank_preprocess", "tokenizer_threads"): "4"})
    assert engine_args("gpu", override) == engine_args("gpu")  # the direct engine and `vllm serve` run as committed
    engine, steps = split_override(override)
    copy = copy_with_variant(tmp_path / "repo", point, base="gpu", parameters=steps, engine_override=engine)
    preprocess = config_dict(variant_file(copy, PREPROCESS, point))["parameters"]
    assert preprocess["tokenizer_threads"]["string_value"] == "4"
    assert engine_args(point, repository=copy) == engine_args("gpu")


def test_a_config_point_names_the_committed_variant():
    assert points([], ["gpu-fp8"], base=False) == [("gpu-fp8", {}, "gpu-fp8")]
    assert point_name("max_num_seqs", 128) == "max_num_seqs-128"


def test_a_server_that_fails_to_load_fails_the_wait_at_once_with_its_message(tmp_path):
    line = ("E1203 16:40:01.000000 77 model_lifecycle.cc:654] \"failed to load 'rerank_engine' version 1: Internal: "
            "Python model file not found in '/r/rerank_engine/1/model.py'\"")
    script = f"import sys, time; print({line!r}, flush=True); time.sleep(60)"
    server = ServerProcess([sys.executable, "-c", script], tmp_path / "server.log", {}, tmp_path / "pgids")
    t0 = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match=r"failed to load after \d+ s: E1203 .*Python model file not found"):
            server.wait_ready(lambda: False, 50, "tritonserver", LOAD_FAILURE)
    finally:
        server.stop(5)
    assert time.monotonic() - t0 < 10


def test_a_server_that_never_fails_is_waited_for_until_ready(tmp_path):
    server = ServerProcess([sys.executable, "-c", "import time; print('I1203 loading', flush=True); time.sleep(60)"],
                           tmp_path / "server.log", {}, tmp_path / "pgids")
    ready_at = time.monotonic() + 1.5
    try:
        assert 1.0 < server.wait_ready(lambda: time.monotonic() > ready_at, 20, "tritonserver", LOAD_FAILURE) < 5
    finally:
        server.stop(5)


def test_the_timeline_adds_queue_compute_and_vllm_times_in_order():
    per = {"rerank_preprocess": {"queue_ms": 0.5, "compute_ms": 12.0},
           "rerank_engine": {"queue_ms": 0.25, "compute_ms": 1.25},
           "rerank_calibrate": {"queue_ms": 0.1, "compute_ms": 0.9}}
    assert timeline(per, vllm_ms=110.0, e2e_ms=127.0) == {
        "send": 0.0, "preprocess_start": 0.5, "preprocess_end": 12.5, "handover_start": 12.75, "handover_end": 14.0,
        "vllm_done": 124.0, "calibrate_start": 124.1, "calibrate_end": 125.0, "response": 127.0}


def _snapshot(preprocess_s: float, admitted: int, vllm_s: float, requests: int) -> dict:
    step = {"count": requests, "success_ns": requests * 10**8, "queue_ns": requests * 10**5,
            "compute_ns": requests * 10**6, "compute_infer_ns": requests * 10**6, "executions": requests,
            "batch_busy_ns": requests * 10**6}
    counters = {"vllm_s": vllm_s, "vllm_requests": requests, "preprocess_s": preprocess_s,
                "preprocess_requests": admitted}
    return {"step_counters": counters, **{m: dict(step) for m in TRITON_MODELS}}


def test_preprocess_time_comes_from_its_counter_where_execute_only_hands_over():
    # 4 requests: Triton counts 1 ms of execute each, the step's counter 18 ms from execute to answer
    before, after = _snapshot(1.0, 10, 5.0, 10), _snapshot(1.072, 14, 5.44, 14)
    stats = delta(before, after, {"latency_ms": {"mean": 140.0}, "wall_s": 1.0})["triton_stats"]
    assert stats["per_model"]["rerank_preprocess"]["answer_ms"] == 18.0
    assert stats["pre_calibrate_ms"] == 19.0
    assert stats["timeline_ms"] == {
        "send": 0.0, "preprocess_start": 0.1, "preprocess_end": 18.1, "handover_start": 18.2, "handover_end": 19.2,
        "vllm_done": 129.2, "calibrate_start": 129.3, "calibrate_end": 130.3, "response": 140.0}


def test_a_server_without_the_preprocess_counter_keeps_tritons_compute_time():
    stats = delta(_snapshot(0.0, 0, 5.0, 10), _snapshot(0.0, 0, 5.44, 14),
                  {"latency_ms": {"mean": 140.0}, "wall_s": 1.0})["triton_stats"]
    assert "answer_ms" not in stats["per_model"]["rerank_preprocess"]
    assert stats["timeline_ms"]["preprocess_end"] == 1.1


def test_the_other_load_of_the_invariance_check_varies_document_count_and_length():
    documents = tuple("abcdefghij" * (k + 1) for k in range(64))
    others = invariance.fillers([Request("q", documents, 10)] * 4)
    assert [len(r.documents) for r in others] == [5, 17, 33, 64]
    assert [len(r.documents[0]) for r in others] == [3, 6, 10, 3]  # 30%, 60%, 100% of 10 characters, then 30%
    assert [r.top_n for r in others] == [5, 10, 10, 10]


def test_the_invariance_check_counts_moved_scores_and_changed_top10s_against_alone():
    alone = [[float(x) for x in range(12)], [0.5, 0.25]]
    moved = list(alone[0])
    moved[0], moved[11] = 20.0, 11.5  # the lowest score becomes the highest: the top 10 changes
    seen = [(0, alone[0]), (0, moved), (1, [0.5, 0.25])]
    assert invariance.compare(alone, seen) == {"answers": 3, "pairs": 26, "max_abs_diff": 20.0, "pairs_changed": 2,
                                               "top10_changed": 1}


def test_a_level_scores_each_probe_each_round_while_the_others_are_scored_beside_it():
    calls = []

    async def score(request):
        calls.append(request.query)
        await asyncio.sleep(0.001)
        return [1.0] * len(request.documents)

    probes = [Request("probe", ("a", "b"), 2)]
    row = asyncio.run(invariance.level(score, probes, [Request("other", ("c",), 1)], 4, [[1.0, 1.0]]))
    assert (row["concurrency"], row["answers"], row["pairs_changed"], row["filler_errors"]) == (4, 2, 0, 0)
    assert calls.count("probe") == invariance.ROUNDS and calls.count("other") >= 3
