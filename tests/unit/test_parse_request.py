"""Every rejection of parse_request, with the exact message the client gets back."""

from __future__ import annotations

import re

import numpy as np
import pytest

from python_backends.contract import RequestLimits
from python_backends.errors import InvalidRequest
from python_backends.preprocess.request import RequestTensors, DecodedRequest, parse_request

LIMITS = RequestLimits(max_documents=3, max_document_bytes=10, max_query_bytes=20, max_model_len=256)


def texts(*values) -> np.ndarray:
    """A BYTES tensor as Triton's Python backend hands it over: object array, batch dimension 1."""
    return np.array([[v.encode() if isinstance(v, str) else v for v in values]], dtype=object)


def top(value) -> np.ndarray:
    return np.array([[value]], dtype=np.int32)


def parse(query=texts("query"), documents=texts("a", "b"), instruction=None, top_n=None, takes_instruction=False,
          max_tokens_per_doc=None):
    return parse_request(RequestTensors(query, documents, instruction, top_n, max_tokens_per_doc), LIMITS, takes_instruction)


def rejects(message: str, **kwargs) -> None:
    with pytest.raises(InvalidRequest, match=f"^{re.escape(message)}$"):
        parse(**kwargs)


def test_valid_request_is_decoded():
    request = parse(query=texts("café ?"), documents=texts("één", "b"))
    assert request == DecodedRequest("café ?", ["één", "b"], None, 2)
    assert parse(top_n=top(1)).top_n == 1
    assert parse(top_n=top(2)).top_n == 2
    with_instruction = parse(instruction=texts("find it"), takes_instruction=True)
    assert with_instruction.instruction == "find it"
    # numpy fixed-width bytes work as well as object arrays
    assert parse(query=np.array([[b"q"]]), documents=np.array([[b"x", b"yz"]])).documents == ["x", "yz"]


EMPTY = " is empty: it has no characters or tokens to score (only whitespace, control, invisible or special characters)"


def test_empty_query():
    rejects("QUERY" + EMPTY, query=texts(""))
    rejects("QUERY" + EMPTY, query=texts(" \n\t"))


@pytest.mark.parametrize(
    "blank",
    ["\x00", "\x00\x00\x00", "\u200b\u200c\u200d\u2060", "\ufeff", "\x01\x7f\x1b", "\u2028\u2029", "\u00a0\u3000", "\u202e \u200e\t\x00"],
)
def test_text_empty_after_normalisation_is_refused(blank):
    """Text of only NUL, zero-width or control characters is empty: refused, never scored."""
    roomy = RequestLimits(max_documents=3, max_document_bytes=100, max_query_bytes=100, max_model_len=256)

    def refused(message, **kwargs):
        tensors = RequestTensors(**{"query": texts("q"), "documents": texts("a"), **kwargs})
        with pytest.raises(InvalidRequest, match=f"^{re.escape(message)}$"):
            parse_request(tensors, roomy, takes_instruction=True)

    refused("QUERY" + EMPTY, query=texts(blank))
    refused("DOCUMENTS[1]" + EMPTY, documents=texts("a", blank))
    refused("INSTRUCTION" + EMPTY, instruction=texts(blank))
    visible = parse_request(RequestTensors(texts("q"), texts("a", blank + "b" + blank)), roomy, takes_instruction=False)
    assert visible.documents[1] == blank + "b" + blank  # visible text is kept as sent


def test_query_over_byte_limit():
    rejects("QUERY is 21 bytes, more than the limit of 20", query=texts("q" * 21))
    parse(query=texts("q" * 20))


def test_zero_documents():
    rejects("DOCUMENTS is empty: send at least one document", documents=np.empty((1, 0), dtype=object))


def test_too_many_documents():
    rejects("DOCUMENTS holds 4 documents, more than max_documents=3", documents=texts("a", "b", "c", "d"))
    parse(documents=texts("a", "b", "c"))


def test_empty_document():
    rejects("DOCUMENTS[1]" + EMPTY, documents=texts("a", "", "c"))
    rejects("DOCUMENTS[0]" + EMPTY, documents=texts("   "))


def test_document_over_byte_limit_counts_bytes_not_characters():
    rejects("DOCUMENTS[2] is 11 bytes, more than the limit of 10", documents=texts("a", "b", "x" * 11))
    rejects("DOCUMENTS[0] is 12 bytes, more than the limit of 10", documents=texts("é" * 6))  # 6 characters
    parse(documents=texts("é" * 5))


def test_invalid_utf8():
    rejects("DOCUMENTS[1] is not valid UTF-8 (byte 3)", documents=texts("a", b"ok \xff"))
    rejects("QUERY is not valid UTF-8 (byte 0)", query=texts(b"\xc3("))


def test_top_n_out_of_range():
    rejects("TOP_N must be between 1 and the number of documents (2), got 0", top_n=top(0))
    rejects("TOP_N must be between 1 and the number of documents (2), got 3", top_n=top(3))
    rejects("TOP_N must be between 1 and the number of documents (2), got -1", top_n=top(-1))


def test_instruction_on_a_model_that_takes_none():
    rejects(
        "INSTRUCTION is not supported by this model (it takes no instruction)",
        instruction=texts("find it"),
        takes_instruction=False,
    )
    rejects("INSTRUCTION" + EMPTY, instruction=texts(""), takes_instruction=True)


def test_max_tokens_per_doc():
    assert parse().max_tokens_per_doc is None
    assert parse(max_tokens_per_doc=top(7)).max_tokens_per_doc == 7
    rejects("MAX_TOKENS_PER_DOC must be at least 1, got 0", max_tokens_per_doc=top(0))
    rejects("MAX_TOKENS_PER_DOC must be at least 1, got -5", max_tokens_per_doc=top(-5))
    rejects("MAX_TOKENS_PER_DOC must hold exactly one value, got 2", max_tokens_per_doc=np.array([[1, 2]], dtype=np.int32))
    rejects("MAX_TOKENS_PER_DOC must have shape [1, n] (one query per request), got [1]", max_tokens_per_doc=np.array([3], dtype=np.int32))
    rejects("MAX_TOKENS_PER_DOC must be INT32, got float32", max_tokens_per_doc=np.array([[3.0]], dtype=np.float32))


def test_wrong_shapes():
    rejects("QUERY must have shape [1, n] (one query per request), got [2, 1]", query=np.array([[b"a"], [b"b"]], dtype=object))
    rejects("QUERY must have shape [1, n] (one query per request), got [1]", query=np.array([b"a"], dtype=object))
    rejects("QUERY must hold exactly one string, got 2", query=texts("a", "b"))
    rejects("DOCUMENTS must have shape [1, n] (one query per request), got [2]", documents=np.array([b"a", b"b"], dtype=object))
    rejects("DOCUMENTS must have shape [1, n] (one query per request), got [2, 1]", documents=np.array([[b"a"], [b"b"]], dtype=object))
    rejects("INSTRUCTION must hold exactly one string, got 2", instruction=texts("a", "b"), takes_instruction=True)
    rejects("TOP_N must hold exactly one value, got 2", top_n=np.array([[1, 2]], dtype=np.int32))
    rejects("TOP_N must have shape [1, n] (one query per request), got [1]", top_n=np.array([1], dtype=np.int32))
    rejects("TOP_N must be INT32, got float64", top_n=np.array([[1.0]]))


def _config(**values: str) -> dict:
    return {"name": "m", "parameters": {key: {"string_value": value} for key, value in values.items()}}


def test_the_largest_admitted_request_counts_what_triton_http_counts():
    """1024 documents of 64 KiB (each with its 4-byte length), query and instruction of 4 KiB, two INT32: just over
    Triton's default --http-max-input-size (64 MiB), so the deployments pass the limits' own size, in whole MiB."""
    limits = RequestLimits(1024, 65536, 4096, 8192)
    assert limits.largest_request_bytes == 1024 * 65540 + 2 * 4100 + 8 == 67121168 > 64 << 20
    assert limits.http_max_input_size == 65 << 20
    assert RequestLimits(4, 1000, 50, 256).http_max_input_size == 1 << 20


def test_limits_come_from_the_model_configs():
    preprocess = _config(max_documents="64", max_document_bytes="1000", max_query_bytes="50")
    engine = _config(engine_args='{"model": "m", "max_model_len": 256}')
    assert RequestLimits.from_model_configs(preprocess, engine) == RequestLimits(64, 1000, 50, 256)
    with pytest.raises(ValueError, match="'max_documents' must be >= 1, got 0"):
        RequestLimits.from_model_configs(_config(max_documents="0", max_document_bytes="1", max_query_bytes="1"), engine)