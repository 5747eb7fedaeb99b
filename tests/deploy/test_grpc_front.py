"""The gRPC front that docker-compose.yml and the chart put before Triton's gRPC port (nginx with
deploy/helm/reranker/files/grpc-front.conf.template, tools/grpc_front.py), run for real in front of the session's
tritonserver: a request within the limits gets the server's own answer through it, and a larger one is refused with
RESOURCE_EXHAUSTED before Triton has it, where Triton's own port would read it whole into the preprocess step."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpc_client
from tritonclient.utils import InferenceServerException

from python_backends.model_repository import ENSEMBLE, PREPROCESS
from reranker_client import RerankClient
from tests.support.triton_server import model_stats
from tools.grpc_front import running_front

QUERY = "What is the capital of France?"
DOCUMENTS = ["Bananas are a good source of potassium.", "Paris is the capital and largest city of France."]
DOCUMENT_BYTES = 65536


@pytest.fixture(scope="module")
def limit(server) -> int:
    """The largest request the server's limits admit, the number the chart and compose give the front."""
    client = RerankClient(server.grpc_url, protocol="grpc")
    try:
        return client.limits().http_max_input_size
    finally:
        client.close()


@pytest.fixture(scope="module")
def front(server, limit, tmp_path_factory) -> str:
    with running_front(server.grpc_url, limit, folder=tmp_path_factory.mktemp("grpc-front")) as running:
        yield running.address


def rerank(url: str) -> list[tuple[int, float]]:
    client = RerankClient(url, protocol="grpc")
    try:
        return [(r.index, r.relevance_score) for r in client.rerank(QUERY, DOCUMENTS).results]
    finally:
        client.close()


def test_a_request_within_the_limits_gets_the_servers_own_answer(server, front):
    through = rerank(front)
    assert [index for index, _ in through] == [1, 0]
    assert through == rerank(server.grpc_url)


@pytest.mark.alone  # it reads the shared server's failure counts, which the other worker's tests move
def test_a_request_larger_than_the_limits_admit_is_refused_before_triton_has_it(server, front, limit):
    documents = limit // DOCUMENT_BYTES + 1  # a few documents more than fit: the front counts bytes, not documents
    query = grpc_client.InferInput("QUERY", [1, 1], "BYTES")
    query.set_data_from_numpy(np.array([[QUERY.encode()]], dtype=object))
    texts = grpc_client.InferInput("DOCUMENTS", [1, documents], "BYTES")
    texts.set_data_from_numpy(np.full((1, documents), b"x" * DOCUMENT_BYTES, dtype=object))
    before = {model: model_stats(server, model) for model in (ENSEMBLE, PREPROCESS)}
    client = grpc_client.InferenceServerClient(front)
    try:
        with pytest.raises(InferenceServerException) as refused:
            client.infer(ENSEMBLE, [query, texts])
    finally:
        client.close()
    assert refused.value.status() == "StatusCode.RESOURCE_EXHAUSTED"
    assert refused.value.message() == (
        f"the request is larger than {limit} bytes, the largest the server's request limits admit")
    for model, stats in before.items():  # no step saw it, not even to refuse it
        after = model_stats(server, model)
        assert after["inference_stats"]["fail"] == stats["inference_stats"]["fail"], model
    assert [index for index, _ in rerank(front)] == [1, 0]  # and the front goes on serving
