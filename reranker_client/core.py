"""The pure parts of the clients, shared by `RerankClient` (sync) and `AsyncRerankClient` (asyncio).

Nothing here does I/O: planning a call (validation, splitting a long candidate list into requests),
building one request's tensors, parsing one response, merging the responses of a split call, and the
retry policy (which errors are worth another try, and how long to wait before it).
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
from tritonclient.utils import InferenceServerException

MODEL_NAME = "reranker"
# Always ask for every output: Triton 2.51 fails a gRPC ensemble request whose requested outputs skip SCORES
# ("unexpected deadlock, at least one output is not set").
OUTPUTS = ("SCORES", "RAW_SCORES", "RANKING", "TRUNCATED", "CALIBRATION")
DEFAULT_MAX_DOCUMENTS_PER_REQUEST = 256  # the server takes up to max_documents=1024 (rerank_preprocess/config.pbtxt)
INT32_MAX = 2**31 - 1


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
    truncated: int  # pairs cut to fit max_model_len
    calibration: str  # "<name>@<version>" of the calibration profile applied
    requests: int = 1  # how many Triton requests the call was split into


# -- building a request and parsing its response ------------------------------------------------------------


def protocol_module(protocol: str, asynchronous: bool = False) -> ModuleType:
    """`tritonclient.{grpc,http}` or, with `asynchronous`, `tritonclient.{grpc,http}.aio`."""
    if protocol == "grpc":
        if asynchronous:
            import tritonclient.grpc.aio as module
        else:
            import tritonclient.grpc as module
    elif protocol == "http":
        if asynchronous:
            import tritonclient.http.aio as module
        else:
            import tritonclient.http as module
    else:
        raise ValueError(f"protocol must be 'grpc' or 'http', got {protocol!r}")
    return module


def _bytes_row(values: Sequence[str | bytes]) -> np.ndarray:
    row = np.empty((1, len(values)), dtype=np.object_)
    for i, value in enumerate(values):
        row[0, i] = value if isinstance(value, bytes) else value.encode("utf-8")
    return row


def build_inputs(
    module: ModuleType,
    query: str | bytes,
    documents: Sequence[str | bytes],
    top_n: int | None = None,
    instruction: str | None = None,
) -> list[Any]:
    """The InferInput list of one request for `tritonclient.grpc`, `tritonclient.http` or their `.aio`."""
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


def requested_outputs(module: ModuleType) -> list[Any]:
    return [module.InferRequestedOutput(name) for name in OUTPUTS]


@dataclass(frozen=True)
class ParsedResponse:
    """One Triton response, in the request's own document order."""

    scores: np.ndarray
    raw_scores: np.ndarray
    ranking: np.ndarray
    truncated: int
    calibration: str


def parse_result(result: Any) -> ParsedResponse:
    calibration = result.as_numpy("CALIBRATION")[0, 0]
    return ParsedResponse(
        scores=result.as_numpy("SCORES")[0],
        raw_scores=result.as_numpy("RAW_SCORES")[0],
        ranking=result.as_numpy("RANKING")[0],
        truncated=int(result.as_numpy("TRUNCATED")[0, 0]),
        calibration=calibration.decode() if isinstance(calibration, bytes) else str(calibration),
    )


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


def parse_response(result: Any, documents: Sequence[str | bytes] | None = None) -> RerankResponse:
    """A single request's Triton result as a `RerankResponse` (the server's own ranking)."""
    parsed = parse_result(result)
    return make_response(
        parsed.scores, parsed.raw_scores, parsed.ranking, parsed.truncated, parsed.calibration, documents
    )


# -- planning a call: one request, or several when the candidate list is long --------------------------------


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
    chunks: list[Chunk] = field(default_factory=list)

    @property
    def split(self) -> bool:
        return len(self.chunks) > 1

    def inputs(self, module: ModuleType, chunk: Chunk) -> list[Any]:
        return build_inputs(module, self.query, chunk.documents, chunk.top_n, self.instruction)


def validate_top_n(top_n: int | None, n_documents: int) -> None:
    """The server's TOP_N rule, checked here when the server cannot check it (split calls, out of INT32)."""
    if top_n is None:
        return
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)):
        raise TypeError(f"top_n must be an int, got {type(top_n).__name__}")
    if not 1 <= top_n <= n_documents:
        raise ValueError(f"TOP_N must be between 1 and the number of documents ({n_documents}), got {top_n}")


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
    top_n: int | None = None,
    instruction: str | None = None,
    max_documents_per_request: int = DEFAULT_MAX_DOCUMENTS_PER_REQUEST,
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
        return RerankPlan(query, documents, top_n, instruction, [Chunk(0, documents, top_n)])
    validate_top_n(top_n, n)
    chunks, offset = [], 0
    for size in sizes:
        chunks.append(Chunk(offset, documents[offset : offset + size], None))
        offset += size
    return RerankPlan(query, documents, top_n, instruction, chunks)


_DOCUMENT_INDEX = re.compile(r"DOCUMENTS\[(\d+)\]")


def rebase_error(error: InferenceServerException, offset: int) -> InferenceServerException:
    """A chunk's error with its DOCUMENTS[i] indices turned into the caller's (i + offset)."""
    if offset == 0:
        return error
    message = _DOCUMENT_INDEX.sub(lambda m: f"DOCUMENTS[{int(m.group(1)) + offset}]", error.message() or "")
    return InferenceServerException(msg=message, status=error.status(), debug_details=error.debug_details())


class CalibrationChangedError(RuntimeError):
    """The requests of one split call were answered under different calibration profiles (a profile was
    swapped mid-call): their scores are not comparable, so the call fails rather than mix them."""


def merge(plan: RerankPlan, parsed: Sequence[ParsedResponse], return_documents: bool) -> RerankResponse:
    """The caller's response from each chunk's (in chunk order).

    A single request keeps the server's ranking. A split call concatenates scores in input order and ranks
    over the raw scores exactly as the server does (stable descending sort of float64(raw), ties in input
    order), then cuts at top_n: ranking by raw score is ranking by calibrated score because calibration is
    monotone and applied per document, and raw scores still separate the ties a flat isotonic step makes.
    """
    documents = plan.documents if return_documents else None
    if not plan.split:
        only = parsed[0]
        return make_response(only.scores, only.raw_scores, only.ranking, only.truncated, only.calibration, documents)
    tags = sorted({p.calibration for p in parsed})
    if len(tags) != 1:
        raise CalibrationChangedError(f"the requests of one call were calibrated by different profiles: {tags}")
    scores = np.concatenate([p.scores for p in parsed])
    raw = np.concatenate([p.raw_scores for p in parsed])
    order = np.argsort(-raw.astype(np.float64), kind="stable")
    top_n = len(raw) if plan.top_n is None else int(plan.top_n)
    return make_response(
        scores, raw, order[:top_n], sum(p.truncated for p in parsed), tags[0], documents, requests=len(parsed)
    )


# -- retries ------------------------------------------------------------------------------------------------

try:  # the HTTP clients' transport errors; aiohttp comes with tritonclient[http]
    import aiohttp

    _TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, aiohttp.ClientConnectionError)
except ImportError:  # pragma: no cover
    _TRANSPORT_ERRORS = (ConnectionError,)

RETRYABLE_STATUSES = frozenset({"StatusCode.UNAVAILABLE", "503"})
QUEUE_FULL = "Exceeds maximum queue size"


def is_retryable(error: BaseException) -> bool:
    """UNAVAILABLE (gRPC), 503 (HTTP), a full queue, or a connection that could not be made or was dropped.

    Never INVALID_ARGUMENT / 400: the same request would get the same answer.
    """
    if isinstance(error, InferenceServerException):
        status = str(error.status())
        if status in ("StatusCode.INVALID_ARGUMENT", "400"):
            return False
        return status in RETRYABLE_STATUSES or QUEUE_FULL in (error.message() or "")
    return isinstance(error, _TRANSPORT_ERRORS)


@dataclass(frozen=True)
class RetryPolicy:
    """At most `max_retries` further attempts after the first; before retry k (0-based) wait
    min(max_backoff_s, backoff_s * 2**k) scaled by a random factor in [1 - jitter, 1]."""

    max_retries: int = 3
    backoff_s: float = 0.1
    max_backoff_s: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_s < 0 or self.max_backoff_s < 0 or not 0 <= self.jitter <= 1:
            raise ValueError("backoff_s and max_backoff_s must be >= 0 and jitter in 0..1")

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        rng = rng or random.Random()
        for attempt in range(self.max_retries):
            delay = min(self.max_backoff_s, self.backoff_s * 2**attempt)
            yield delay * (1 - self.jitter * rng.random())

    def next_delay(self, delays: Iterator[float], error: BaseException) -> float | None:
        """The wait before the next attempt after `error`, or None when the error is to be raised."""
        if not is_retryable(error):
            return None
        return next(delays, None)


class ClientOptions:
    """What the sync and async clients share: where to send, how to split, how to retry."""

    def __init__(
        self,
        url: str,
        protocol: str,
        model_name: str,
        *,
        max_documents_per_request: int,
        max_concurrency: int,
        max_retries: int,
        backoff_s: float,
        max_backoff_s: float,
        timeout_s: float | None,
        asynchronous: bool,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.url = url
        self.protocol = protocol
        self.module = protocol_module(protocol, asynchronous=asynchronous)
        self.model_name = model_name
        self.max_documents_per_request = max_documents_per_request
        self.max_concurrency = max_concurrency
        self.retry = RetryPolicy(max_retries, backoff_s, max_backoff_s)
        self.timeout_s = timeout_s
