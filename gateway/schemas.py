"""Request and response bodies: one for Cohere (v1, v2), vLLM and Jina, whose shapes agree field by field; TEI's
own; vLLM's /score; and the error bodies. Unknown fields are ignored, as each of these APIs does. Numbers and
flags are strict: `top_n: true` or `"5"` is refused, not read as 1 or 5."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

# JSON may spell a lone surrogate ("\\ud800"), which Python decodes into a str that has no UTF-8 form: refused
# as the caller's error, naming where it is, before anything encodes it.
_SURROGATE = re.compile("[\ud800-\udfff]")
# Arrays and objects nested in one field's value, the value's own included. A document object is returned as sent,
# and the answer's serializer gives up past 255 levels (such a call was a 500).
MAX_DEPTH = 64


def _children(value: Any) -> Iterator[tuple[str | int, Any]] | None:
    """A container's (key or index, item) pairs; None for anything else."""
    if isinstance(value, BaseModel):
        value = dict(value)
    if isinstance(value, dict):
        return iter(value.items())
    if isinstance(value, (list, tuple)):
        return enumerate(value)
    return None


def _path(parts: Sequence[str | int]) -> str:
    """`documents[0].t\\ud800` from ("documents", 0, "t\ud800"): a key's surrogates escaped, as it goes into a
    message."""
    return parts[0] + "".join(f"[{part}]" if isinstance(part, int) else
                              f".{part.encode('utf-8', 'backslashreplace').decode()}" for part in parts[1:])


def _lone_surrogate(parts: Sequence[str | int]) -> PydanticCustomError:
    return PydanticCustomError("unicode", "not valid Unicode: a lone surrogate (U+D800..U+DFFF) in {where}",
                               {"where": _path(parts)})


def _first_problem(value: Any, field: str) -> PydanticCustomError | None:
    """The first text in a field's value (at any depth, object keys before their values) that holds a lone
    surrogate, or the first container nested past MAX_DEPTH, depth first. A loop, not a recursion (a deep value
    ran out of Python's stack), with one frame per level, and a path made only for the value refused."""
    parts: list[str | int] = [field]
    frames: list[Iterator[tuple[str | int, Any]]] = []
    while True:
        if isinstance(value, str) and _SURROGATE.search(value):
            return _lone_surrogate(parts)
        if (children := _children(value)) is not None:
            if len(frames) == MAX_DEPTH:
                return PydanticCustomError("depth", "nested more than {limit} levels deep in {where}",
                                           {"limit": MAX_DEPTH, "where": _path(parts[:2])})
            if isinstance(value, dict) and (key := next((k for k in value if _SURROGATE.search(k)), None)):
                return _lone_surrogate([*parts, key])
            frames.append(children)
            parts.append(0)
        while frames and (step := next(frames[-1], None)) is None:
            frames.pop()
            parts.pop()
        if not frames:
            return None
        parts[-1], value = step


class RequestBody(BaseModel):
    """A request body: every text in it, at any depth, must be valid Unicode, and no value may nest deeper than
    MAX_DEPTH."""

    @field_validator("*")
    @classmethod
    def _valid_unicode(cls, value: Any, info: ValidationInfo) -> Any:
        if (problem := _first_problem(value, info.field_name)) is not None:
            raise problem
        return value


class TextObject(BaseModel):
    model_config = ConfigDict(extra="ignore")

    text: str


class RerankRequest(RequestBody):
    """Cohere's /v1/rerank and /v2/rerank, vLLM's and Jina's /rerank and /v1/rerank."""

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {
                    "query": "What is the capital of France?",
                    "documents": [
                        "Bananas are a good source of potassium.",
                        {"title": "Paris", "text": "Paris is the capital and largest city of France."},
                    ],
                    "top_n": 1,
                    "return_documents": True,
                }
            ]
        },
    )

    model: str | None = Field(default=None, description="A served name (GET /health lists them); default RERANK_MODEL.")
    query: str | TextObject = Field(description="The query (Jina also sends {\"text\": ...}).")
    documents: list[str | dict[str, Any]] | str = Field(
        description="Candidate documents: strings, or objects whose `rank_fields` (default `text`) are ranked; "
        "lists longer than the server's per-request limit are split into several Triton requests and merged."
    )
    top_n: StrictInt | None = Field(
        default=None, description="How many results, best first; default all, and so is a value above the count."
    )
    rank_fields: list[str] | None = Field(
        default=None, description="Cohere: the object fields ranked, in this order, as `key: value` lines."
    )
    return_documents: StrictBool | None = Field(
        default=None, description="Return each result's document as sent; default true on /rerank and "
        "/v1/rerank (Jina, vLLM), false on /v2/rerank (Cohere)."
    )
    max_tokens_per_doc: StrictInt | None = Field(
        default=None, description="Cohere v2 / vLLM: cut each document to this many tokens (counted in "
        "meta.truncated); the query and template are never cut."
    )
    truncate_prompt_tokens: StrictInt | None = Field(
        default=None, description="vLLM: the same cap on the document's tokens; -1 means the model's limit."
    )
    instruction: str | None = Field(
        default=None, description="Task instruction, for instruction-following rerankers (Qwen3-Reranker) only."
    )
    return_raw_scores: StrictBool = Field(
        default=False, description="Add meta.raw_scores: the engine's uncalibrated scores, in input order."
    )

    def document_list(self) -> list[str | dict[str, Any]]:
        return [self.documents] if isinstance(self.documents, str) else list(self.documents)

    def query_text(self) -> str:
        return self.query if isinstance(self.query, str) else self.query.text


class RerankResult(BaseModel):
    index: int = Field(description="Position of the document in the request's `documents`.")
    relevance_score: float = Field(description="Calibrated relevance probability in 0..1.")
    document: dict[str, Any] | None = Field(
        default=None, description="The document as sent ({\"text\": ...} for a string), when returned."
    )


class ApiVersion(BaseModel):
    version: str


class BilledUnits(BaseModel):
    search_units: int = Field(description="Cohere's unit: one per started hundred documents.")


class Meta(BaseModel):
    api_version: ApiVersion
    billed_units: BilledUnits
    calibration: str = Field(description="Calibration profile applied, `name@version`.")
    truncated: int = Field(description="How many documents were cut (the model's length or max_tokens_per_doc).")
    raw_scores: list[float] | None = Field(
        default=None, description="Engine scores in input order; present when return_raw_scores is true."
    )


class RerankResponse(BaseModel):
    id: str = Field(description="Identifier of this response.")
    model: str = Field(description="The served name that answered.")
    results: list[RerankResult] = Field(description="Best first.")
    meta: Meta


class TeiRerankRequest(RequestBody):
    """text-embeddings-inference's POST /rerank (router/src/http/types.rs RerankRequest)."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = Field(default=None, description="A served name (GET /health lists them); default "
                              "RERANK_MODEL. TEI's own body has none (one model per server); clients that name one "
                              "are routed by it, as on the other routes.")
    query: str
    texts: list[str]
    truncate: StrictBool | None = Field(default=None, description="false: refuse texts longer than the model takes.")
    truncation_direction: Literal["right", "left", "Right", "Left"] = "right"
    raw_scores: StrictBool = Field(default=False, description="Scores are the engine's raw scores, not calibrated.")
    return_text: StrictBool = False
    top_n: StrictInt | None = Field(default=None, description="How many ranks, best first (LiteLLM sends it); "
                                    "default all, and so is a value above the count.")


class TeiRank(BaseModel):
    index: int
    text: str | None = None
    score: float


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: int


class ErrorBody(BaseModel):
    """Cohere reads `message`, vLLM (OpenAI style) `error`, Jina (FastAPI) `detail`: one body for all three."""

    message: str = Field(description="What went wrong; for bad input it names the field and the limit.")
    detail: str
    error: ErrorDetail


class TeiErrorBody(BaseModel):
    error: str
    error_type: str


class Health(BaseModel):
    status: str = Field(description="`ready` or `unavailable`.")
    models: list[str] = Field(description="Names accepted in the request's `model`.")


class ScoreRequest(RequestBody):
    """vLLM's /score body (entrypoints/pooling/scoring/protocol.py ScoreTextRequest): pairs 1:1, 1:N or N:N."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = Field(default=None, description="A served name (GET /health lists them); default RERANK_MODEL.")
    text_1: str | list[str] = Field(description="The query, or one query per pair.")
    text_2: str | list[str] = Field(description="The documents scored against text_1.")
    truncate_prompt_tokens: StrictInt | None = Field(
        default=None, description="Cut each document to this many tokens; -1 means the model's limit."
    )

    def pairs(self) -> tuple[list[str], list[str]]:
        return ([self.text_1] if isinstance(self.text_1, str) else list(self.text_1),
                [self.text_2] if isinstance(self.text_2, str) else list(self.text_2))


class ScoreData(BaseModel):
    index: int = Field(description="Position of the pair.")
    object: Literal["score"] = "score"
    score: float = Field(description="Calibrated relevance probability in 0..1.")


class ScoreUsage(BaseModel):
    prompt_tokens: int = Field(default=0, description="Not counted by this server: 0.")
    total_tokens: int = Field(default=0, description="Not counted by this server: 0.")
    completion_tokens: int = 0


class ScoreResponse(BaseModel):
    id: str
    object: Literal["list"] = "list"
    created: int = Field(description="Unix time of the response.")
    model: str = Field(description="The served name that answered.")
    data: list[ScoreData] = Field(description="One score per pair, in pair order.")
    usage: ScoreUsage
