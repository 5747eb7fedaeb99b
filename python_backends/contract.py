"""The public contract of the `reranker` ensemble: tensor names, dtypes, per-request shapes, which inputs are
optional, and where the server's limits live. docs/CONTRACT.md is this module in prose.

Read by the steps, the client (reranker_client), the gateway and the load tests, so none of them spells a tensor
name, a limit or the TOP_N rule of its own. The limits are not copied here: they are parameters of
rerank_preprocess's config.pbtxt, read by `RequestLimits.from_model_config` from the config as the preprocess step
gets it at load, and as a client gets it from the running server (`GET /v2/models/rerank_preprocess/config`, or gRPC
ModelConfig). Standard library only: the locust image imports it without numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import InvalidRequest

MODEL_NAME = "reranker"  # the ensemble clients call
LIMITS_MODEL_NAME = "rerank_preprocess"  # the step whose config.pbtxt parameters hold the request limits

# A request's deadline is its Triton `timeout` (microseconds; tritonclient's `infer(timeout=...)`), which the ensemble
# passes to every step. When it runs out on the server the answer is UNAVAILABLE with one of these: Triton's own for a
# request still in a step's queue, the engine step's for one whose work it aborted. Never worth a retry.
QUEUE_TIMEOUT = "Request timeout expired"
ENGINE_TIMEOUT = "the request's timeout passed"


def timed_out(message: str) -> bool:
    """Whether a server's error message says the request's own timeout ran out (not a fault of the server's)."""
    return QUEUE_TIMEOUT in message or ENGINE_TIMEOUT in message


# How a step's refusal of work past its budget ends (python_backends.errors.Overloaded; preprocess's work budget, the
# engine's waiting bound), and Triton's own refusal when a configured max_queue_size is full: the server is busy.
RETRY_LATER = "): retry later"
QUEUE_FULL = "Exceeds maximum queue size"


def overloaded(message: str) -> bool:
    """Whether a server's error message says it refused the request for being too busy (worth a later retry)."""
    return RETRY_LATER in message or QUEUE_FULL in message

# Tensor names
QUERY = "QUERY"
DOCUMENTS = "DOCUMENTS"
INSTRUCTION = "INSTRUCTION"
TOP_N = "TOP_N"
MAX_TOKENS_PER_DOC = "MAX_TOKENS_PER_DOC"
SCORES = "SCORES"
RAW_SCORES = "RAW_SCORES"
RANKING = "RANKING"
TRUNCATED = "TRUNCATED"
CALIBRATION = "CALIBRATION"

N = "N"  # the request's number of documents, in `Tensor.dims`


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str  # KServe v2 / tritonclient datatype
    dims: tuple[int | str, ...]  # per request, with the leading batch dimension 1; "N" = number of documents
    required: bool
    meaning: str

    def shape(self, n_documents: int) -> list[int]:
        """The shape one request sends (inputs) or gets (outputs other than RANKING, whose length is top_n)."""
        return [n_documents if d == N else int(d) for d in self.dims]


INPUTS: tuple[Tensor, ...] = (
    Tensor(QUERY, "BYTES", (1, 1), True, "the query, UTF-8"),
    Tensor(DOCUMENTS, "BYTES", (1, N), True, "the candidate documents, UTF-8, 1 <= N <= max_documents"),
    Tensor(INSTRUCTION, "BYTES", (1, 1), False, "task instruction, instruction-following rerankers only"),
    Tensor(TOP_N, "INT32", (1, 1), False, "length of RANKING, 1 <= TOP_N <= N; absent: N"),
    Tensor(
        MAX_TOKENS_PER_DOC, "INT32", (1, 1), False,
        "per-request cap on each document's tokens (the query and template are never cut); absent: max_model_len",
    ),
)
OUTPUTS: tuple[Tensor, ...] = (
    Tensor(SCORES, "FP32", (1, N), True, "calibrated relevance probability in 0..1, input order"),
    Tensor(RAW_SCORES, "FP32", (1, N), True, "the engine's raw score, input order"),
    Tensor(RANKING, "INT32", (1, "TOP_N"), True, "document indices, best first"),
    Tensor(TRUNCATED, "INT32", (1, 1), True, "how many documents were cut (max_model_len or MAX_TOKENS_PER_DOC)"),
    Tensor(CALIBRATION, "BYTES", (1, 1), True, "the calibration profile applied, name@version"),
)
TENSORS: dict[str, Tensor] = {t.name: t for t in (*INPUTS, *OUTPUTS)}
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class RequestLimits:
    """The request limits the server enforces, as rerank_preprocess's config.pbtxt parameters state them."""

    max_documents: int  # documents per request
    max_document_bytes: int  # UTF-8 bytes per document
    max_query_bytes: int  # UTF-8 bytes of the query (and of the instruction)
    # tokens of one query-document sequence; longer documents are cut. Below 8 not even a template fits.
    max_model_len: int = field(metadata={"minimum": 8})

    @classmethod
    def from_model_config(cls, config: Mapping[str, Any]) -> RequestLimits:
        """From the model configuration as Triton hands it to the step (`args["model_config"]`, parsed) and serves
        it: HTTP's JSON, or gRPC's `as_json=True` answer (the same object under a "config" key)."""
        config = config.get("config", config)
        parameters = config.get("parameters") or {}
        model = config.get("name", LIMITS_MODEL_NAME)
        values = {}
        for limit in fields(cls):
            name, minimum = limit.name, limit.metadata.get("minimum", 1)
            entry = parameters.get(name)
            raw = entry.get("string_value") if isinstance(entry, Mapping) else None
            try:
                values[name] = int(str(raw).strip())
            except ValueError:
                raise ValueError(f"model {model!r}: configuration parameter {name!r} is {raw!r}, not an integer") from None
            if values[name] < minimum:
                raise ValueError(f"model {model!r}: configuration parameter {name!r} must be >= {minimum}, got {values[name]}")
        return cls(**values)


def ranking_length(top_n: int | None, n_documents: int) -> int:
    """TOP_N's one rule, for the steps, the client and the gateway: absent means every document, otherwise
    1 <= TOP_N <= N. Returns the length of RANKING."""
    if top_n is None:
        return n_documents
    if not 1 <= top_n <= n_documents:
        raise InvalidRequest(f"TOP_N must be between 1 and the number of documents ({n_documents}), got {top_n}")
    return top_n
