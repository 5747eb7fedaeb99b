"""vLLM adapter of the engine step: one in-process `vllm.LLM` pooling engine per Triton model instance.

CPU and GPU differ only in config.pbtxt (instance kind, dtype, memory share, `vllm_env`, `engine_args`).
All sequences of all requests that Triton batched into one `execute` go to vLLM in ONE call, so its
scheduler packs them into full steps; raw scores come back without vLLM's activation (calibration is
the next step's job).
"""

from __future__ import annotations

import locale
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .model_family import ModelFamily, ModelInfo, detect_model
from .model_source import resolve_model, verify_sha256
from .triton_params import ModelParameters

# How vLLM turns a Qwen3-Reranker causal LM into a one-logit classifier: logit_yes - logit_no.
QWEN3_RERANKER_OVERRIDES = {
    "architectures": ["Qwen3ForSequenceClassification"],
    "classifier_from_token": ["no", "yes"],
    "is_original_qwen3_reranker": True,
}


@dataclass(frozen=True)
class EngineSettings:
    model: str
    max_model_len: int
    dtype: str
    gpu_memory_utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    enforce_eager: bool
    engine_args: dict[str, Any] = field(default_factory=dict)
    vllm_env: dict[str, Any] = field(default_factory=dict)
    model_sha256: dict[str, str] = field(default_factory=dict)  # file name -> pinned digest, checked at load

    @classmethod
    def from_parameters(cls, params: ModelParameters) -> "EngineSettings":
        return cls(
            model=resolve_model(params.text("model")),
            max_model_len=params.integer("max_model_len", minimum=8),
            dtype=params.text("dtype"),
            gpu_memory_utilization=params.number("gpu_memory_utilization", 0.01, 1.0),
            max_num_batched_tokens=params.integer("max_num_batched_tokens", minimum=1),
            max_num_seqs=params.integer("max_num_seqs", minimum=1),
            enforce_eager=params.boolean("enforce_eager"),
            engine_args=params.json_object("engine_args"),
            vllm_env=params.json_object("vllm_env"),
            model_sha256=params.json_object("model_sha256"),
        )

    def llm_kwargs(self, info: ModelInfo) -> dict[str, Any]:
        """Arguments of `vllm.LLM`; the family adds what vLLM needs to load it as a scorer."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "runner": "pooling",
            "max_model_len": self.max_model_len,
            "dtype": self.dtype,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "max_num_seqs": self.max_num_seqs,
            "enforce_eager": self.enforce_eager,
        }
        if info.family is ModelFamily.YES_NO_RERANKER:
            kwargs["hf_overrides"] = dict(QWEN3_RERANKER_OVERRIDES)
        kwargs.update(self.engine_args)
        return kwargs


@dataclass
class SequenceBatch:
    """The engine inputs of one Triton request (see docs/CONTRACT.md)."""

    token_ids: np.ndarray
    token_type_ids: np.ndarray
    sequence_lengths: np.ndarray
    sequence_documents: np.ndarray

    def document_scores(self, sequence_scores: np.ndarray) -> np.ndarray:
        """One score per document: the best of its windows (a document scored whole has one)."""
        owners = self.sequence_documents[self.sequence_documents >= 0]
        if owners.shape != sequence_scores.shape:
            raise ValueError(f"{sequence_scores.shape[0]} scores for {owners.shape[0]} document sequences")
        best = np.full(int(owners.max()) + 1, -np.inf, dtype=np.float32)
        np.maximum.at(best, owners, sequence_scores)
        return best

    def split(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        cuts = np.cumsum(self.sequence_lengths)[:-1]
        if (
            int(self.sequence_lengths.sum()) != self.token_ids.shape[0]
            or self.token_ids.shape != self.token_type_ids.shape
            or self.sequence_documents.shape != self.sequence_lengths.shape
        ):
            raise ValueError(
                f"TOKEN_IDS ({self.token_ids.shape[0]}), TOKEN_TYPE_IDS ({self.token_type_ids.shape[0]}), "
                f"SEQUENCE_LENGTHS (sum {int(self.sequence_lengths.sum())}) and SEQUENCE_DOCUMENTS "
                f"({self.sequence_documents.shape[0]}) disagree"
            )
        return np.split(self.token_ids, cuts), np.split(self.token_type_ids, cuts)


def _first_segment_b(types: np.ndarray) -> int | None:
    """vLLM takes BERT token types as the index where segment B starts (zeros then ones)."""
    ones = np.flatnonzero(types)
    return int(ones[0]) if ones.size else None


def cosine_to_first(embeddings: np.ndarray) -> np.ndarray:
    """Bi-encoder score: cosine of the query (row 0) with every document row."""
    norms = np.linalg.norm(embeddings, axis=1)
    norms[norms == 0] = 1.0
    unit = embeddings / norms[:, None]
    return (unit[1:] @ unit[0]).astype(np.float32)


class VllmScorer:
    """Owns one vLLM engine; `score` maps request batches to raw scores, one array per request."""

    def __init__(self, settings: EngineSettings, device_id: int | None = None) -> None:
        os.environ.update({key: str(value) for key, value in settings.vllm_env.items()})
        # Triton's stub starts Python without the locale of its environment, so open() would decode as ASCII;
        # torch and vLLM read UTF-8 files at import.
        locale.setlocale(locale.LC_CTYPE, "C.UTF-8")
        if device_id is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(device_id)  # one engine per GPU: this instance's GPU only
        from vllm import LLM, PoolingParams  # imported here: after the environment above is in place
        from vllm.inputs import TokensPrompt

        self._pooling_params = PoolingParams
        self._tokens_prompt = TokensPrompt
        self.settings = settings
        verify_sha256(settings.model, settings.model_sha256)
        self.info = detect_model(settings.model)
        self.llm = LLM(**settings.llm_kwargs(self.info))

    def score(self, batches: list[SequenceBatch]) -> list[np.ndarray]:
        prompts, params, counts = [], [], []
        for batch in batches:
            ids_list, types_list = batch.split()
            longest = max(len(ids) for ids in ids_list)
            if longest > self.settings.max_model_len:
                raise ValueError(f"a sequence of {longest} tokens exceeds max_model_len={self.settings.max_model_len}")
            counts.append(len(ids_list))
            for ids, types in zip(ids_list, types_list):
                prompts.append(self._tokens_prompt(prompt_token_ids=ids.tolist()))
                params.append(self._params(types))
        if self.info.family is ModelFamily.BI_ENCODER:
            outputs = self.llm.embed(prompts, pooling_params=params, use_tqdm=False)
            vectors = np.asarray([out.outputs.embedding for out in outputs], dtype=np.float32)
            per_sequence = [cosine_to_first(chunk) for chunk in np.split(vectors, np.cumsum(counts)[:-1])]
        else:
            outputs = self.llm.classify(prompts, pooling_params=params, use_tqdm=False)
            logits = np.asarray([out.outputs.probs[0] for out in outputs], dtype=np.float32)
            per_sequence = np.split(logits, np.cumsum(counts)[:-1])
        return [batch.document_scores(scores) for batch, scores in zip(batches, per_sequence)]

    def _params(self, types: np.ndarray) -> Any:
        if self.info.family is ModelFamily.BI_ENCODER:
            return self._pooling_params()  # keep the model's normalisation; cosine is scale-free anyway
        segment_b = _first_segment_b(types)
        extra = {"compressed_token_type_ids": segment_b} if segment_b is not None else None
        return self._pooling_params(use_activation=False, extra_kwargs=extra)

    def close(self) -> None:
        """Free the engine (and its GPU memory) when Triton unloads the instance."""
        engine = getattr(self.llm, "llm_engine", None)
        shutdown = getattr(engine, "engine_core", None)
        if shutdown is not None and hasattr(shutdown, "shutdown"):
            shutdown.shutdown()
        del self.llm
