"""Drift detection on the running server: the shipped profile was fitted on the man-page set; scoring man pages
keeps reranker_score_drift_psi under the 0.25 alert threshold, scoring the hand-written set pushes it over,
reranker_raw_score counts every raw score the engine gave, a direct call to the calibrate step moves neither, and a
sealed answer of the engine sent to it again counts once."""

from __future__ import annotations

import re
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from python_backends.calibrate.drift import PSI_ALERT
from python_backends.calibrate.profile_schema import load_profile
from reranker_calibrate.pair_scoring import TritonScorer, read_pairs

ROOT = Path(__file__).resolve().parents[2]
PROFILE = load_profile(ROOT / "model_repository" / "rerank_calibrate" / "profiles" / "all-minilm-l6-v2.json")
WINDOW = 500  # rerank_calibrate's drift_window: each phase sends at least this many scores, replacing the window


def metric(server, pattern: str) -> float:
    with urllib.request.urlopen(f"http://{server.metrics_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    match = re.search(pattern + r" ([0-9.eE+-]+)$", text, re.MULTILINE)
    assert match, f"no {pattern} in the metrics"
    return float(match.group(1))


def psi(server) -> float:
    return metric(server, r'reranker_score_drift_psi\{[^}]*profile="' + re.escape(PROFILE.tag) + r'"[^}]*\}')


def raw_score_count(server) -> float:
    return metric(server, r"reranker_raw_score_count\{[^}]*\}")


def feed(server, pairs) -> None:
    TritonScorer(server.grpc_url, concurrency=4, progress=False).score(pairs)


# Alone: it asserts exact deltas of series every request to the shared server moves (the drift window of the last
# scores, raw-score counts); with the other worker's tests on the same server they would count that traffic too.
@pytest.mark.alone
def test_psi_stays_under_the_threshold_in_the_fitting_domain_and_crosses_it_in_another(server):
    manpages = read_pairs(ROOT / "data" / "manpages" / "pairs.jsonl")
    queries = list(dict.fromkeys(p.query for p in manpages))[:64]  # 8 candidates each: 504 pairs, in file order
    fitting_domain = [p for p in manpages if p.query in set(queries)]
    handwritten = read_pairs(ROOT / "data" / "calibration" / "pairs.jsonl")  # 240 pairs: three rounds fill the window
    assert len(fitting_domain) >= WINDOW and 3 * len(handwritten) >= WINDOW

    started = time.monotonic()
    before = raw_score_count(server)  # the histogram exists from load on, at 0
    feed(server, fitting_domain)
    in_domain = psi(server)
    for _ in range(3):
        feed(server, handwritten)
    other_domain = psi(server)
    print(f"drift: PSI {in_domain:.3f} on man pages, {other_domain:.3f} on the hand-written set "
          f"({len(fitting_domain) + 3 * len(handwritten)} pairs in {time.monotonic() - started:.0f} s)")
    assert in_domain < PSI_ALERT < other_domain
    deadline = time.monotonic() + 30  # the histogram is observed by a background thread of the step
    while raw_score_count(server) - before < len(fitting_domain) + 3 * len(handwritten) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert raw_score_count(server) - before == len(fitting_domain) + 3 * len(handwritten)

    # A direct call with 1000 made-up scores, unsealed and with a forged seal, would fill the window with one value
    # (PSI 8.28 -> 0.00 once, before the engine sealed its scores): both are calibrated, neither is counted. The
    # sealed pairs sent after them are counted once they are, and the direct ones would have been counted before.
    counted = raw_score_count(server)
    client = grpcclient.InferenceServerClient(server.grpc_url)
    for seal in (None, b"forged"):
        inputs = [grpcclient.InferInput("RAW_SCORES", [1, 1000], "FP32")]
        inputs[0].set_data_from_numpy(np.zeros((1, 1000), dtype=np.float32))
        if seal is not None:
            inputs.append(grpcclient.InferInput("SCORE_SEAL", [1, 1], "BYTES"))
            inputs[1].set_data_from_numpy(np.array([[seal]], dtype=np.object_))
        answer = client.infer("rerank_calibrate", inputs)
        assert answer.as_numpy("SCORES").shape == (1, 1000)
    client.close()
    feed(server, handwritten[:8])
    deadline = time.monotonic() + 30
    while raw_score_count(server) - counted < 8 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert raw_score_count(server) - counted == 8
    assert psi(server) > PSI_ALERT  # the alert the hand-written set raised is still raised

    # One sealed answer of the engine, asked for directly and sent to calibrate 25 times (it moved the PSI from 8.28
    # to 3.32 before seals counted once): its 2 scores count once
    replayed = sealed_engine_answer(server)
    counted = raw_score_count(server)
    for _ in range(25):
        client = grpcclient.InferenceServerClient(server.grpc_url)
        client.infer("rerank_calibrate", [as_input(name, array) for name, array in replayed.items()])
        client.close()
    feed(server, handwritten[:8])  # the sealed pairs after it: the histogram is observed in order
    deadline = time.monotonic() + 30
    while raw_score_count(server) - counted < 2 + 8 and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1.0)  # what more would be counted by now
    assert raw_score_count(server) - counted == 2 + 8


def as_input(name: str, array: np.ndarray) -> grpcclient.InferInput:
    datatype = "BYTES" if array.dtype == object else {np.float32: "FP32", np.int32: "INT32"}[array.dtype.type]
    tensor = grpcclient.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def sealed_engine_answer(server) -> dict[str, np.ndarray]:
    """RAW_SCORES and SCORE_SEAL of a request sent to rerank_preprocess, then rerank_engine, as the ensemble does."""
    from reranker_client import build_inputs

    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        pair = build_inputs(grpcclient, "capital of France", ["Paris.", "Bananas."])
        tokens = client.infer("rerank_preprocess", pair)
        names = ("TOKEN_IDS", "TOKEN_TYPE_IDS", "SEQUENCE_LENGTHS", "SEQUENCE_DOCUMENTS")
        answer = client.infer("rerank_engine", [as_input(name, tokens.as_numpy(name)) for name in names])
        return {name: answer.as_numpy(name) for name in ("RAW_SCORES", "SCORE_SEAL")}
    finally:
        client.close()

