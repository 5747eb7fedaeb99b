"""The one rerank job every API family shares: resolve the model name, check the call against the gateway's
policy, call Triton through `AsyncRerankClient`, and turn its failures into `ApiError`s."""

from __future__ import annotations

from dataclasses import dataclass

from python_backends.contract import INT32_MAX, ServerLimits
from reranker_client import AsyncRerankClient, RerankResponse

from .errors import ApiError, triton_error
from .settings import Settings


@dataclass(frozen=True)
class RerankCall:
    query: str
    texts: list[str]
    top_n: int | None = None  # None: every document; larger than the number of documents: every document
    instruction: str | None = None
    max_tokens_per_doc: int | None = None  # None: the model's max_model_len


def per_document_cap(max_tokens_per_doc: int | None, truncate_prompt_tokens: int | None) -> int | None:
    """MAX_TOKENS_PER_DOC from Cohere's `max_tokens_per_doc` and vLLM's `truncate_prompt_tokens` (-1: the
    model's limit). The query and template are never cut here, so both cap the document's tokens; given both,
    the smaller wins. Values beyond INT32 are the model's limit anyway."""
    caps = []
    if max_tokens_per_doc is not None:
        if max_tokens_per_doc < 1:
            raise ApiError("invalid", f"max_tokens_per_doc must be at least 1, got {max_tokens_per_doc}",
                           param="max_tokens_per_doc")
        caps.append(max_tokens_per_doc)
    if truncate_prompt_tokens is not None and truncate_prompt_tokens != -1:
        if truncate_prompt_tokens < 1:
            raise ApiError("invalid", f"truncate_prompt_tokens must be -1 or at least 1, got {truncate_prompt_tokens}",
                           param="truncate_prompt_tokens")
        caps.append(truncate_prompt_tokens)
    return min(min(caps), INT32_MAX) if caps else None


class Reranker:
    def __init__(self, settings: Settings, client: AsyncRerankClient) -> None:
        self.settings = settings
        self.client = client

    def model_name(self, requested: str | None) -> str:
        """The served name the response reports: the caller's, when it is one of ours, else the default."""
        if requested is None or requested == "":
            return self.settings.triton_model
        if requested not in self.settings.models:
            served = ", ".join(self.settings.models)
            raise ApiError("not_found", f"model {requested!r} is not served here; served: {served}", param="model")
        return requested

    async def limits(self) -> ServerLimits:
        try:
            return await self.client.limits()
        except Exception as error:
            raise triton_error(error) from error

    async def rerank(self, call: RerankCall, return_documents: bool = False) -> RerankResponse:
        n = len(call.texts)
        if n == 0:
            raise ApiError("empty", "documents is empty: send at least one document", param="documents")
        if n > self.settings.max_documents:
            raise ApiError("invalid", f"documents holds {n} documents, more than the limit of "
                           f"{self.settings.max_documents}", param="documents")
        # Like Cohere, Jina and vLLM: a top_n above the number of documents returns all of them.
        top_n = call.top_n if call.top_n is None or call.top_n <= n else n
        try:
            return await self.client.rerank(
                call.query, call.texts, top_n=top_n, instruction=call.instruction,
                return_documents=return_documents, max_tokens_per_doc=call.max_tokens_per_doc,
            )
        except Exception as error:
            raise triton_error(error) from error
