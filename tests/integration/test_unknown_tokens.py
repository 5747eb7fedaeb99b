"""Documents of text the tokenizer's vocabulary lacks are scored, over HTTP and gRPC, on the real server."""

from __future__ import annotations

from reranker_client import RerankClient

# each maps to all-MiniLM-L6-v2's unknown token only
UNKNOWN_ONLY = ["🦜🦜", "a3f9" * 26, "x" * 101]


def test_documents_of_unknown_tokens_are_scored_like_any_other(server, protocol):
    client = RerankClient(server.url(protocol), protocol=protocol, max_retries=0)
    try:
        response = client.rerank("What is the capital of France?", ["Paris is the capital of France.", *UNKNOWN_ONLY])
    finally:
        client.close()
    assert sorted(r.index for r in response.results) == [0, 1, 2, 3]
    assert response.results[0].index == 0  # the one relevant document first
    assert len(response.raw_scores) == 4
    # the same unknown token: one score for all three
    assert len({round(float(s), 5) for s in response.raw_scores[1:]}) == 1
