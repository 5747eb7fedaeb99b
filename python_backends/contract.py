"""The public contract of the `reranker` ensemble: tensor names, dtypes, per-request shapes, which inputs are
optional, and where the server's limits live. docs/CONTRACT.md is this module in prose.

Read by the steps, the client (reranker_client), the gateway and the load tests, so none of them spells a tensor
name or a limit of its own (the TOP_N and ranking rules are `ranking.py`'s). The limits are not copied here: the
request limits are parameters of rerank_preprocess's config, and max_model_len is the engine's (its `engine_args`,
the variant's one statement of it). `RequestLimits.from_model_configs` reads them from the two configs, as the
preprocess step gets them at load and as a client gets them from the running server (`GET /v2/models/<step>/config`,
or gRPC ModelConfig). Standard library only: the locust image imports it without numpy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any


MODEL_NAME = "reranker"  # the ensemble clients call

# What went wrong with a request travels with its error, in one form every reader shares (`server_error`): Triton's
# status where it tells enough, and where it does not, a tag that opens the message, `[kind]` or `[kind FIELD]`
# (`[invalid DOCUMENTS[3]] DOCUMENTS[3] is 70000 bytes, ...`). Triton's ensemble puts its own words before a step's
# message ("in ensemble 'reranker', "), never inside it, so the tag survives. The steps write the tag
# (python_backends.errors); the client, the gateway and the health check read it here and nowhere else.


class ErrorKind(str, Enum):
    """The kinds of failed request, from the caller's side."""

    INVALID = "invalid"  # the request breaks the contract or a limit: the caller's to fix; names its input
    OVERLOADED = "overloaded"  # the server is too busy for it now: worth a later retry
    DEADLINE = "deadline"  # the request's own timeout ran out on the server: never worth a retry
    CANCELLED = "cancelled"  # its client left
    ENGINE_DEAD = "engine_dead"  # the engine's process died: this server fails every request until it is reloaded
    UNAVAILABLE = "unavailable"  # the server cannot take requests now (starting, stopping, unreachable)
    NOT_LOADED = "not_loaded"  # the model is not loaded (yet, or any more)
    INTERNAL = "internal"  # the server's own fault

    @property
    def retryable(self) -> bool:
        """Whether the same request may be answered if sent again (here, later or by another replica)."""
        return self in (ErrorKind.OVERLOADED, ErrorKind.ENGINE_DEAD, ErrorKind.UNAVAILABLE)


# Triton's own words where its status alone does not tell the kind: a request whose timeout ran out in a step's
# queue, a full queue (a configured max_queue_size), a Python model whose stub process died.
QUEUE_TIMEOUT = "Request timeout expired"
QUEUE_FULL = "Exceeds maximum queue size"
STUB_DEAD = re.compile(r"Stub process '[^']*' is not healthy")
_ENSEMBLE_PREFIX = re.compile(r"^(?:in ensemble '[^']*', )+")
_TAG = re.compile(rf"^\[({'|'.join(kind.value for kind in ErrorKind)})(?: ([A-Z_]+)(?:\[(\d+)\])?)?\] ")


@dataclass(frozen=True)
class ServerError:
    """A server's error as its kind, the input it is about and its text (without Triton's ensemble prefix and the
    tag). For an input error `text` starts with the input's name (`field`): `DOCUMENTS[3] is empty: ...`."""

    kind: ErrorKind
    text: str
    field: str | None = None  # a tensor name
    index: int | None = None  # which document, for DOCUMENTS

    @property
    def field_name(self) -> str | None:
        """The input as the message names it: `DOCUMENTS[3]`, `QUERY`."""
        if self.field is None:
            return None
        return self.field if self.index is None else f"{self.field}[{self.index}]"

    @property
    def detail(self) -> str:
        """The text after the input's name (all of it when the error names none)."""
        name = self.field_name
        return self.text[len(name):] if name is not None else self.text

    def message(self) -> str:
        """The wire form, tag first: what a step answers and `server_error` reads back."""
        return f"[{self.kind.value}{'' if self.field is None else ' ' + self.field_name}] {self.text}"

    def moved(self, offset: int) -> ServerError:
        """The same error about document `index + offset` (a chunk's error in the caller's numbering)."""
        if self.index is None or offset == 0:
            return self
        index = self.index + offset
        return ServerError(self.kind, f"{self.field}[{index}]{self.detail}", self.field, index)


def server_error(status: str, message: str) -> ServerError:
    """The one reading of a failed request's status (gRPC `StatusCode.X` or HTTP code, as tritonclient reports it)
    and message: a step's tag says the kind; otherwise Triton's status does, and its own words where the status is
    shared (UNAVAILABLE: a queue timeout, a full queue or a dead stub)."""
    message = _ENSEMBLE_PREFIX.sub("", message)
    if tag := _TAG.match(message):
        kind, field, index = tag.groups()
        return ServerError(ErrorKind(kind), message[tag.end():], field, None if index is None else int(index))
    if status in ("StatusCode.INVALID_ARGUMENT", "400"):
        return ServerError(ErrorKind.INVALID, message)
    if QUEUE_TIMEOUT in message or status in ("StatusCode.DEADLINE_EXCEEDED", "504"):
        return ServerError(ErrorKind.DEADLINE, message)
    if QUEUE_FULL in message:
        return ServerError(ErrorKind.OVERLOADED, message)
    if status in ("StatusCode.CANCELLED", "499"):
        return ServerError(ErrorKind.CANCELLED, message)
    if status in ("StatusCode.NOT_FOUND", "404"):
        return ServerError(ErrorKind.NOT_LOADED, message)
    if status in ("StatusCode.UNAVAILABLE", "503"):
        return ServerError(ErrorKind.ENGINE_DEAD if STUB_DEAD.search(message) else ErrorKind.UNAVAILABLE, message)
    return ServerError(ErrorKind.INTERNAL, message)


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
SCORE_SEAL = "SCORE_SEAL"  # engine -> calibrate only: the engine's seal on RAW_SCORES (python_backends/seal.py)

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
HTTP_INPUT_SIZE_STEP = 1 << 20  # --http-max-input-size is given in whole MiB


@dataclass(frozen=True)
class RequestLimits:
    """The request limits the server enforces: rerank_preprocess's parameters, and the engine's max_model_len."""

    max_documents: int  # documents per request
    max_document_bytes: int  # UTF-8 bytes per document
    max_query_bytes: int  # UTF-8 bytes of the query (and of the instruction)
    # tokens of one query-document sequence; longer documents are cut. Below 8 not even a template fits.
    max_model_len: int = field(metadata={"minimum": 8})

    @classmethod
    def from_model_configs(cls, preprocess: Mapping[str, Any], engine: Mapping[str, Any]) -> RequestLimits:
        """From the preprocess step's and the engine's model configurations, as Triton hands them to a step
        (`args["model_config"]`, parsed) and serves them: HTTP's JSON, or gRPC's `as_json=True` answer (the same
        object under a "config" key)."""
        preprocess, engine = preprocess.get("config", preprocess), engine.get("config", engine)
        values = {name: _parameter(preprocess, name) for name in (f.name for f in fields(cls)) if name != "max_model_len"}
        engine_args = _parameter(engine, "engine_args", json.loads)
        values["max_model_len"] = engine_args.get("max_model_len") if isinstance(engine_args, dict) else None
        for limit in fields(cls):
            model = (engine if limit.name == "max_model_len" else preprocess).get("name", "?")
            value, minimum = values[limit.name], limit.metadata.get("minimum", 1)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"model {model!r}: configuration parameter {limit.name!r} is {value!r}, not an integer")
            if value < minimum:
                raise ValueError(f"model {model!r}: configuration parameter {limit.name!r} must be >= {minimum}, got {value}")
        return cls(**values)

    @property
    def largest_request_bytes(self) -> int:
        """The input bytes of the largest request these limits admit, as Triton's HTTP front counts them against
        `--http-max-input-size`: each BYTES element with its 4-byte length, QUERY and INSTRUCTION at
        max_query_bytes, TOP_N and MAX_TOKENS_PER_DOC one INT32 each."""
        return self.max_documents * (self.max_document_bytes + 4) + 2 * (self.max_query_bytes + 4) + 2 * 4

    @property
    def http_max_input_size(self) -> int:
        """`tritonserver --http-max-input-size` for these limits: the largest request, rounded up to a MiB. Triton's
        own default (64 MiB) is just below a request of 1024 documents of 64 KiB; set to this, what HTTP accepts is
        what the limits admit, refused before it is copied into any step's memory."""
        return -(-self.largest_request_bytes // HTTP_INPUT_SIZE_STEP) * HTTP_INPUT_SIZE_STEP


def limit_models(ensemble_config: Mapping[str, Any]) -> tuple[str, str]:
    """The steps whose configs hold an ensemble's request limits, from its config (JSON form, either shape): the
    preprocess step (it takes QUERY) and the engine (it takes TOKEN_IDS). A second model served beside `reranker`
    (NAME_preprocess -> NAME_engine -> NAME_calibrate) so gets its own limits, not the default's."""
    config = ensemble_config.get("config", ensemble_config)
    steps = config.get("ensemble_scheduling", {}).get("step", [])
    found = [next((step["model_name"] for step in steps if tensor in step.get("input_map", {})), None)
             for tensor in (QUERY, "TOKEN_IDS")]
    if None in found:
        raise ValueError(f"{config.get('name', '?')} is not an ensemble whose steps take QUERY and TOKEN_IDS")
    return found[0], found[1]


def _parameter(config: Mapping[str, Any], name: str, parse=int) -> Any:
    """A string parameter of a config in JSON form, parsed; the raw text (or None) where it does not parse."""
    entry = (config.get("parameters") or {}).get(name)
    raw = entry.get("string_value") if isinstance(entry, Mapping) else None
    try:
        return parse(str(raw).strip())
    except ValueError:
        return raw
