"""Window mode: a long document whose relevant part lies past max_model_len is found when windowed,
missed when cut; both modes report it in TRUNCATED."""

from __future__ import annotations

from pathlib import Path

import pytest

from reranker_client import RerankClient
from tests.support.triton_server import WINDOW_ENSEMBLE, stub_pids

QUERY = "What is the capital of France?"
FILLER = "The committee reviewed the quarterly budget figures and scheduled another meeting. " * 40  # ~560 tokens
LONG_WITH_ANSWER_AT_THE_END = FILLER + "Paris is the capital and largest city of France."
OFF_TOPIC = "Bananas are a good source of potassium and are eaten all over the world."


def test_window_mode_finds_the_answer_past_the_limit_that_truncation_misses(server):
    documents = [OFF_TOPIC, LONG_WITH_ANSWER_AT_THE_END]
    cut = RerankClient(server.grpc_url).rerank(QUERY, documents)
    windowed = RerankClient(server.grpc_url, model_name=WINDOW_ENSEMBLE).rerank(QUERY, documents)
    assert cut.truncated == windowed.truncated == 1
    assert windowed.results[0].index == 1
    assert windowed.raw_scores[1] > cut.raw_scores[1] + 0.3  # the window holding the answer wins
    assert windowed.raw_scores[0] == pytest.approx(cut.raw_scores[0], abs=1e-5)  # short documents are unchanged


# --- bounded work per request, MAX_TOKENS_PER_DOC ---------------------------------------------------------------


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


# Alone: it bounds the preprocess stub's memory, which the other worker's requests to the shared server would grow.
@pytest.mark.alone
def test_large_request_is_cut_before_tokenizing_and_preprocess_memory_returns(server):
    """128 documents of 64 KB (an 8 MB request): answered with every document counted as cut, and the
    preprocess stub's RSS comes back to within 100 MB of where it was (before: 256 x 64 KB left 2.4 GB behind)."""
    (pid,) = stub_pids(server, "rerank_preprocess")
    client = RerankClient(server.grpc_url, timeout_s=300)
    client.rerank(QUERY, [OFF_TOPIC])
    before = _rss_mb(pid)
    documents = [(FILLER * 2)[:65536 - 60] + f" Paris is the capital of France ({i})." for i in range(128)]
    response = client.rerank(QUERY, documents + [OFF_TOPIC])
    after = _rss_mb(pid)
    print(f"preprocess RSS {before:.0f} MB -> {after:.0f} MB after 128 x 64 KB")
    assert response.truncated == 128
    assert len(response.results) == 129
    assert after - before < 100


def test_max_tokens_per_doc_cuts_documents_only_and_counts_them(server):
    client = RerankClient(server.grpc_url)
    documents = ["Paris is the capital and largest city of France.", FILLER[:400] + " Paris is the capital of France."]
    whole = client.rerank(QUERY, documents)
    capped = client.rerank(QUERY, documents, max_tokens_per_doc=12)
    assert whole.truncated == 0 and capped.truncated == 1  # the first document has 10 tokens: not cut
    assert capped.raw_scores[0] == pytest.approx(whole.raw_scores[0], abs=1e-5)  # the query was not cut
    assert capped.raw_scores[1] != pytest.approx(whole.raw_scores[1], abs=1e-3)
