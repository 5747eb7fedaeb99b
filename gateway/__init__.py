"""Cohere/Jina-style REST gateway (`POST /v1/rerank`) in front of the Triton `reranker` ensemble.

`python -m gateway` serves it with uvicorn; settings come from the environment (`gateway.settings`).
"""

from .app import create_app
from .settings import Settings

__all__ = ["Settings", "create_app"]
