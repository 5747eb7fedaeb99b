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
from dataclasses import dataclass

import numpy as np

from .model_family import detect_model
from .model_source import resolve_model
from .errors import InvalidRequest, Overloaded
from .request_validation import InputLimits, RerankRequest, empty_text_error, parse_request
from .tokenization import EmptyTextError, QueryTooLongError, RequestEncoder, limit_threads, make_encoder
from .triton_params import ConfigError, ModelParameters


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


@dataclass(frozen=True)
class RawRequest:
    """The tensors of one request as Triton hands them over (None: an optional input not sent)."""

    query: np.ndarray
    documents: np.ndarray
    instruction: np.ndarray | None = None
    top_n: np.ndarray | None = None
    max_tokens_per_doc: np.ndarray | None = None


# Above this many input bytes in one batch, give freed heap back to the OS afterwards: glibc keeps the tokenizer's
# freed arenas otherwise, and a preprocess instance would sit on its worst request's memory for good.
TRIM_AFTER_BYTES = 4 << 20
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def release_memory() -> None:
    _LIBC.malloc_trim(0)


class Preprocessor:
    def __init__(self, encoder: RequestEncoder, limits: InputLimits, batch_token_budget: int | None = None) -> None:
        self.encoder = encoder
        self.limits = limits
        self.batch_token_budget = batch_token_budget

    @classmethod
    def from_parameters(cls, params: ModelParameters) -> "Preprocessor":
        threads = params.integer("tokenizer_threads", minimum=0)
        if threads:  # 0: the tokenizer's own default, one thread per core
            limit_threads(threads)
        model = resolve_model(params.text("model"))
        info = detect_model(model)
        mode = params.text("long_documents")
        if mode not in ("truncate", "window"):
            raise ConfigError(f"model '{params.model_name}': long_documents must be 'truncate' or 'window', got '{mode}'")
        overlap = params.integer("window_overlap_tokens", minimum=0) if mode == "window" else None
        windows = params.integer("max_windows_per_document", minimum=1) if mode == "window" else 1
        encoder = make_encoder(info.family, model, params.integer("max_model_len", minimum=8), overlap, windows)
        budget = params.integer("batch_token_budget", minimum=1)
        return cls(encoder, InputLimits.from_parameters(params), budget)

    def parse(self, raw: RawRequest) -> RerankRequest:
        return parse_request(
            self.limits, raw.query, raw.documents, raw.instruction, raw.top_n,
            self.encoder.takes_instruction, raw.max_tokens_per_doc,
        )

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
        return self.encode(self.parse(RawRequest(query, documents, instruction, top_n, max_tokens_per_doc)))

    def run_batch(self, batch: list[RawRequest]) -> list[EngineInputs | Exception]:
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


def _input_bytes(raw: RawRequest) -> int:
    return sum(len(value) for value in raw.documents.reshape(-1)) if raw.documents.dtype == object else raw.documents.nbytes
