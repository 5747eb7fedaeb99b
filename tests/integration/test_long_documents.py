"""Window mode: a long document whose relevant part lies past max_model_len is found when windowed,
missed when cut; both modes report it in TRUNCATED."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reranker_client import RerankClient
from tests.triton_server import RunningServer, copy_repository, start_server, stop_server

QUERY = "What is the capital of France?"
FILLER = "The committee reviewed the quarterly budget figures and scheduled another meeting. " * 40  # ~560 tokens
LONG_WITH_ANSWER_AT_THE_END = FILLER + "Paris is the capital and largest city of France."
OFF_TOPIC = "Bananas are a good source of potassium and are eaten all over the world."


@pytest.fixture(scope="module")
def window_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    root = tmp_path_factory.mktemp("window")
    repo = copy_repository(root / "model_repository", {("rerank_preprocess", "long_documents"): "window"})
    running = start_server(root / "server.log", model_repository=repo)
    yield running
    stop_server(running)


def test_window_mode_finds_the_answer_past_the_limit_that_truncation_misses(server, window_server):
    documents = [OFF_TOPIC, LONG_WITH_ANSWER_AT_THE_END]
    cut = RerankClient(server.grpc_url).rerank(QUERY, documents)
    windowed = RerankClient(window_server.grpc_url).rerank(QUERY, documents)
    assert cut.truncated == windowed.truncated == 1
    assert windowed.results[0].index == 1
    assert windowed.raw_scores[1] > cut.raw_scores[1] + 0.3  # the window holding the answer wins
    assert windowed.raw_scores[0] == pytest.approx(cut.raw_scores[0], abs=1e-5)  # short documents are unchanged
