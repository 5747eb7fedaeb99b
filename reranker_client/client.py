"""A small, explicit client for the tensor contract in docs/CONTRACT.md.

`RerankClient("localhost:8001", protocol="grpc").rerank(query, documents, top_n=10)` returns results
best first with index, relevance_score (calibrated), raw_score and, on request, the document.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

MODEL_NAME = "reranker"
OUTPUTS = ("SCORES", "RAW_SCORES", "RANKING", "TRUNCATED", "CALIBRATION")


@dataclass(frozen=True)
class RerankResult:
    index: int
    relevance_score: float
    raw_score: float
    document: str | None = None


@dataclass(frozen=True)
class RerankResponse:
    results: list[RerankResult]
    scores: np.ndarray  # calibrated, input order
    raw_scores: np.ndarray  # engine scores, input order
    truncated: int
    calibration: str


def _protocol_module(protocol: str) -> ModuleType:
    if protocol == "grpc":
        import tritonclient.grpc as module
    elif protocol == "http":
        import tritonclient.http as module
    else:
        raise ValueError(f"protocol must be 'grpc' or 'http', got {protocol!r}")
    return module


def _bytes_row(values: Sequence[str | bytes]) -> np.ndarray:
    return np.array([[v if isinstance(v, bytes) else v.encode("utf-8") for v in values]], dtype=np.object_)


def build_inputs(
    module: ModuleType,
    query: str | bytes,
    documents: Sequence[str | bytes],
    top_n: int | None = None,
    instruction: str | None = None,
) -> list[Any]:
    """The InferInput list of one request for `tritonclient.grpc` or `tritonclient.http`."""
    tensors: list[tuple[str, np.ndarray, str]] = [
        ("QUERY", _bytes_row([query]), "BYTES"),
        ("DOCUMENTS", _bytes_row(documents), "BYTES"),
    ]
    if instruction is not None:
        tensors.append(("INSTRUCTION", _bytes_row([instruction]), "BYTES"))
    if top_n is not None:
        tensors.append(("TOP_N", np.array([[top_n]], dtype=np.int32), "INT32"))
    inputs = []
    for name, array, dtype in tensors:
        tensor = module.InferInput(name, list(array.shape), dtype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def parse_response(result: Any, documents: Sequence[str | bytes] | None = None) -> RerankResponse:
    scores = result.as_numpy("SCORES")[0]
    raw = result.as_numpy("RAW_SCORES")[0]
    ranking = result.as_numpy("RANKING")[0]
    results = [
        RerankResult(
            index=int(i),
            relevance_score=float(scores[i]),
            raw_score=float(raw[i]),
            document=None if documents is None else _as_text(documents[int(i)]),
        )
        for i in ranking
    ]
    calibration = result.as_numpy("CALIBRATION")[0, 0]
    return RerankResponse(
        results=results,
        scores=scores,
        raw_scores=raw,
        truncated=int(result.as_numpy("TRUNCATED")[0, 0]),
        calibration=calibration.decode() if isinstance(calibration, bytes) else str(calibration),
    )


def _as_text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


class RerankClient:
    """Synchronous client; one request per call, one query with all its documents."""

    def __init__(self, url: str, protocol: str = "grpc", model_name: str = MODEL_NAME) -> None:
        self.module = _protocol_module(protocol)
        self.client = self.module.InferenceServerClient(url)
        self.model_name = model_name

    def rerank(
        self,
        query: str,
        documents: Sequence[str],
        top_n: int | None = None,
        instruction: str | None = None,
        return_documents: bool = False,
    ) -> RerankResponse:
        outputs = [self.module.InferRequestedOutput(name) for name in OUTPUTS]
        result = self.client.infer(
            self.model_name, build_inputs(self.module, query, documents, top_n, instruction), outputs=outputs
        )
        return parse_response(result, documents if return_documents else None)

    def close(self) -> None:
        self.client.close()
