"""A failed request's kind, as the steps write it and the one reader (python_backends.contract.server_error) gives it
back to the client, the gateway and the health check: through Triton's status, the ensemble's prefix and the tag."""

from __future__ import annotations

import pytest
from tritonclient.utils import InferenceServerException

from python_backends.contract import ErrorKind, ServerError, server_error
from python_backends.engine.deadline import ClientGone, DeadlineExceeded
from python_backends.engine.step import EngineDead
from python_backends.engine.stopping import ServerStopping
from python_backends.errors import InvalidRequest, Overloaded
from python_backends.triton_io import error_response
from reranker_client import is_retryable
from tests.unit.test_engine_fairness import PB_UTILS

# how tritonclient's gRPC client reports the codes a step answers with
GRPC_STATUS = {"INVALID_ARG": "StatusCode.INVALID_ARGUMENT", "UNAVAILABLE": "StatusCode.UNAVAILABLE",
               "CANCELLED": "StatusCode.CANCELLED", "INTERNAL": "StatusCode.INTERNAL"}


def through_the_ensemble(exc: BaseException) -> tuple[str, str]:
    """What a client gets for `exc` raised in a step: its status, and the message after the ensemble's prefix."""
    error = error_response(PB_UTILS, exc).error
    return GRPC_STATUS[error.code], "in ensemble 'reranker', " + error.message


@pytest.mark.parametrize("exc,status,kind,field,index", [
    (InvalidRequest("DOCUMENTS[3] is 70000 bytes, more than the limit of 65536", "DOCUMENTS[3]"),
     "StatusCode.INVALID_ARGUMENT", ErrorKind.INVALID, "DOCUMENTS", 3),
    (InvalidRequest("QUERY is empty: nothing to score", "QUERY"), "StatusCode.INVALID_ARGUMENT", ErrorKind.INVALID,
     "QUERY", None),
    (InvalidRequest("SEQUENCE_LENGTHS (3) and TOKEN_IDS (4) disagree"), "StatusCode.INVALID_ARGUMENT",
     ErrorKind.INVALID, None, None),
    (Overloaded("rerank_preprocess is over its work budget: retry later"), "StatusCode.UNAVAILABLE",
     ErrorKind.OVERLOADED, None, None),
    (DeadlineExceeded("the request's timeout passed in rerank_engine (500 ms)"), "StatusCode.UNAVAILABLE",
     ErrorKind.DEADLINE, None, None),
    (ClientGone("request cancelled: its client left"), "StatusCode.CANCELLED", ErrorKind.CANCELLED, None, None),
    (EngineDead("vLLM's engine core died"), "StatusCode.UNAVAILABLE", ErrorKind.ENGINE_DEAD, None, None),
    (ServerStopping("the server is stopping: retry on another replica"), "StatusCode.UNAVAILABLE",
     ErrorKind.UNAVAILABLE, None, None),
    (KeyError("boom"), "StatusCode.INTERNAL", ErrorKind.INTERNAL, None, None),
])
def test_each_step_error_reads_back_as_its_kind_and_input(exc, status, kind, field, index):
    answered_status, message = through_the_ensemble(exc)
    read = server_error(answered_status, message)
    assert (answered_status, read.kind, read.field, read.index) == (status, kind, field, index)
    assert read.text == (str(exc) if kind is not ErrorKind.INTERNAL else "internal error: KeyError: 'boom'")
    assert server_error(answered_status, read.message()) == read  # the wire form reads back the same


@pytest.mark.parametrize("status,message,kind", [
    ("StatusCode.UNAVAILABLE", "in ensemble 'reranker', Request timeout expired", ErrorKind.DEADLINE),
    ("StatusCode.UNAVAILABLE", "Exceeds maximum queue size", ErrorKind.OVERLOADED),
    ("StatusCode.RESOURCE_EXHAUSTED", "Exceeds maximum queue size", ErrorKind.OVERLOADED),
    ("StatusCode.UNAVAILABLE", "in ensemble 'reranker', Stub process 'rerank_engine_0_0' is not healthy.",
     ErrorKind.ENGINE_DEAD),
    ("StatusCode.INTERNAL", "Stub process 'rerank_engine_0_0' is not healthy.", ErrorKind.INTERNAL),
    ("StatusCode.UNAVAILABLE", "Server is stopping", ErrorKind.UNAVAILABLE),
    ("503", "failed to connect", ErrorKind.UNAVAILABLE),
    ("StatusCode.NOT_FOUND", "Request for unknown model: 'reranker' is not found", ErrorKind.NOT_LOADED),
    ("StatusCode.DEADLINE_EXCEEDED", "Deadline Exceeded", ErrorKind.DEADLINE),
    ("504", "timed out", ErrorKind.DEADLINE),
    ("StatusCode.CANCELLED", "Locally cancelled by application!", ErrorKind.CANCELLED),
    ("400", "unexpected datatype TYPE_INT64 for inference input 'TOP_N', expecting TYPE_INT32", ErrorKind.INVALID),
    ("StatusCode.UNKNOWN", "something else", ErrorKind.INTERNAL),
])
def test_tritons_own_errors_are_read_by_status_and_its_own_words(status, message, kind):
    read = server_error(status, message)
    assert read.kind is kind and read.field is None
    assert not read.text.startswith("in ensemble")


def test_only_a_busy_or_unavailable_server_or_a_dead_engine_is_worth_a_retry():
    assert {kind for kind in ErrorKind if kind.retryable} == {
        ErrorKind.OVERLOADED, ErrorKind.ENGINE_DEAD, ErrorKind.UNAVAILABLE}
    for exc in (Overloaded("busy: retry later"), EngineDead("dead"), DeadlineExceeded("late"),
                InvalidRequest("QUERY is empty", "QUERY")):
        status, message = through_the_ensemble(exc)
        assert is_retryable(InferenceServerException(message, status=status)) == exc.kind.retryable


def test_a_document_error_moves_to_the_callers_numbering_and_names_its_input_first():
    read = ServerError(ErrorKind.INVALID, "DOCUMENTS[1] is empty: no text", "DOCUMENTS", 1)
    assert read.moved(6) == ServerError(ErrorKind.INVALID, "DOCUMENTS[7] is empty: no text", "DOCUMENTS", 7)
    assert read.moved(6).message() == "[invalid DOCUMENTS[7]] DOCUMENTS[7] is empty: no text"
    assert read.detail == " is empty: no text"
    with pytest.raises(ValueError, match="starts with the input's name 'QUERY'"):
        InvalidRequest("the query is empty", "QUERY")
