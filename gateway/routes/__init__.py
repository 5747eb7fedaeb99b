"""One APIRouter per API family: `cohere` (/v1/rerank, /v2/rerank), `vllm` (/rerank: vLLM and Jina, or TEI's body,
told apart by its `texts` field, answered by `tei`), `score` (vLLM's /score and /v1/score), `health` (/health,
/health/live), `metrics` (/metrics); `compatible` holds the answer shape Cohere, vLLM and Jina share. A new API is a
module here with its router, listed in gateway.app."""

from fastapi import Request

from ..service import Reranker


def reranker(request: Request) -> Reranker:
    """The app's `Reranker` (made at start-up, gateway.app)."""
    return request.app.state.reranker
