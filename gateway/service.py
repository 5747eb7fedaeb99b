"""The one rerank job every API family shares: resolve the model name, check the call against that model's limits
and the gateway's policy, call its Triton ensemble through `AsyncRerankClient`, turn its failures into `ApiError`s in
the caller's field names, and offer the default model's answered calls to the shadow candidate (gateway.shadow)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from python_backends.contract import INT32_MAX, RequestLimits
from reranker_client import AsyncRerankClient, CalibrationChangedError, RerankResponse
from reranker_client.healthcheck import answer_error, engine_dead

from .engine_watch import EngineWatch
from .errors import ApiError, ApiErrorKind, shown, triton_error
from .limits import RERANK_FIELDS, Fields, check_call
from .models import TritonModels
from .settings import Settings
from .shadow import Shadow, ShadowCall
from .upstream import UpstreamLatency

log = logging.getLogger("gateway")


@dataclass(frozen=True)
class RerankCall:
    query: str
    texts: list[str]
    top_n: int | None = None  # None: every document; larger than the number of documents: every document
    instruction: str | None = None
    max_tokens_per_doc: int | None = None  # None: the model's max_model_len
    names: Fields = RERANK_FIELDS  # the caller's names of the query and the documents
    model: str | None = None  # the served name (Reranker.model_name); None: the default model


def per_document_cap(max_tokens_per_doc: int | None, truncate_prompt_tokens: int | None) -> int | None:
    """MAX_TOKENS_PER_DOC from Cohere's `max_tokens_per_doc` and vLLM's `truncate_prompt_tokens` (-1: the
    model's limit). The query and template are never cut here, so both cap the document's tokens; given both,
    the smaller wins. Values beyond INT32 are the model's limit anyway."""
    caps = []
    if max_tokens_per_doc is not None:
        if max_tokens_per_doc < 1:
            raise ApiError(ApiErrorKind.INVALID, f"max_tokens_per_doc must be at least 1, got {max_tokens_per_doc}",
                           param="max_tokens_per_doc")
        caps.append(max_tokens_per_doc)
    if truncate_prompt_tokens is not None and truncate_prompt_tokens != -1:
        if truncate_prompt_tokens < 1:
            raise ApiError(ApiErrorKind.INVALID,
                           f"truncate_prompt_tokens must be -1 or at least 1, got {truncate_prompt_tokens}",
                           param="truncate_prompt_tokens")
        caps.append(truncate_prompt_tokens)
    return min(min(caps), INT32_MAX) if caps else None


READY_FOR_S = 1.0  # how long one readiness check answers /health: a probe pair per second at most


class Reranker:
    def __init__(self, settings: Settings, models: TritonModels, latency: UpstreamLatency,
                 shadow: Shadow | None = None) -> None:
        self.settings = settings
        self.models = models
        self.latency = latency
        self.shadow = shadow
        self._watches: dict[str, EngineWatch] = {}  # by Triton ensemble
        self._readiness: tuple[float, asyncio.Task[bool]] | None = None  # the last check: when it started, its answer

    async def client(self, model: str | None = None) -> AsyncRerankClient:
        """The client of the ensemble that answers the served name `model` (None: the default)."""
        return await self.models.client(self.settings.triton_name(model or self.settings.triton_model))

    def model_name(self, requested: str | None) -> str:
        """The served name the response reports: the caller's, when it is one of ours, else the default."""
        if requested is None or requested == "":
            return self.settings.triton_model
        if requested not in self.settings.models:
            served = ", ".join(self.settings.models)
            raise ApiError(ApiErrorKind.NOT_FOUND, f"model {shown(requested)} is not served here; served: {served} "
                           "(GET /health lists them)", param="model")
        return requested

    async def limits(self, model: str | None = None) -> RequestLimits:
        try:
            return await (await self.client(model)).limits()
        except Exception as error:
            raise triton_error(error) from error

    async def is_ready(self) -> bool:
        """Triton ready, the model loaded and its ensemble answering, within health_timeout_s (a frozen server is not
        ready). Triton 2.51 keeps a Python model READY after its stub died, so a probe pair goes through the ensemble
        too: an error answer is not ready, no answer within half the deadline is a busy server, which is. /health
        needs no key, so the callers of one READY_FOR_S share one check: a flood of /health costs Triton one probe
        pair per READY_FOR_S, not one per call."""
        now = asyncio.get_running_loop().time()
        if self._readiness is None or (self._readiness[1].done() and now - self._readiness[0] >= READY_FOR_S):
            self._readiness = (now, asyncio.ensure_future(self._checked_ready()))
        return await asyncio.shield(self._readiness[1])  # a caller that leaves does not cancel the others' check

    async def _checked_ready(self) -> bool:
        try:
            return await asyncio.wait_for(self._default_ready(), self.settings.health_timeout_s)
        except TimeoutError:
            return False

    async def _default_ready(self) -> bool:
        try:
            client = await self.client()
        except Exception:  # noqa: BLE001 - Triton unreachable, or the model not loaded: not ready
            return False
        if not await client.is_ready():
            return False
        problem = await answer_error(client, self.settings.health_timeout_s / 2)
        if problem:
            log.warning("not ready: %s", problem)
        return problem is None

    async def check(self, call: RerankCall) -> None:
        """Raise the call's first error against the server's limits and the gateway's policy."""
        check_call(call.query, call.texts, call.instruction, await self.limits(call.model),
                   self.settings.max_documents, call.names)

    async def rerank(self, call: RerankCall, return_documents: bool = False) -> RerankResponse:
        await self.check(call)
        return await self.send(call, return_documents)

    async def send(self, call: RerankCall, return_documents: bool = False) -> RerankResponse:
        """A checked call to Triton."""
        n = len(call.texts)
        # Like Cohere, Jina and vLLM: a top_n above the number of documents returns all of them.
        top_n = call.top_n if call.top_n is None or call.top_n <= n else n
        try:
            response = await self._rerank(call, top_n, return_documents)
        except Exception as error:
            raise triton_error(error, call.names) from error
        if self.shadow is not None and self.settings.triton_name(call.model or self.settings.triton_model) == self.settings.triton_model:
            self.shadow.offer(ShadowCall(call.query, call.texts, call.instruction, call.max_tokens_per_doc, response))
        return response

    async def _rerank(self, call: RerankCall, top_n: int | None, return_documents: bool) -> RerankResponse:
        """A split call whose requests straddled a calibration-profile swap is sent again, once: the second try
        runs under the new profile alone."""
        try:
            return await self._send(call, top_n, return_documents)
        except CalibrationChangedError:
            log.info("calibration profile changed during a split call: sending it again")
            return await self._send(call, top_n, return_documents)

    async def _send(self, call: RerankCall, top_n: int | None, return_documents: bool) -> RerankResponse:
        client = await self.client(call.model)
        name = self.settings.triton_name(call.model or self.settings.triton_model)
        with self.latency.timed(name):
            return await self._watch(name).run(client.rerank(
                call.query, call.texts, top_n=top_n, instruction=call.instruction,
                return_documents=return_documents, max_tokens_per_doc=call.max_tokens_per_doc,
            ))

    def _watch(self, name: str) -> EngineWatch:
        if name not in self._watches:
            self._watches[name] = EngineWatch(lambda: self._engine_dead(name), self.settings.engine_watch_s)
        return self._watches[name]

    async def _engine_dead(self, name: str) -> BaseException | None:
        """The probe of one ensemble's engine; it waits as long as a call waits between probes."""
        try:
            client = await self.models.client(name)
        except Exception:  # noqa: BLE001 - Triton unreachable: the calls' own errors will say so
            return None
        return await engine_dead(client, self.settings.engine_watch_s)
