"""Check one rerank request's tensors against the request limits (contract.RequestLimits) and decode its text.

Every rejection is an `InvalidRequest` whose message goes back to the client as the Triton error,
so it names the tensor and the limit. Triton itself already rejects missing required tensors and
wrong dtypes before a model runs.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from dataclasses import dataclass

import numpy as np

from ..contract import RequestLimits
from ..ranking import ranking_length
from ..errors import InvalidRequest


@dataclass(frozen=True)
class RequestTensors:
    """The tensors of one request as Triton hands them over (None: an optional input not sent)."""

    query: np.ndarray
    documents: np.ndarray
    instruction: np.ndarray | None = None
    top_n: np.ndarray | None = None
    max_tokens_per_doc: np.ndarray | None = None


@dataclass(frozen=True)
class DecodedRequest:
    """One request's tensors decoded and checked: the text and numbers the encoder takes."""

    query: str
    documents: list[str]
    instruction: str | None
    top_n: int
    max_tokens_per_doc: int | None = None  # the client's own cap on document tokens (MAX_TOKENS_PER_DOC)


# Characters that carry nothing a tokenizer keeps: whitespace, control (NUL included), format (zero-width space,
# joiners, BOM, bidi marks) and the line/paragraph separators. One regex class built at import, so the check runs
# in C: a 64 KB document of blanks costs microseconds, not a Python loop per character.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
_VISIBLE = re.compile(
    "[^"
    + "".join(
        re.escape(chr(code))
        for code in range(sys.maxunicode + 1)
        if chr(code).isspace() or unicodedata.category(chr(code)) in _INVISIBLE_CATEGORIES
    )
    + "]"
)


def _is_blank(text: str) -> bool:
    return _VISIBLE.search(text) is None


def empty_text_error(name: str) -> InvalidRequest:
    """One message for text with nothing to score, found by characters here or by tokens in the encoder."""
    return InvalidRequest(f"{name} is empty: it has no characters or tokens to score (only whitespace, control, "
                          "invisible or special characters)", name)


def _one_row(name: str, array: np.ndarray) -> np.ndarray:
    """Each request carries one query: batch dimension 1, values in the last dimension."""
    if array.ndim != 2 or array.shape[0] != 1:
        raise InvalidRequest(f"{name} must have shape [1, n] (one query per request), got {list(array.shape)}", name)
    return array[0]


def _text(name: str, value: object, max_bytes: int) -> str:
    raw = value if isinstance(value, bytes) else str(value).encode()
    if len(raw) > max_bytes:
        raise InvalidRequest(f"{name} is {len(raw)} bytes, more than the limit of {max_bytes}", name)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"{name} is not valid UTF-8 (byte {exc.start})", name) from None
    if _is_blank(text):
        raise empty_text_error(name)
    return text


def _single_text(name: str, array: np.ndarray, max_bytes: int) -> str:
    row = _one_row(name, array)
    if row.shape[0] != 1:
        raise InvalidRequest(f"{name} must hold exactly one string, got {row.shape[0]}", name)
    return _text(name, row[0], max_bytes)


def _single_int(name: str, array: np.ndarray) -> int:
    row = _one_row(name, array)
    if row.shape[0] != 1:
        raise InvalidRequest(f"{name} must hold exactly one value, got {row.shape[0]}", name)
    if not np.issubdtype(row.dtype, np.integer):
        raise InvalidRequest(f"{name} must be INT32, got {row.dtype}", name)
    return int(row[0])


def document_sizes(tensors: RequestTensors, limits: RequestLimits) -> list[int]:
    """Each document's UTF-8 byte length, checked against the limits without decoding (Triton hands BYTES tensors
    over as numpy object arrays of `bytes`, whose lengths are known)."""
    _one_row("QUERY", tensors.query)  # a batch of queries is told as such, in the contract's order
    doc_row = _one_row("DOCUMENTS", tensors.documents)
    if doc_row.shape[0] == 0:
        raise InvalidRequest("DOCUMENTS is empty: send at least one document", "DOCUMENTS")
    if doc_row.shape[0] > limits.max_documents:
        raise InvalidRequest(f"DOCUMENTS holds {doc_row.shape[0]} documents, more than max_documents={limits.max_documents}",
                             "DOCUMENTS")
    sizes = [len(value) if isinstance(value, bytes) else len(str(value).encode()) for value in doc_row]
    for index, size in enumerate(sizes):
        if size > limits.max_document_bytes:
            raise InvalidRequest(f"DOCUMENTS[{index}] is {size} bytes, more than the limit of {limits.max_document_bytes}",
                                 f"DOCUMENTS[{index}]")
    return sizes


def request_cap(tensors: RequestTensors) -> int | None:
    """MAX_TOKENS_PER_DOC, checked (None: not sent)."""
    cap = None if tensors.max_tokens_per_doc is None else _single_int("MAX_TOKENS_PER_DOC", tensors.max_tokens_per_doc)
    if cap is not None and cap < 1:
        raise InvalidRequest(f"MAX_TOKENS_PER_DOC must be at least 1, got {cap}", "MAX_TOKENS_PER_DOC")
    return cap


def parse_request(tensors: RequestTensors, limits: RequestLimits, takes_instruction: bool) -> DecodedRequest:
    """Validate and decode, in the tensor contract's order (QUERY, DOCUMENTS, INSTRUCTION, TOP_N,
    MAX_TOKENS_PER_DOC); arrays are the BYTES/INT32 numpy arrays Triton hands the Python backend."""
    query_text = _single_text("QUERY", tensors.query, limits.max_query_bytes)
    document_sizes(tensors, limits)  # shape, count and byte lengths, as admission priced them
    docs = [_text(f"DOCUMENTS[{i}]", value, limits.max_document_bytes) for i, value in enumerate(tensors.documents[0])]

    instruction_text = None
    if tensors.instruction is not None:
        if not takes_instruction:
            raise InvalidRequest("INSTRUCTION is not supported by this model (it takes no instruction)", "INSTRUCTION")
        instruction_text = _single_text("INSTRUCTION", tensors.instruction, limits.max_query_bytes)

    top_n = None if tensors.top_n is None else _single_int("TOP_N", tensors.top_n)
    limit = ranking_length(top_n, len(docs))
    return DecodedRequest(query_text, docs, instruction_text, limit, request_cap(tensors))
