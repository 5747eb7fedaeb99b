"""Python client of the `reranker` Triton ensemble (HTTP or gRPC, via tritonclient)."""

from .client import RerankClient, RerankResponse, RerankResult, build_inputs

__all__ = ["RerankClient", "RerankResponse", "RerankResult", "build_inputs"]
