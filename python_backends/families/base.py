"""What every model family is made of, and what several of them share.

A family is read from the checkpoint's own config (never chosen by hand) and decides: how a request's pairs become
token ids (its encoder), which pooling task vLLM runs and how the pooled output becomes the raw score (its score kind),
what vLLM's engine_args must hold for it to load as a scorer, and what the raw score means (its score type, which a
calibration profile declares).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from packaging.version import Version
from huggingface_hub.repocard import metadata_load
from tokenizers import Tokenizer

from ..checkpoint_files import MissingTokenizerError, checkpoint_file, checkpoint_json, served_tokenizer

# From vLLM 0.33 on, PoolingParams.extra_kwargs["compressed_token_type_ids"] is segment B's half-open range
# (start, end); before, its start. The other form fails in vLLM's model runner and ends the engine.
TOKEN_TYPE_RANGE_SINCE = Version("0.33.0")
ENCODER_MODEL_TYPES = frozenset({"bert", "xlm-roberta", "roberta", "distilbert", "modernbert", "electra", "deberta-v2"})


class UnsupportedModelError(ValueError):
    """The checkpoint is none of the reranker families this repository serves."""


@dataclass(frozen=True)
class Checkpoint:
    """What detection reads from a checkpoint's config.json (and modules.json for sentence-transformers)."""

    path: str
    architecture: str
    model_type: str
    max_position_embeddings: int | None
    num_labels: int

    @classmethod
    def read(cls, model: str) -> "Checkpoint":
        config = checkpoint_json(model, "config.json")
        if config is None:
            raise UnsupportedModelError(f"{model}: no config.json, neither in a folder nor in the hub's files")
        architectures = list(config.get("architectures") or [])
        return cls(
            path=model,
            architecture=architectures[0] if architectures else "",
            model_type=config.get("model_type", ""),
            max_position_embeddings=config.get("max_position_embeddings"),
            num_labels=num_labels(config),
        )

    def _file(self, name: str) -> str | None:
        """A file of the checkpoint (a local folder, or a hub id through the Hugging Face cache); None when it has
        none."""
        return checkpoint_file(self.path, name)

    def card_metadata(self) -> dict[str, Any]:
        """The front matter of the checkpoint's model card (README.md); empty without one."""
        card = self._file("README.md")
        return (metadata_load(card) or {}) if card else {}

    def tokenizer(self) -> Tokenizer:
        """The checkpoint's fast tokenizer, as the preprocess step tokenizes with it."""
        try:
            return served_tokenizer(self.path)
        except MissingTokenizerError:
            raise UnsupportedModelError(
                f"{self.path}: no tokenizer.json; the serving code needs the model's fast tokenizer"
            ) from None

    @property
    def is_encoder(self) -> bool:
        return self.model_type in ENCODER_MODEL_TYPES

    @property
    def is_sentence_transformer(self) -> bool:
        modules = Path(self.path) / "modules.json"
        if not modules.is_file():
            return False
        return any("Pooling" in entry.get("type", "") for entry in json.loads(modules.read_text()))


def num_labels(config: Mapping[str, Any]) -> int:
    """A classifier's label count as transformers' config reads it: the length of id2label where the config has one;
    else num_labels; else 2 (transformers leaves id2label out of a saved 2-label config, its default)."""
    if config.get("id2label") is not None:
        return len(config["id2label"])
    return config.get("num_labels", 2)


class ScoreKind:
    """Which pooling task vLLM runs for a family, the PoolingParams of one sequence, and how the pooled outputs of
    one request become one raw score per sequence. Raw scores come back without vLLM's activation: calibration is
    the next step's job."""

    task: ClassVar[str]
    query_row: ClassVar[bool] = False  # does the request carry the query as its own first sequence?

    def __init__(self, pooling_params: type, vllm_release: Version) -> None:
        self._params = pooling_params  # vLLM's PoolingParams, passed in: vLLM is imported by the engine alone
        self._vllm_release = vllm_release

    def params(self, types: np.ndarray) -> Any:
        raise NotImplementedError

    def sequence_scores(self, pooled: np.ndarray) -> np.ndarray:
        """`pooled`: vLLM's output of each sequence of one request, in order, one float32 row each."""
        raise NotImplementedError


def first_segment_b(types: np.ndarray) -> int | None:
    """Where segment B starts in BERT token types (zeros then ones); None when there is no segment B."""
    ones = np.flatnonzero(types)
    return int(ones[0]) if ones.size else None


class ClassifierLogit(ScoreKind):
    """A sequence classifier's single logit: cross-encoders, and yes/no rerankers that vLLM loads as one."""

    task = "classify"

    def params(self, types: np.ndarray) -> Any:
        segment_b = self._segment_b(types)
        extra = {"compressed_token_type_ids": segment_b} if segment_b is not None else None
        return self._params(task=self.task, use_activation=False, extra_kwargs=extra)

    def _segment_b(self, types: np.ndarray) -> int | tuple[int, int] | None:
        """Segment B in the form this vLLM rebuilds BERT token types from; types are zeros then ones."""
        start = first_segment_b(types)
        if start is None or self._vllm_release < TOKEN_TYPE_RANGE_SINCE:
            return start
        return start, len(types)

    def sequence_scores(self, pooled: np.ndarray) -> np.ndarray:
        return pooled[:, 0]


class ModelFamily:
    """One family: a class holding its parameters, registered in python_backends.families.FAMILIES."""

    name: ClassVar[str]  # in messages and benchmark reports
    score_type: ClassVar[str]  # what RAW_SCORES means; calibration profiles declare the one they were fitted on
    raw_range: ClassVar[str]  # what a raw score of that type is, as `reranker-model check` says it
    # the honest profile before one is fitted (the calibration the model's own library applies, or none), and why
    unfitted_method: ClassVar[str]
    unfitted_why: ClassVar[str]
    encoder: ClassVar[type]  # (model, max_model_len, LongDocuments) -> a RequestEncoder
    score_kind: ClassVar[type[ScoreKind]]
    # engine_args the config must carry for vLLM to load a model of this family as a scorer (checked, not added)
    engine_args: ClassVar[Mapping[str, Any]] = {"runner": "pooling"}

    @classmethod
    def detects(cls, checkpoint: Checkpoint) -> bool:
        """Is this checkpoint of this family? Raises UnsupportedModelError for one that is, but cannot be served."""
        raise NotImplementedError
