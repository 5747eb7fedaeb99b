"""One APIRouter per API family: `cohere` (/v1/rerank, /v2/rerank), `vllm` (/rerank: vLLM and Jina, or TEI's body,
told apart by its `texts` field, answered by `tei`), `health`."""

from fastapi import Request

from ..service import Reranker


def reranker(request: Request) -> Reranker:
    """The app's `Reranker` (made at start-up, gateway.app)."""
    return request.app.state.reranker
