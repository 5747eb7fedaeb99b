"""The preprocess step: validated request in, flat token tensors for the engine out.

Requests are admitted by work, not by count: each request's work is an upper bound on the document tokens it can
make the tokenizer produce, priced from its documents' byte lengths before anything is decoded. Work admitted and
not yet answered is counted across batches (`Admission`); a request past the budget is refused at once (`Overloaded`,
UNAVAILABLE: retry later) instead of being decoded, held and made to wait behind the work already taken.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from dataclasses import dataclass

import numpy as np

from ..contract import RequestLimits
from ..encoding.tokenization import EmptyTextError, QueryTooLongError, RequestEncoder
from ..families import make_encoder
from ..errors import InvalidRequest, Overloaded
from ..sequences import SequenceBatch
from .request import RequestTensors, DecodedRequest, document_sizes, empty_text_error, parse_request, request_cap
from .settings import PreprocessSettings

# What the preprocess step refuses a request with, each error's `reason` a label of reranker_rejected_requests_total
REFUSED_AS = (InvalidRequest, Overloaded)


@dataclass
class Preprocessed:
    """One request's answer: its sequences for the engine and how many of its documents were cut."""

    sequences: SequenceBatch
    truncated: int

    @property
    def documents(self) -> int:
        return self.sequences.document_count


# Above this many input bytes in one batch, give freed heap back to the OS afterwards: glibc keeps the tokenizer's
# freed arenas otherwise, and a preprocess instance would sit on its worst request's memory for good.
TRIM_AFTER_BYTES = 4 << 20
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def release_memory() -> None:
    _LIBC.malloc_trim(0)


def size_tokenizer_pool(threads: int) -> None:
    """Size the Rust tokenizer's thread pool (rayon's, one per process, built at the first batch; default one
    thread per core), and with it a tiktoken twin's threads (python_backends.encoding.fast_bpe reads the same
    variable); 0 leaves them as the environment sizes them. Several preprocess instances each with a pool per core
    oversubscribe the CPU and starve vLLM's engine-core process of the time it needs to keep the GPU fed (H200 run,
    benchmarks/results/README.md)."""
    if threads:
        os.environ["RAYON_NUM_THREADS"] = str(threads)


class Admission:
    """Document tokens admitted in this instance and not yet answered (across batches). A request is admitted while
    the total stays within the budget; with nothing in flight one always is (its size is bounded by the request
    limits), so what an instance holds is at most the budget plus one largest request."""

    def __init__(self, budget: int | None) -> None:
        self.budget = budget
        self.spent = 0
        self._lock = threading.Lock()

    def take(self, cost: int) -> Overloaded | None:
        with self._lock:
            if self.spent and self.budget is not None and self.spent + cost > self.budget:
                return Overloaded(
                    f"preprocess is over its work budget ({self.spent} of {self.budget} document tokens in flight, "
                    f"this request needs up to {cost}): retry later"
                )
            self.spent += cost
            return None

    def give_back(self, cost: int) -> None:
        with self._lock:
            self.spent -= cost


class Preprocessor:
    def __init__(self, encoder: RequestEncoder, limits: RequestLimits, batch_token_budget: int | None = None) -> None:
        self.encoder = encoder
        self.limits = limits
        self.admission = Admission(batch_token_budget)

    @classmethod
    def from_settings(cls, settings: PreprocessSettings) -> "Preprocessor":
        encoder = make_encoder(
            settings.family, settings.model, settings.limits.max_model_len, settings.window_overlap, settings.max_windows
        )
        return cls(encoder, settings.limits, settings.batch_token_budget)

    def parse(self, tensors: RequestTensors) -> DecodedRequest:
        return parse_request(tensors, self.limits, self.encoder.takes_instruction)

    def price(self, tensors: RequestTensors) -> int:
        """Upper bound on the document tokens this request can cost, from the documents' byte lengths alone (no
        decoding): a token covers at least one UTF-8 byte, and no document is tokenized past its span."""
        cap = request_cap(tensors)
        span = self.encoder.document_span(cap)
        return sum(min(span, size) for size in document_sizes(tensors, self.limits))

    def encode(self, request: DecodedRequest) -> Preprocessed:
        try:
            encoded = self.encoder.encode(request.query, request.documents, request.instruction, request.max_tokens_per_doc)
        except QueryTooLongError as exc:
            raise InvalidRequest(f"QUERY: {exc}", "QUERY") from None
        except EmptyTextError as exc:
            raise empty_text_error(exc.name) from None
        sequences = SequenceBatch.from_sequences(encoded.token_ids, encoded.token_type_ids, encoded.document_index)
        return Preprocessed(sequences, truncated=encoded.truncated)

    def __call__(
        self,
        query: np.ndarray,
        documents: np.ndarray,
        instruction: np.ndarray | None = None,
        top_n: np.ndarray | None = None,
        max_tokens_per_doc: np.ndarray | None = None,
    ) -> Preprocessed:
        """One request alone (no admission)."""
        return self.encode(self.parse(RequestTensors(query, documents, instruction, top_n, max_tokens_per_doc)))

    def admit(self, batch: list[RequestTensors | Exception]) -> list[int | Exception]:
        """Each request's admitted work (give it to `run`), or its refusal: invalid sizes (InvalidRequest) or past
        the work in flight (Overloaded). Priced from sizes only, so refusals cost microseconds, not decoding."""
        decisions: list[int | Exception] = []
        for raw in batch:
            if isinstance(raw, Exception):
                decisions.append(raw)
                continue
            try:
                cost = self.price(raw)
            except InvalidRequest as exc:
                # without its traceback: that holds this frame, which holds `decisions` (so the refusal is a garbage
                # cycle) and the whole batch's inputs, kept until the cyclic collector ran (a preprocess stub grew
                # by 500 MB per refused request of 4000 x 64 KB)
                decisions.append(exc.with_traceback(None))
                continue
            decisions.append(self.admission.take(cost) or cost)
        return decisions

    def run(self, raw: RequestTensors, cost: int) -> Preprocessed | Exception:
        """Decode and encode one admitted request, then give its work back; its refusal as the result."""
        try:
            return self.encode(self.parse(raw))
        except InvalidRequest as exc:
            return exc
        finally:
            self.admission.give_back(cost)
            if _input_bytes(raw) > TRIM_AFTER_BYTES:
                release_memory()


def _input_bytes(raw: RequestTensors) -> int:
    return sum(len(value) for value in raw.documents.reshape(-1)) if raw.documents.dtype == object else raw.documents.nbytes
