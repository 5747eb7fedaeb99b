"""Request and response bodies of `POST /v1/rerank` (Cohere / Jina style) and the error body."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Document(BaseModel):
    model_config = ConfigDict(extra="ignore")

    text: str = Field(description="The document's text.")


class RerankRequest(BaseModel):
    # Fields other clients send (rank_fields, max_chunks_per_doc, ...) are accepted and ignored.
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={
            "examples": [
                {
                    "model": "reranker",
                    "query": "What is the capital of France?",
                    "documents": [
                        "Bananas are a good source of potassium.",
                        {"text": "Paris is the capital and largest city of France."},
                    ],
                    "top_n": 1,
                    "return_documents": True,
                }
            ]
        },
    )

    model: str = Field(description="Name of the served model (GET /health lists them).")
    query: str = Field(description="The query.")
    documents: list[str | Document] = Field(
        description="Candidate documents, as strings or {\"text\": ...} objects. Lists longer than the "
        "server's per-request limit are split into several Triton requests and merged."
    )
    top_n: int | None = Field(
        default=None,
        description="How many results to return, best first; default all. Larger than the number of "
        "documents means all of them.",
    )
    return_documents: bool = Field(default=False, description="Return each result's document text.")
    instruction: str | None = Field(
        default=None, description="Task instruction, for instruction-following rerankers (Qwen3-Reranker) only."
    )
    return_raw_scores: bool = Field(
        default=False, description="Add meta.raw_scores: the engine's uncalibrated scores, in input order."
    )

    def texts(self) -> list[str]:
        return [d if isinstance(d, str) else d.text for d in self.documents]


class RerankResult(BaseModel):
    index: int = Field(description="Position of the document in the request's `documents`.")
    relevance_score: float = Field(description="Calibrated relevance probability in 0..1.")
    document: Document | None = Field(default=None, description="Present when return_documents is true.")


class Meta(BaseModel):
    calibration: str = Field(description="Calibration profile applied, `name@version`.")
    truncated: int = Field(description="How many query-document pairs were cut to fit the model's length.")
    raw_scores: list[float] | None = Field(
        default=None, description="Engine scores in input order; present when return_raw_scores is true."
    )


class RerankResponse(BaseModel):
    id: str = Field(description="Identifier of this response.")
    results: list[RerankResult] = Field(description="Best first.")
    meta: Meta


class ErrorBody(BaseModel):
    detail: str = Field(description="What went wrong; for bad input, the server's message naming the field and limit.")


class Health(BaseModel):
    status: str = Field(description="`ready` or `unavailable`.")
    triton: str = Field(description="The Triton gRPC endpoint the gateway talks to.")
    models: list[str] = Field(description="Names accepted in the request's `model`.")
