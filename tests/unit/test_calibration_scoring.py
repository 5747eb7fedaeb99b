"""Data files and scorers: the JSONL checks, precomputed scores, and the gRPC requests to the ensemble."""

import json
import threading

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import deserialize_bytes_tensor

from reranker_calibrate.pair_scoring import (
    DataError,
    LabelledPair,
    PrecomputedScorer,
    ScoringError,
    TritonScorer,
    group_by_query,
    read_pairs,
    write_scored,
)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


PAIRS = [
    LabelledPair("q1", "d1a", 1),
    LabelledPair("q2", "d2a", 0),
    LabelledPair("q1", "d1b", 0),
    LabelledPair("q3", "d3a", 1),
    LabelledPair("q2", "d2b", 1),
]


class FakeResult:
    def __init__(self, outputs):
        self.outputs = outputs

    def as_numpy(self, name):
        return self.outputs[name]


class FakeEnsemble:
    """Stands in for InferenceServerClient: decodes the request like Triton would and scores
    each document by its length, so the expected raw score of every pair is known."""

    def __init__(self, fail_on=None, short_answer=False):
        self.requests = []
        self.lock = threading.Lock()
        self.fail_on = fail_on
        self.short_answer = short_answer

    def infer(self, model_name, inputs, outputs=None, client_timeout=None):
        decoded = {}
        for inp in inputs:
            assert inp.datatype() == "BYTES"
            values = deserialize_bytes_tensor(inp._get_content()).reshape(inp.shape())
            decoded[inp.name()] = (inp.shape(), [v.decode("utf-8") for v in values.ravel()])
        with self.lock:
            self.requests.append((model_name, decoded, [o.name() for o in outputs], client_timeout))
        query = decoded["QUERY"][1][0]
        if query == self.fail_on:
            raise grpcclient.InferenceServerException("model 'reranker' is not ready")
        docs = decoded["DOCUMENTS"][1]
        raw = np.array([[float(len(d)) + (0.5 if query == "q2" else 0.0) for d in docs]], dtype=np.float32)
        if self.short_answer:
            raw = raw[:, :1]
        return FakeResult({"RAW_SCORES": raw, "TRUNCATED": np.array([[1 if query == "q1" else 0]], dtype=np.int32)})


def test_group_by_query_keeps_first_appearance_order():
    assert group_by_query(PAIRS) == [("q1", [0, 2]), ("q2", [1, 4]), ("q3", [3])]


def test_triton_scorer_sends_one_request_per_query_and_restores_pair_order():
    fake = FakeEnsemble()
    result = TritonScorer(model_name="reranker", concurrency=3, timeout_s=7.0, progress=False, client=fake).score(PAIRS)
    np.testing.assert_array_equal(result.raw_scores, [3.0, 3.5, 3.0, 3.0, 3.5])
    assert result.truncated == 1
    assert len(fake.requests) == 3
    by_query = {r[1]["QUERY"][1][0]: r for r in fake.requests}
    model, decoded, outputs, timeout = by_query["q1"]
    assert model == "reranker" and timeout == 7.0
    assert decoded["QUERY"] == ([1, 1], ["q1"])
    assert decoded["DOCUMENTS"] == ([1, 2], ["d1a", "d1b"])
    assert "INSTRUCTION" not in decoded
    assert outputs == ["RAW_SCORES", "TRUNCATED", "SCORES"]  # SCORES: see the Triton 2.51 note in TritonScorer


def test_triton_scorer_sends_the_instruction_when_given():
    fake = FakeEnsemble()
    TritonScorer(instruction="Find the answer", progress=False, client=fake).score(PAIRS[:1])
    assert fake.requests[0][1]["INSTRUCTION"] == ([1, 1], ["Find the answer"])


def test_triton_scorer_reports_server_errors():
    with pytest.raises(ScoringError, match="reranker: .*not ready"):
        TritonScorer(progress=False, client=FakeEnsemble(fail_on="q2")).score(PAIRS)


def test_triton_scorer_checks_the_answer_size():
    with pytest.raises(ScoringError, match="returned 1 RAW_SCORES for 2 documents"):
        TritonScorer(progress=False, client=FakeEnsemble(short_answer=True)).score(PAIRS[:3])


def test_read_pairs_and_write_scored_round_trip(tmp_path):
    data = _jsonl(
        tmp_path / "d.jsonl",
        [
            {"query": "q", "document": "d1", "label": 1, "old_score": 0.9, "id": "ignored"},
            {"query": "q", "document": "d2", "label": 0, "old_score": 0.2},
        ],
    )
    pairs = read_pairs(data)
    assert pairs == [LabelledPair("q", "d1", 1, 0.9), LabelledPair("q", "d2", 0, 0.2)]
    scored = tmp_path / "scored.jsonl"
    write_scored(scored, pairs, np.array([2.5, -1.0]))
    assert read_pairs(scored) == pairs
    np.testing.assert_array_equal(PrecomputedScorer(scored).score(pairs).raw_scores, [2.5, -1.0])


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"query": "q", "document": "d", "label": 2}], ":1: 'label' must be 0 or 1"),
        ([{"query": "q", "document": "d", "label": True}], ":1: 'label' must be 0 or 1"),
        ([{"query": "", "document": "d", "label": 1}], ":1: 'query' must be a non-empty string"),
        ([{"query": "q", "label": 1}], ":1: 'document' must be a non-empty string"),
        ([{"query": "q", "document": "d", "label": 1, "old_score": "high"}], ":1: 'old_score' must be a finite number"),
        (
            [
                {"query": "q", "document": "d", "label": 1, "old_score": 0.3},
                {"query": "q", "document": "e", "label": 0},
            ],
            ": 'old_score' is on 1 of 2 lines; put it on every line or on none",
        ),
        ([], ": no pairs"),
    ],
)
def test_read_pairs_errors(tmp_path, rows, message):
    path = _jsonl(tmp_path / "d.jsonl", rows)
    with pytest.raises(DataError) as e:
        read_pairs(path)
    assert str(e.value) == f"{path}{message}"


def test_read_pairs_bad_json_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"query": "q", "document": "d", "label": 1}\n\n{oops\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"d\.jsonl:3: not valid JSON"):
        read_pairs(path)


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"raw_score": 1.0}], "1 scores for 2 pairs"),
        ([{"raw_score": 1.0}, {"score": 2.0}], ":2: missing 'raw_score'"),
        ([{"raw_score": 1.0}, {"raw_score": float("nan")}], ":2: 'raw_score' must be a finite number"),
        (
            [{"raw_score": 1.0, "query": "q"}, {"raw_score": 2.0, "document": "other"}],
            ":2: 'document' differs from the data file's pair 2",
        ),
    ],
)
def test_precomputed_scorer_errors(tmp_path, rows, message):
    path = _jsonl(tmp_path / "raw.jsonl", rows)
    with pytest.raises(DataError, match=message):
        PrecomputedScorer(path).score([LabelledPair("q", "d1", 1), LabelledPair("q", "d2", 0)])
