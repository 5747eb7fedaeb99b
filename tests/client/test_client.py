"""RerankClient and AsyncRerankClient against the real tritonserver, over HTTP and gRPC, sync and asyncio."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from reranker_client import AsyncRerankClient, RerankClient, RerankResponse

QUERY = "What is the capital of France?"
RELEVANT = "Paris is the capital and largest city of France."
IRRELEVANT = "Bananas are a good source of potassium."
# Ten documents whose scores are far apart: the ranking of one request and of a split call must match exactly.
TEN = [
    "The stock market fell sharply on Tuesday.",
    "Paris is the capital and largest city of France.",
    "Bananas are a good source of potassium.",
    "France is a country in Western Europe.",
    "Sourdough bread needs a starter, flour and water.",
    "The Eiffel Tower stands in Paris.",
    "Berlin is the capital of Germany.",
    "Signs of dehydration include thirst and dizziness.",
    "Lyon is a large city in France known for its food.",
    "The capital city hosts the national government.",
]


class Caller:
    """One face for both clients: `call(...)` runs RerankClient.rerank or AsyncRerankClient.rerank."""

    def __init__(self, kind: str, url: str, protocol: str, **kwargs: object) -> None:
        self.kind, self.url, self.protocol, self.kwargs = kind, url, protocol, kwargs

    def rerank(self, *args: object, **kwargs: object) -> RerankResponse:
        if self.kind == "sync":
            with RerankClient(self.url, self.protocol, **self.kwargs) as client:
                return client.rerank(*args, **kwargs)

        async def run() -> RerankResponse:
            async with AsyncRerankClient(self.url, self.protocol, **self.kwargs) as client:
                return await client.rerank(*args, **kwargs)

        return asyncio.run(run())


@pytest.fixture(params=("sync", "async"))
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


def test_relevant_document_ranks_first(server, kind, protocol):
    response = Caller(kind, server.url(protocol), protocol).rerank(QUERY, [IRRELEVANT, RELEVANT], return_documents=True)
    assert [r.index for r in response.results] == [1, 0]
    best = response.results[0]
    assert best.document == RELEVANT
    assert best.relevance_score == pytest.approx(float(response.scores[1]))
    assert best.raw_score == pytest.approx(float(response.raw_scores[1]))
    assert 0.0 <= response.results[1].relevance_score < best.relevance_score <= 1.0
    name, _, version = response.calibration.partition("@")
    assert name and version, response.calibration  # "<profile name>@<version>"
    assert response.requests == 1


def test_documents_are_left_out_unless_asked_for(server, kind, protocol):
    response = Caller(kind, server.url(protocol), protocol).rerank(QUERY, [IRRELEVANT, RELEVANT], top_n=1)
    assert [(r.index, r.document) for r in response.results] == [(1, None)]


@pytest.mark.parametrize("top_n", [None, 4])
def test_a_split_call_equals_one_request(server, kind, protocol, top_n):
    url = server.url(protocol)
    single = Caller(kind, url, protocol).rerank(QUERY, TEN, top_n=top_n, return_documents=True)
    split = Caller(kind, url, protocol, max_documents_per_request=3).rerank(
        QUERY, TEN, top_n=top_n, return_documents=True
    )
    assert single.requests == 1 and split.requests == 4  # 3 + 3 + 2 + 2
    assert [r.index for r in split.results] == [r.index for r in single.results]
    assert len(split.results) == (top_n or len(TEN))
    np.testing.assert_allclose(split.raw_scores, single.raw_scores, atol=1e-5)
    np.testing.assert_allclose(split.scores, single.scores, atol=1e-5)
    np.testing.assert_allclose(
        [r.relevance_score for r in split.results], [r.relevance_score for r in single.results], atol=1e-5
    )
    assert [r.document for r in split.results] == [TEN[r.index] for r in single.results]
    assert split.truncated == single.truncated
    assert split.calibration == single.calibration
    assert single.results[0].index == 1  # the Paris sentence


def test_a_split_call_reports_the_callers_document_index(server, kind, protocol):
    documents = list(TEN)
    documents[7] = ""  # in the third request (offset 6) it is DOCUMENTS[1]
    with pytest.raises(InferenceServerException) as raised:
        Caller(kind, server.url(protocol), protocol, max_documents_per_request=3).rerank(QUERY, documents)
    assert "DOCUMENTS[7] is empty" in raised.value.message()
    assert str(raised.value.status()) in ("400", "StatusCode.INVALID_ARGUMENT")


def test_a_split_call_checks_top_n_itself(server, kind):
    with pytest.raises(ValueError, match=r"TOP_N must be between 1 and the number of documents \(10\), got 11"):
        Caller(kind, server.grpc_url, "grpc", max_documents_per_request=3).rerank(QUERY, TEN, top_n=11)


def test_bad_input_is_the_servers_message_and_not_retried(server, kind, protocol):
    with pytest.raises(InferenceServerException) as raised:
        Caller(kind, server.url(protocol), protocol).rerank("   ", [RELEVANT])
    assert "QUERY is empty" in raised.value.message()


def test_more_documents_than_the_server_takes_in_one_request(server):
    documents = [f"d{i}" for i in range(1025)]
    documents[777] = RELEVANT
    with RerankClient(server.grpc_url, "grpc") as client:
        response = client.rerank(QUERY, documents, top_n=3)
        assert client.limits().max_documents == 1024  # rerank_preprocess/config.pbtxt, read from the server
    assert response.requests == 2  # 513 + 512; one request of more than 1024 the server refuses
    assert response.results[0].index == 777
    assert response.scores.shape == (1025,)


def test_the_client_learns_the_servers_limits(server, protocol):
    from python_backends.contract import RequestLimits

    with RerankClient(server.url(protocol), protocol) as client:
        assert client.limits() == RequestLimits(
            max_documents=1024, max_document_bytes=65536, max_query_bytes=4096, max_model_len=256
        )


def test_concurrent_async_calls_share_one_client(server, protocol):
    async def run() -> list[int]:
        async with AsyncRerankClient(server.url(protocol), protocol, max_documents_per_request=2) as client:
            responses = await asyncio.gather(
                *(client.rerank(QUERY, [IRRELEVANT, "Berlin is in Germany.", RELEVANT], top_n=1) for _ in range(8))
            )
        return [r.results[0].index for r in responses]

    assert asyncio.run(run()) == [2] * 8


def test_readiness(server, protocol):
    with RerankClient(server.url(protocol), protocol) as client:
        assert client.is_ready()

    async def missing_model() -> bool:
        async with AsyncRerankClient(server.url(protocol), protocol, model_name="no_such_model") as client:
            return await client.is_ready()

    assert asyncio.run(missing_model()) is False
