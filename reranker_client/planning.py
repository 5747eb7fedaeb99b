"""Planning a call: one request when the candidate list fits the server's per-request limit, otherwise balanced
chunks that run concurrently and are merged (reranker_client.merging)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from python_backends.contract import INT32_MAX
from python_backends.ranking import ranking_length

from .wire import build_inputs


@dataclass(frozen=True)
class Chunk:
    offset: int  # index of the chunk's first document in the caller's list
    documents: Sequence[str | bytes]
    top_n: int | None  # sent as TOP_N


@dataclass(frozen=True)
class RerankPlan:
    query: str | bytes
    documents: Sequence[str | bytes]
    top_n: int | None
    instruction: str | None
    max_tokens_per_doc: int | None = None
    chunks: list[Chunk] = field(default_factory=list)

    @property
    def split(self) -> bool:
        return len(self.chunks) > 1

    def inputs(self, module: ModuleType, chunk: Chunk) -> list[Any]:
        return build_inputs(
            module, self.query, chunk.documents, chunk.top_n, self.instruction, self.max_tokens_per_doc
        )


def validate_top_n(top_n: int | None, n_documents: int) -> None:
    """The server's TOP_N rule (python_backends.ranking.ranking_length), checked here when the server cannot check it (split calls,
    out of INT32); a top_n that is no int is the client's own error."""
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer))):
        raise TypeError(f"top_n must be an int, got {type(top_n).__name__}")
    ranking_length(top_n, n_documents)


def split_sizes(n: int, max_per_request: int) -> list[int]:
    """Balanced chunk sizes: ceil(n / max) chunks whose sizes differ by at most one."""
    if max_per_request < 1:
        raise ValueError(f"max_documents_per_request must be >= 1, got {max_per_request}")
    if n == 0:
        return [0]
    count = -(-n // max_per_request)
    base, extra = divmod(n, count)
    return [base + 1 if i < extra else base for i in range(count)]


def plan_rerank(
    query: str | bytes,
    documents: Sequence[str | bytes],
    max_documents_per_request: int,
    top_n: int | None = None,
    instruction: str | None = None,
    max_tokens_per_doc: int | None = None,
) -> RerankPlan:
    """One request when the list fits (the server validates everything, including an empty list), otherwise
    balanced chunks of at most `max_documents_per_request` without TOP_N; top_n is applied after the merge."""
    if isinstance(documents, (str, bytes)):
        raise TypeError("documents must be a sequence of strings, not a single string")
    documents = list(documents)
    n = len(documents)
    sizes = split_sizes(n, max_documents_per_request)
    if len(sizes) == 1:
        if top_n is not None and not (isinstance(top_n, (int, np.integer)) and 0 <= top_n <= INT32_MAX):
            validate_top_n(top_n, n)  # would not fit the INT32 tensor: say what the server would have said
        return RerankPlan(query, documents, top_n, instruction, max_tokens_per_doc, [Chunk(0, documents, top_n)])
    validate_top_n(top_n, n)
    chunks, offset = [], 0
    for size in sizes:
        chunks.append(Chunk(offset, documents[offset : offset + size], None))
        offset += size
    return RerankPlan(query, documents, top_n, instruction, max_tokens_per_doc, chunks)
