"""The preprocess step: validated request in, flat token tensors for the engine out.

A batch (what Triton queued for one `execute`) is admitted by work, not by count: each request's work is an upper
bound on the document tokens it can make the tokenizer produce, known before any tokenizing, and requests past the
batch's token budget are refused at once (`Overloaded`, UNAVAILABLE: retry later) instead of making every request
behind them wait.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import os
from dataclasses import dataclass

import numpy as np

from ..contract import RequestLimits
from ..errors import InvalidRequest, Overloaded
from .request import RequestTensors, RerankRequest, empty_text_error, parse_request
from .settings import PreprocessSettings
from .tokenization import EmptyTextError, QueryTooLongError, RequestEncoder, make_encoder


@dataclass
class EngineInputs:
    """One request's sequences, flattened so they travel as three ragged INT32 tensors."""

    token_ids: np.ndarray  # [T]
    token_type_ids: np.ndarray  # [T]
    sequence_lengths: np.ndarray  # [S]
    sequence_documents: np.ndarray  # [S] document index of each sequence, -1 for a bi-encoder's query
    documents: int
    truncated: int
    top_n: int


# Above this many input bytes in one batch, give freed heap back to the OS afterwards: glibc keeps the tokenizer's
# freed arenas otherwise, and a preprocess instance would sit on its worst request's memory for good.
TRIM_AFTER_BYTES = 4 << 20
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def release_memory() -> None:
    _LIBC.malloc_trim(0)


def size_tokenizer_pool(threads: int) -> None:
    """Size the Rust tokenizer's thread pool (rayon's, one per process, built at the first batch; default one
    thread per core); 0 leaves it as the environment sizes it. Several preprocess instances each with a pool per core
    oversubscribe the CPU and starve vLLM's engine-core process of the time it needs to keep the GPU fed (H200 run,
    benchmarks/results/README.md)."""
    if threads:
        os.environ["RAYON_NUM_THREADS"] = str(threads)


class Preprocessor:
    def __init__(self, encoder: RequestEncoder, limits: RequestLimits, batch_token_budget: int | None = None) -> None:
        self.encoder = encoder
        self.limits = limits
        self.batch_token_budget = batch_token_budget

    @classmethod
    def from_settings(cls, settings: PreprocessSettings) -> "Preprocessor":
        encoder = make_encoder(
            settings.family, settings.model, settings.limits.max_model_len, settings.window_overlap, settings.max_windows
        )
        return cls(encoder, settings.limits, settings.batch_token_budget)

    def parse(self, tensors: RequestTensors) -> RerankRequest:
        return parse_request(tensors, self.limits, self.encoder.takes_instruction)

    def work(self, request: RerankRequest) -> int:
        """Upper bound on the document tokens this request can cost: a token covers at least one UTF-8 byte, and
        no document is tokenized past its span."""
        span = self.encoder.document_span(request.max_tokens_per_doc)
        return sum(span if len(doc) >= span else min(span, len(doc.encode())) for doc in request.documents)

    def encode(self, request: RerankRequest) -> EngineInputs:
        try:
            encoded = self.encoder.encode(request.query, request.documents, request.instruction, request.max_tokens_per_doc)
        except QueryTooLongError as exc:
            raise InvalidRequest(f"QUERY: {exc}") from None
        except EmptyTextError as exc:
            raise empty_text_error(exc.name) from None
        flat_ids = _flat(encoded.token_ids)
        flat_types = np.zeros_like(flat_ids) if encoded.token_type_ids is None else _flat(encoded.token_type_ids)
        return EngineInputs(
            token_ids=flat_ids,
            token_type_ids=flat_types,
            sequence_lengths=np.asarray(encoded.lengths, dtype=np.int32),
            sequence_documents=np.asarray(encoded.document_index, dtype=np.int32),
            documents=len(request.documents),
            truncated=encoded.truncated,
            top_n=request.top_n,
        )

    def __call__(
        self,
        query: np.ndarray,
        documents: np.ndarray,
        instruction: np.ndarray | None = None,
        top_n: np.ndarray | None = None,
        max_tokens_per_doc: np.ndarray | None = None,
    ) -> EngineInputs:
        """One request alone (no batch budget)."""
        return self.encode(self.parse(RequestTensors(query, documents, instruction, top_n, max_tokens_per_doc)))

    def run_batch(self, batch: list[RequestTensors]) -> list[EngineInputs | Exception]:
        """Each request's engine inputs, or its own error. Requests are admitted in arrival order while the
        batch's work stays within `batch_token_budget`; the first valid one always runs (its size is bounded by
        the per-request limits), so one batch costs at most the budget plus one largest request."""
        parsed: list[RerankRequest | Exception] = []
        for raw in batch:
            try:
                parsed.append(self.parse(raw))
            except InvalidRequest as exc:
                parsed.append(exc)
        results: list[EngineInputs | Exception] = []
        spent = 0
        for request in parsed:
            if isinstance(request, Exception):
                results.append(request)
                continue
            cost = self.work(request)
            if spent and self.batch_token_budget is not None and spent + cost > self.batch_token_budget:
                results.append(Overloaded(
                    f"preprocess is over its work budget ({spent} of {self.batch_token_budget} document tokens "
                    f"in this batch, this request needs up to {cost}): retry later"
                ))
                continue
            spent += cost
            try:
                results.append(self.encode(request))
            except InvalidRequest as exc:
                results.append(exc)
        if sum(_input_bytes(raw) for raw in batch) > TRIM_AFTER_BYTES:
            release_memory()
        return results


def _flat(sequences: list[list[int]]) -> np.ndarray:
    return np.fromiter(itertools.chain.from_iterable(sequences), dtype=np.int32, count=sum(map(len, sequences)))


def _input_bytes(raw: RequestTensors) -> int:
    return sum(len(value) for value in raw.documents.reshape(-1)) if raw.documents.dtype == object else raw.documents.nbytes
