"""Which kind of reranker a checkpoint is, read from its own config (never chosen by hand).

The family decides three things: how pairs are formatted, which vLLM pooling task runs, and what the
raw score means (a classifier logit, logit_yes - logit_no, or a cosine similarity).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path

from transformers import AutoConfig

# The causal LMs that are trained as yes/no rerankers and that vLLM turns into a two-token classifier.
YES_NO_RERANKER_ARCHITECTURES = frozenset({"Qwen3ForCausalLM"})
ENCODER_MODEL_TYPES = frozenset({"bert", "xlm-roberta", "roberta", "distilbert", "modernbert", "electra", "deberta-v2"})


class ModelFamily(str, enum.Enum):
    CROSS_ENCODER = "cross_encoder"  # BERT/XLM-R *ForSequenceClassification, num_labels == 1
    YES_NO_RERANKER = "yes_no_reranker"  # Qwen3-Reranker: relevance = sigmoid(logit_yes - logit_no)
    BI_ENCODER = "bi_encoder"  # sentence embedding model: score = cosine(query, document)


@dataclass(frozen=True)
class ModelInfo:
    family: ModelFamily
    architecture: str
    model_type: str
    max_position_embeddings: int | None

    @property
    def score_type(self) -> str:
        """What RAW_SCORES means for this family; calibration profiles declare the one they were fitted on."""
        return {
            ModelFamily.CROSS_ENCODER: "logit",
            ModelFamily.YES_NO_RERANKER: "yes_no_logit",
            ModelFamily.BI_ENCODER: "cosine",
        }[self.family]


class UnsupportedModelError(ValueError):
    """The checkpoint is none of the reranker families this repository serves."""


def detect_model(model: str) -> ModelInfo:
    """Classify a local folder or hub id by its config.json (and modules.json for sentence-transformers)."""
    config = AutoConfig.from_pretrained(model)
    architectures = list(getattr(config, "architectures", None) or [])
    architecture = architectures[0] if architectures else ""
    model_type = getattr(config, "model_type", "")
    max_positions = getattr(config, "max_position_embeddings", None)

    if architecture in YES_NO_RERANKER_ARCHITECTURES:
        family = ModelFamily.YES_NO_RERANKER
    elif architecture.endswith("ForSequenceClassification") and model_type in ENCODER_MODEL_TYPES:
        num_labels = getattr(config, "num_labels", 1)
        if num_labels != 1:
            raise UnsupportedModelError(
                f"{model}: {architecture} has num_labels={num_labels}; a cross-encoder reranker has exactly 1"
            )
        family = ModelFamily.CROSS_ENCODER
    elif model_type in ENCODER_MODEL_TYPES and (_is_sentence_transformer(model) or architecture.endswith("Model")):
        family = ModelFamily.BI_ENCODER
    else:
        raise UnsupportedModelError(
            f"{model}: architecture '{architecture}' (model_type '{model_type}') is not a supported reranker; "
            "expected a *ForSequenceClassification cross-encoder, Qwen3ForCausalLM (Qwen3-Reranker) "
            "or a sentence-embedding encoder"
        )
    return ModelInfo(family, architecture, model_type, max_positions)


def _is_sentence_transformer(model: str) -> bool:
    modules = Path(model) / "modules.json"
    if not modules.is_file():
        return False
    return any("Pooling" in entry.get("type", "") for entry in json.loads(modules.read_text()))
