"""How vLLM scores each model family: one small class per score kind, chosen from a registry by the family.

Each kind says which pooling task runs, the PoolingParams of one sequence, and how the pooled outputs of one
request become one raw score per sequence. Raw scores come back without vLLM's activation: calibration is the
next step's job.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from packaging.version import Version

from ..model_family import ModelFamily

# From vLLM 0.33 on, PoolingParams.extra_kwargs["compressed_token_type_ids"] is segment B's half-open range
# (start, end); before, its start. The other form fails in vLLM's model runner and ends the engine.
TOKEN_TYPE_RANGE_SINCE = Version("0.33.0")


def first_segment_b(types: np.ndarray) -> int | None:
    """Where segment B starts in BERT token types (zeros then ones); None when there is no segment B."""
    ones = np.flatnonzero(types)
    return int(ones[0]) if ones.size else None


def as_float32(data: Any) -> np.ndarray:
    """A pooled output (a torch tensor, possibly bfloat16, which numpy cannot read) as float32 numpy."""
    if hasattr(data, "float"):
        data = data.float().cpu().numpy()
    return np.asarray(data, dtype=np.float32).reshape(-1)


def cosine_to_first(embeddings: np.ndarray) -> np.ndarray:
    """Bi-encoder score: cosine of the query (row 0) with every document row."""
    norms = np.linalg.norm(embeddings, axis=1)
    norms[norms == 0] = 1.0
    unit = embeddings / norms[:, None]
    return (unit[1:] @ unit[0]).astype(np.float32)


class ScoreKind:
    task: ClassVar[str]
    query_row: ClassVar[bool] = False  # does the request carry the query as its own first sequence?

    def __init__(self, pooling_params: type, vllm_release: Version) -> None:
        self._params = pooling_params
        self._vllm_release = vllm_release

    def params(self, types: np.ndarray) -> Any:
        raise NotImplementedError

    def sequence_scores(self, pooled: list[Any]) -> np.ndarray:
        """`pooled`: vLLM's output tensor of each sequence of one request, in order."""
        raise NotImplementedError


class ClassifierLogit(ScoreKind):
    """Cross-encoders and yes/no rerankers: the classifier's single logit (for Qwen3, logit_yes - logit_no)."""

    task = "classify"

    def params(self, types: np.ndarray) -> Any:
        segment_b = self._segment_b(types)
        extra = {"compressed_token_type_ids": segment_b} if segment_b is not None else None
        return self._params(task=self.task, use_activation=False, extra_kwargs=extra)

    def _segment_b(self, types: np.ndarray) -> int | tuple[int, int] | None:
        """Segment B in the form this vLLM rebuilds BERT token types from; types are zeros then ones."""
        start = first_segment_b(types)
        if start is None or self._vllm_release < TOKEN_TYPE_RANGE_SINCE:
            return start
        return start, len(types)

    def sequence_scores(self, pooled: list[Any]) -> np.ndarray:
        return np.asarray([as_float32(data)[0] for data in pooled], dtype=np.float32)


class CosineToQuery(ScoreKind):
    """Bi-encoders: each sequence embedded alone, the score is the cosine of each document with the query."""

    task = "embed"
    query_row = True

    def params(self, types: np.ndarray) -> Any:
        return self._params(task=self.task)  # the model's own normalisation; cosine is scale-free anyway

    def sequence_scores(self, pooled: list[Any]) -> np.ndarray:
        return cosine_to_first(np.stack([as_float32(data) for data in pooled]))


SCORE_KINDS: dict[ModelFamily, type[ScoreKind]] = {
    ModelFamily.CROSS_ENCODER: ClassifierLogit,
    ModelFamily.YES_NO_RERANKER: ClassifierLogit,
    ModelFamily.BI_ENCODER: CosineToQuery,
}
