"""What a rerank call returns: results best first, plus the scores of every document in input order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RerankResult:
    index: int  # position in the caller's `documents`
    relevance_score: float  # calibrated probability in 0..1
    raw_score: float  # the engine's score (logit, logit_yes - logit_no, or cosine)
    document: str | None = None


@dataclass(frozen=True)
class RerankResponse:
    results: list[RerankResult]  # best first, at most top_n
    scores: np.ndarray  # calibrated, input order
    raw_scores: np.ndarray  # engine scores, input order
    truncated: int  # documents cut to fit max_model_len or max_tokens_per_doc
    calibration: str  # "<name>@<version>" of the calibration profile applied
    requests: int = 1  # how many Triton requests the call was split into


def _as_text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def make_response(
    scores: np.ndarray,
    raw_scores: np.ndarray,
    ranking: Sequence[int],
    truncated: int,
    calibration: str,
    documents: Sequence[str | bytes] | None,
    requests: int = 1,
) -> RerankResponse:
    results = [
        RerankResult(
            index=int(i),
            relevance_score=float(scores[i]),
            raw_score=float(raw_scores[i]),
            document=None if documents is None else _as_text(documents[int(i)]),
        )
        for i in ranking
    ]
    return RerankResponse(results, scores, raw_scores, truncated, calibration, requests)
