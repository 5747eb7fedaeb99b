"""REST gateway in front of the Triton `reranker` ensemble: Cohere `POST /v1/rerank` and `/v2/rerank`, vLLM's and
Jina's `/rerank` and `/v1/rerank`, and TEI's `/rerank` body, each in its own request and response shapes.

`python -m gateway` serves it with uvicorn; settings come from the environment (`gateway.settings`).
"""

from .app import create_app
from .settings import Settings

__all__ = ["Settings", "create_app"]
