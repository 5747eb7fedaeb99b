"""A call checked against the server's request limits before Triton sees it, and the server's own refusals, both
in the caller's field names (`documents[3]`, `texts[3]`, `text_2[3]`, `query`), never the tensors'.

The limits are the server's (`RequestLimits`, read from its model configuration by the client); the gateway keeps
no copy. The order of the checks is fixed, so one body always gets the same error: the query's size, then the
documents (none, too many, each one's size), then the instruction's size. The server checks what only it can
(text with nothing to score, an instruction the model does not take); its message is reworded here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from python_backends import contract
from python_backends.contract import RequestLimits, ServerError

from .errors import ApiError, ApiErrorKind


@dataclass(frozen=True)
class Fields:
    """The caller's names for the ensemble's inputs."""

    query: str = "query"
    documents: str = "documents"
    # the caller's index of each document sent, where it differs from the position in the request (/score pairs)
    positions: Sequence[int] | None = None

    def document(self, i: int) -> str:
        return f"{self.documents}[{i if self.positions is None else self.positions[i]}]"

    def tensor(self, name: str, index: int | None = None) -> str:
        if name == contract.DOCUMENTS:
            return self.documents if index is None else self.document(index)
        return {contract.QUERY: self.query}.get(name, name.lower())  # INSTRUCTION, TOP_N, MAX_TOKENS_PER_DOC

    def caller_error(self, error: ServerError) -> ApiError:
        """The server's refusal of a request (`DOCUMENTS[1] is empty: ...`) in the caller's words (`texts[1] is
        empty: ...`), with `param` the field it is about."""
        if error.field is None:
            return ApiError(ApiErrorKind.INVALID, error.text)
        name = self.tensor(error.field, error.index)
        return ApiError(ApiErrorKind.INVALID, name + error.detail, param=name)


RERANK_FIELDS = Fields()  # Cohere, vLLM, Jina
TEI_FIELDS = Fields(documents="texts")


def _too_large(name: str, text: str, limit: int) -> ApiError | None:
    size = len(text.encode("utf-8"))
    if size <= limit:
        return None
    return ApiError(ApiErrorKind.INVALID, f"{name} is {size} bytes, more than the limit of {limit}", param=name)


def check_call(query: str, texts: Sequence[str], instruction: str | None, limits: RequestLimits,
               max_documents: int, names: Fields) -> None:
    """Raise the first ApiError of the call, in the fixed order; `max_documents` is the gateway's per-call
    policy (a call over the server's own max_documents is split)."""
    if error := _too_large(names.query, query, limits.max_query_bytes):
        raise error
    if not texts:
        raise ApiError(ApiErrorKind.EMPTY,
                       f"{names.documents} is empty: send at least one document", param=names.documents)
    if len(texts) > max_documents:
        raise ApiError(ApiErrorKind.INVALID, f"{names.documents} holds {len(texts)} documents, more than the limit of "
                       f"{max_documents}", param=names.documents)
    for i, text in enumerate(texts):
        if error := _too_large(names.document(i), text, limits.max_document_bytes):
            raise error
    if instruction is not None and (error := _too_large("instruction", instruction, limits.max_query_bytes)):
        raise error
