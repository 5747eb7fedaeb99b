"""Unit level, no server: retries (a tritonclient stub that fails, then answers), splitting and merging."""

from __future__ import annotations

import asyncio
import json
import random

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from python_backends.contract import RequestLimits, limit_models
from python_backends.model_repository import ENGINE, ENSEMBLE, PREPROCESS, REPOSITORY, config_dict, config_path
from reranker_client import AsyncRerankClient, RerankClient, RetryPolicy, is_retryable
from reranker_client.merging import merge, rebase_error
from reranker_client.planning import plan_rerank, split_sizes
from reranker_client.wire import ParsedResponse

UNAVAILABLE_GRPC = InferenceServerException(msg="Server is stopping", status="StatusCode.UNAVAILABLE")
QUEUE_FULL_HTTP = InferenceServerException(
    msg="in ensemble 'reranker', Exceeds maximum queue size", status="503"
)
INVALID_GRPC = InferenceServerException(
    msg="in ensemble 'reranker', QUERY is empty", status="StatusCode.INVALID_ARGUMENT"
)
INVALID_HTTP = InferenceServerException(msg="QUERY is empty", status="400")


class FakeResult:
    """What tritonclient's infer returns, for two documents where the second is the better."""

    def __init__(self, n: int = 2) -> None:
        raw = np.linspace(-0.5, 0.5, n, dtype=np.float32)
        self.arrays = {
            "SCORES": (1 / (1 + np.exp(-raw))).astype(np.float32)[None],
            "RAW_SCORES": raw[None],
            "RANKING": np.argsort(-raw, kind="stable").astype(np.int32)[None],
            "TRUNCATED": np.array([[0]], dtype=np.int32),
            "CALIBRATION": np.array([[b"stub@1"]], dtype=np.object_),
        }

    def as_numpy(self, name: str) -> np.ndarray:
        return self.arrays[name]


# The ensemble's, the preprocess step's and the engine's configurations as Triton's HTTP endpoint serves them (gRPC's
# as_json wraps each in "config"): the committed default ones
CONFIGS = {name: config_dict(config_path(REPOSITORY, name)) for name in (ENSEMBLE, PREPROCESS, ENGINE)}


class StubTriton:
    """Raises the given errors in turn, then answers; counts calls. `infer` is sync or async to match."""

    def __init__(self, errors: list[BaseException], asynchronous: bool) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.asynchronous = asynchronous
        self.requested: list[list[str]] = []
        self.config_calls: list[tuple[str, bool]] = []

    def _answer(self, outputs) -> FakeResult:
        self.calls += 1
        self.requested.append([o.name() for o in outputs])
        if self.errors:
            raise self.errors.pop(0)
        return FakeResult()

    def _maybe_async(self, value):
        if not self.asynchronous:
            return value

        async def answer():
            return value

        return answer()

    def infer(self, model_name, inputs, outputs=None, **kwargs):
        if not self.asynchronous:
            return self._answer(outputs)

        async def answer():
            return self._answer(outputs)

        return answer()

    def get_model_config(self, model_name, as_json=False):
        self.config_calls.append((model_name, as_json))
        return self._maybe_async({"config": CONFIGS[model_name]} if as_json else CONFIGS[model_name])

    def close(self):
        return asyncio.sleep(0) if self.asynchronous else None


def rerank_with_stub(kind: str, protocol: str, errors: list[BaseException], **kwargs):
    """(response or raised error, stub, waits slept) of one rerank call through a stubbed tritonclient."""
    waits: list[float] = []
    if kind == "sync":
        client = RerankClient("127.0.0.1:1", protocol, **kwargs)
        stub = client.client = StubTriton(errors, asynchronous=False)
        client._sleep = waits.append
        try:
            return client.rerank("q", ["a", "b"]), stub, waits
        except Exception as error:
            return error, stub, waits

    async def run():
        client = AsyncRerankClient("127.0.0.1:1", protocol, **kwargs)
        await client.client.close()
        stub = client.client = StubTriton(errors, asynchronous=True)

        async def sleep(delay: float) -> None:
            waits.append(delay)

        client._sleep = sleep
        try:
            return await client.rerank("q", ["a", "b"]), stub, waits
        except Exception as error:
            return error, stub, waits

    return asyncio.run(run())


@pytest.fixture(params=("sync", "async"))
def kind(request):
    return request.param


@pytest.mark.parametrize(
    "protocol,error", [("grpc", UNAVAILABLE_GRPC), ("http", QUEUE_FULL_HTTP), ("http", ConnectionRefusedError())]
)
def test_unavailable_twice_then_an_answer(kind, protocol, error):
    response, stub, waits = rerank_with_stub(kind, protocol, [error, error], backoff_s=0.1)
    assert stub.calls == 3
    assert [r.index for r in response.results] == [1, 0]
    assert len(waits) == 2
    assert 0.05 <= waits[0] <= 0.1 and 0.1 <= waits[1] <= 0.2  # exponential backoff, jittered down to half
    assert stub.requested[0] == ["SCORES", "RAW_SCORES", "RANKING", "TRUNCATED", "CALIBRATION"]
    # the limits, read once: the ensemble's config names the two steps that hold them
    assert stub.config_calls == [(name, protocol == "grpc") for name in (ENSEMBLE, PREPROCESS, ENGINE)]


def test_a_split_call_does_not_ask_for_the_servers_ranking(kind):
    response, stub, _ = rerank_with_stub(kind, "grpc", [], max_documents_per_request=1)
    assert stub.requested == [["SCORES", "RAW_SCORES", "TRUNCATED", "CALIBRATION"]] * 2
    assert response.requests == 2


def test_request_limits_from_the_model_configurations():
    limits = RequestLimits(max_documents=1024, max_document_bytes=65536, max_query_bytes=4096, max_model_len=256)
    assert limit_models(CONFIGS[ENSEMBLE]) == limit_models({"config": CONFIGS[ENSEMBLE]}) == (PREPROCESS, ENGINE)
    assert RequestLimits.from_model_configs(CONFIGS[PREPROCESS], CONFIGS[ENGINE]) == limits
    assert RequestLimits.from_model_configs({"config": CONFIGS[PREPROCESS]}, {"config": CONFIGS[ENGINE]}) == limits
    broken = json.loads(json.dumps(CONFIGS[ENGINE]))
    broken["parameters"]["engine_args"]["string_value"] = '{"model": "m"}'
    with pytest.raises(ValueError, match="model 'rerank_engine': configuration parameter 'max_model_len' is None"):
        RequestLimits.from_model_configs(CONFIGS[PREPROCESS], broken)


@pytest.mark.parametrize("protocol,error", [("grpc", INVALID_GRPC), ("http", INVALID_HTTP)])
def test_invalid_argument_is_never_retried(kind, protocol, error):
    raised, stub, waits = rerank_with_stub(kind, protocol, [error, error])
    assert raised is error
    assert stub.calls == 1 and waits == []


def test_retries_are_bounded_and_the_last_error_is_raised(kind):
    errors = [InferenceServerException(msg=f"attempt {i}", status="StatusCode.UNAVAILABLE") for i in range(10)]
    raised, stub, waits = rerank_with_stub(kind, "grpc", errors, max_retries=2)
    assert stub.calls == 3 and len(waits) == 2
    assert raised.message() == "attempt 2"


def test_no_retries_when_max_retries_is_zero(kind):
    raised, stub, waits = rerank_with_stub(kind, "grpc", [UNAVAILABLE_GRPC], max_retries=0)
    assert raised is UNAVAILABLE_GRPC and stub.calls == 1 and waits == []


def test_which_errors_are_retried():
    assert is_retryable(UNAVAILABLE_GRPC)
    assert is_retryable(InferenceServerException(msg="x", status="503"))
    queue_full = InferenceServerException(msg="Exceeds maximum queue size", status="StatusCode.RESOURCE_EXHAUSTED")
    assert is_retryable(queue_full)
    assert is_retryable(ConnectionResetError())
    assert not is_retryable(INVALID_GRPC)
    assert not is_retryable(INVALID_HTTP)
    assert not is_retryable(InferenceServerException(msg="Stub process is not healthy", status="StatusCode.INTERNAL"))
    assert not is_retryable(ValueError("bad"))


def test_backoff_doubles_up_to_the_cap():
    policy = RetryPolicy(max_retries=6, backoff_s=0.5, max_backoff_s=2.0, jitter=0.0)
    assert list(policy.delays(random.Random(0))) == [0.5, 1.0, 2.0, 2.0, 2.0, 2.0]
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)


def test_split_sizes_are_balanced():
    assert split_sizes(10, 3) == [3, 3, 2, 2]
    assert split_sizes(1100, 256) == [220] * 5
    assert split_sizes(256, 256) == [256]
    assert split_sizes(0, 256) == [0]  # one request: the server answers "DOCUMENTS is empty"


def test_plan_sends_top_n_only_when_not_split():
    single = plan_rerank("q", ["a", "b"], 1024, top_n=1)
    assert not single.split and single.chunks[0].top_n == 1
    split = plan_rerank("q", list("abcdefg"), 3, top_n=2)
    assert split.split and [c.offset for c in split.chunks] == [0, 3, 5] and {c.top_n for c in split.chunks} == {None}
    with pytest.raises(ValueError, match="TOP_N must be between 1 and the number of documents"):
        plan_rerank("q", ["a", "b"], 1024, top_n=2**40)  # would overflow the INT32 tensor
    with pytest.raises(TypeError):
        plan_rerank("q", "a single string", 1024)


def _parsed(raw: list[float], truncated: int = 0, tag: str = "p@1") -> ParsedResponse:
    raw_array = np.array(raw, dtype=np.float32)
    return ParsedResponse(raw_array / 10 + 0.5, raw_array, None, truncated, tag)


def test_merge_ranks_over_raw_scores_with_ties_in_input_order():
    plan = plan_rerank("q", list("abcdefg"), 3, top_n=4)
    merged = merge(plan, [_parsed([0.1, 0.9, 0.3], 1), _parsed([0.9, -1.0]), _parsed([0.5, 0.2], 2)], True)
    assert [r.index for r in merged.results] == [1, 3, 5, 2]  # 0.9 (index 1) before the tied 0.9 (index 3)
    assert [r.document for r in merged.results] == ["b", "d", "f", "c"]
    assert merged.truncated == 3 and merged.calibration == "p@1" and merged.requests == 3
    np.testing.assert_allclose(merged.raw_scores, [0.1, 0.9, 0.3, 0.9, -1.0, 0.5, 0.2], rtol=1e-6)


def test_merge_refuses_mixed_calibration_profiles():
    plan = plan_rerank("q", list("abcd"), 2)
    with pytest.raises(RuntimeError, match="different profiles"):
        merge(plan, [_parsed([0.1, 0.2], tag="p@1"), _parsed([0.3, 0.4], tag="p@2")], False)


def test_rebase_error_moves_document_indices():
    error = InferenceServerException(msg="in ensemble 'reranker', [invalid DOCUMENTS[1]] DOCUMENTS[1] is empty: no text",
                                     status="400")
    rebased = rebase_error(error, 6)
    assert rebased.message() == "[invalid DOCUMENTS[7]] DOCUMENTS[7] is empty: no text"
    assert rebased.status() == "400"
    untouched = InferenceServerException(msg="[invalid QUERY] QUERY is empty", status="400")
    assert rebase_error(untouched, 6) is untouched


def test_optional_inputs_are_sent_only_when_given():
    import tritonclient.grpc as grpcclient

    from reranker_client import build_inputs

    plain = build_inputs(grpcclient, "q", ["a", "b"])
    assert [(t.name(), t.datatype(), t.shape()) for t in plain] == [("QUERY", "BYTES", [1, 1]), ("DOCUMENTS", "BYTES", [1, 2])]
    full = build_inputs(grpcclient, "q", ["a"], top_n=1, instruction="i", max_tokens_per_doc=7)
    assert [(t.name(), t.datatype(), t.shape()) for t in full][2:] == [
        ("INSTRUCTION", "BYTES", [1, 1]), ("TOP_N", "INT32", [1, 1]), ("MAX_TOKENS_PER_DOC", "INT32", [1, 1])
    ]
    with pytest.raises(ValueError, match="MAX_TOKENS_PER_DOC must fit INT32, got 4294967296"):
        build_inputs(grpcclient, "q", ["a"], max_tokens_per_doc=2**32)
