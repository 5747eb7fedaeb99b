"""Errors of the gateway: one `ApiError` with a kind, and each API family's way of answering it.

Kinds: `invalid` (bad input; the message names the caller's field), `empty` (no documents), `not_found` (unknown
model), `unauthorized` (no or a wrong API key), `too_large` (the body's bytes, or its weight: gateway.bodies),
`body_timeout` (the body came too slowly), `header_too_large` and `header_timeout` (the request line and headers,
answered before any route: Cohere's shape only), `overloaded` (a step refused it as past its work budget, or the
gateway's body budget is full), `unavailable` (Triton unreachable or stopping),
`timeout`, `backend` (Triton failed the request). One status per kind. Cohere, vLLM and Jina agree on the statuses
of these and their clients read different keys of one body, so the `/v1/rerank`, `/v2/rerank`, vLLM/Jina `/rerank`
and `/score` answers carry all of them: `message` (Cohere), `error.message` / `error.param` (vLLM, OpenAI style) and
`detail` (Jina, FastAPI). TEI's `/rerank` answers TEI's own `{"error", "error_type"}` with TEI's statuses.

Messages about Triton itself are fixed texts: its addresses and internals go to the log, not to the caller; a
value the caller sent is echoed at most once and cut (`shown`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from http import HTTPStatus
from typing import Any, Protocol

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from tritonclient.utils import InferenceServerException

from python_backends.contract import ErrorKind, ServerError
from python_backends.errors import InvalidRequest
from reranker_client import CalibrationChangedError, is_retryable
from reranker_client.server_errors import read_error

from .engine_watch import EngineLost

log = logging.getLogger("gateway")


class ApiErrorKind(StrEnum):
    """What a call is refused or failed for: each kind has its status and error type per API (COMPATIBLE, TEI)."""

    INVALID = "invalid"
    EMPTY = "empty"
    NOT_FOUND = "not_found"
    UNAUTHORIZED = "unauthorized"
    TOO_LARGE = "too_large"
    BODY_TIMEOUT = "body_timeout"
    HEADER_TOO_LARGE = "header_too_large"
    HEADER_TIMEOUT = "header_timeout"
    OVERLOADED = "overloaded"
    UNAVAILABLE = "unavailable"
    TIMEOUT = "timeout"
    BACKEND = "backend"


class ApiError(Exception):
    def __init__(self, kind: ApiErrorKind, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.param = kind, message, param


@dataclass(frozen=True)
class Answer:
    status: int
    type: str


# Cohere / vLLM / Jina
COMPATIBLE = {
    ApiErrorKind.INVALID: Answer(400, "BadRequestError"),
    ApiErrorKind.EMPTY: Answer(400, "BadRequestError"),
    ApiErrorKind.NOT_FOUND: Answer(404, "NotFoundError"),
    ApiErrorKind.UNAUTHORIZED: Answer(401, "AuthenticationError"),
    ApiErrorKind.TOO_LARGE: Answer(413, "PayloadTooLargeError"),
    ApiErrorKind.BODY_TIMEOUT: Answer(408, "RequestTimeoutError"),
    ApiErrorKind.HEADER_TOO_LARGE: Answer(431, "RequestHeaderFieldsTooLargeError"),
    ApiErrorKind.HEADER_TIMEOUT: Answer(408, "RequestTimeoutError"),
    ApiErrorKind.OVERLOADED: Answer(503, "ServiceUnavailableError"),
    ApiErrorKind.UNAVAILABLE: Answer(503, "ServiceUnavailableError"),
    ApiErrorKind.TIMEOUT: Answer(504, "GatewayTimeoutError"),
    ApiErrorKind.BACKEND: Answer(502, "BadGatewayError"),
}
# text-embeddings-inference (router/src/lib.rs ErrorType and its StatusCode mapping)
TEI = {
    ApiErrorKind.INVALID: Answer(422, "Validation"),
    ApiErrorKind.EMPTY: Answer(400, "Empty"),
    ApiErrorKind.NOT_FOUND: Answer(422, "Validation"),
    ApiErrorKind.UNAUTHORIZED: Answer(401, "Unauthorized"),
    ApiErrorKind.TOO_LARGE: Answer(413, "PayloadTooLarge"),
    ApiErrorKind.BODY_TIMEOUT: Answer(408, "Validation"),
    ApiErrorKind.OVERLOADED: Answer(429, "Overloaded"),
    ApiErrorKind.UNAVAILABLE: Answer(503, "Unhealthy"),
    ApiErrorKind.TIMEOUT: Answer(424, "Backend"),
    ApiErrorKind.BACKEND: Answer(424, "Backend"),
}
RETRY_AFTER_S = 1
SHOWN_CHARS = 64
FIXED_MESSAGES = {
    ApiErrorKind.OVERLOADED: f"the reranker server is overloaded: retry after {RETRY_AFTER_S} s",
    ApiErrorKind.UNAVAILABLE: f"the reranker server is unavailable: retry after {RETRY_AFTER_S} s",
    ApiErrorKind.TIMEOUT: "the reranker server did not answer in time",
    ApiErrorKind.BACKEND: "the reranker server failed the request",
}


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """A caller's value quoted in a message, cut to `limit` characters."""
    return repr(value) if len(value) <= limit else f"{value[:limit]!r}... ({len(value)} characters)"


def _headers(kind: ApiErrorKind) -> dict[str, str] | None:
    return {"Retry-After": str(RETRY_AFTER_S)} if kind in (ApiErrorKind.OVERLOADED, ApiErrorKind.UNAVAILABLE) else None


def _compatible_body(message: str, error_type: str, param: str | None, status: int) -> dict[str, Any]:
    return {
        "message": message,
        "detail": message,
        "error": {"message": message, "type": error_type, "param": param, "code": status},
    }


def compatible_response(error: ApiError) -> JSONResponse:
    answer = COMPATIBLE[error.kind]
    body = _compatible_body(error.message, answer.type, error.param, answer.status)
    return JSONResponse(body, status_code=answer.status, headers=_headers(error.kind))


def tei_response(error: ApiError) -> JSONResponse:
    answer = TEI[error.kind]
    return JSONResponse({"error": error.message, "error_type": answer.type}, answer.status, _headers(error.kind))


def is_tei_body(body: Any) -> bool:
    """TEI's /rerank body names its documents `texts`; vLLM's and Jina's name them `documents`."""
    return isinstance(body, Mapping) and "texts" in body


def _server_error(kind: ApiErrorKind, error: BaseException) -> ApiError:
    log.warning("Triton call failed (%s): %s", kind, error)
    return ApiError(kind, FIXED_MESSAGES[kind])


# The gateway's kind for each kind of server error (python_backends.contract.ErrorKind).
SERVER_KINDS = {
    ErrorKind.INVALID: ApiErrorKind.INVALID,
    ErrorKind.OVERLOADED: ApiErrorKind.OVERLOADED,
    ErrorKind.DEADLINE: ApiErrorKind.TIMEOUT,
    ErrorKind.CANCELLED: ApiErrorKind.UNAVAILABLE,
    ErrorKind.ENGINE_DEAD: ApiErrorKind.UNAVAILABLE,
    ErrorKind.UNAVAILABLE: ApiErrorKind.UNAVAILABLE,
    ErrorKind.NOT_LOADED: ApiErrorKind.UNAVAILABLE,
    ErrorKind.INTERNAL: ApiErrorKind.BACKEND,
}


class CallerNames(Protocol):
    """What turns the server's refusal into the caller's words (gateway.limits.Fields, per route)."""

    def caller_error(self, error: ServerError) -> ApiError: ...


def triton_error(error: Exception, names: CallerNames | None = None) -> ApiError:
    """The ApiError for an exception raised by the client while talking to Triton; only a refusal of the
    request (`invalid`) keeps the server's words, in the caller's field names when `names` are given."""
    if isinstance(error, InferenceServerException):
        read = read_error(error)
        if read.kind is ErrorKind.INVALID:
            return names.caller_error(read) if names is not None else ApiError(ApiErrorKind.INVALID, read.text)
        return _server_error(SERVER_KINDS[read.kind], error)
    if isinstance(error, (CalibrationChangedError, EngineLost)) or is_retryable(error):
        return _server_error(ApiErrorKind.UNAVAILABLE, error)
    if isinstance(error, InvalidRequest) and names is not None:  # the client's check of the contract (TOP_N)
        return names.caller_error(error.server_error())
    if isinstance(error, (ValueError, TypeError)):  # the client's own checks (top_n, INT32 range)
        return ApiError(ApiErrorKind.INVALID, str(error))
    log.exception("unexpected error while calling Triton")
    return ApiError(ApiErrorKind.BACKEND, FIXED_MESSAGES[ApiErrorKind.BACKEND])


def _field(location: Sequence[Any]) -> str:
    """`documents[1].text` from pydantic's ("body", "documents", 1, "text"), without union-branch tags."""
    name = ""
    for part in location[1:] if location and location[0] == "body" else location:
        if isinstance(part, int):
            name += f"[{part}]"
        elif not any(mark in str(part) for mark in ("[", "(", "function-")) and part not in ("str", "dict", "tei", "rerank"):
            name += f".{part}" if name else str(part)
    return name or "body"


def schema_error(error: RequestValidationError) -> ApiError:
    """The first problem of a body that does not fit the request schema, naming the field."""
    first = error.errors()[0] if error.errors() else {"loc": (), "msg": "invalid body"}
    field = "body" if first.get("type") == "json_invalid" else _field(first.get("loc", ()))
    return ApiError(ApiErrorKind.INVALID, f"{field}: {first.get('msg', 'invalid')}", param=field)


async def handle_api_error(request: Request, error: ApiError) -> JSONResponse:
    """Cohere / vLLM / Jina answers; TEI's handler answers its own errors (gateway.routes.tei)."""
    return compatible_response(error)


async def handle_http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
    """FastAPI's own refusals (a body that is not JSON, an unknown path or method) in the same error body."""
    message = str(error.detail)
    body = _compatible_body(message, HTTPStatus(error.status_code).phrase, None, error.status_code)
    return JSONResponse(body, status_code=error.status_code, headers=error.headers)


async def handle_schema_error(request: Request, error: RequestValidationError) -> JSONResponse:
    api_error = schema_error(error)
    if request.url.path == "/rerank" and is_tei_body(error.body):
        return tei_response(api_error)
    return compatible_response(api_error)
