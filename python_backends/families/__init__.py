"""The model families this repository serves, one module each, chosen by the checkpoint's own config.

Adding a family is adding one module with a `ModelFamily` subclass (detection, encoder, score kind, engine args,
score type with its raw range and unfitted method) and listing it in FAMILIES; a new score type is also added to the
calibrate step's `SCORE_TYPES` (a unit test holds them equal), and the family's model-card recipe to
`reranker_model/parity.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..encoding.tokenization import LongDocuments, RequestEncoder
from .base import Checkpoint, ModelFamily, UnsupportedModelError
from .bi_encoder import BiEncoder
from .cross_encoder import CrossEncoder
from .qwen3_yes_no import Qwen3YesNo

__all__ = [
    "FAMILIES", "BiEncoder", "CrossEncoder", "ModelFamily", "ModelInfo", "Qwen3YesNo", "UnsupportedModelError", "detect_model",
    "make_encoder",
]

# In detection order: the first family whose `detects` says yes is the checkpoint's.
FAMILIES: tuple[type[ModelFamily], ...] = (Qwen3YesNo, CrossEncoder, BiEncoder)


@dataclass(frozen=True)
class ModelInfo:
    family: type[ModelFamily]
    architecture: str
    model_type: str
    max_position_embeddings: int | None

    @property
    def score_type(self) -> str:
        return self.family.score_type


def detect_model(model: str) -> ModelInfo:
    """Classify a local folder or hub id by its config.json (and modules.json for sentence-transformers)."""
    checkpoint = Checkpoint.read(model)
    for family in FAMILIES:
        if family.detects(checkpoint):
            return ModelInfo(family, checkpoint.architecture, checkpoint.model_type, checkpoint.max_position_embeddings)
    raise UnsupportedModelError(
        f"{model}: architecture '{checkpoint.architecture}' (model_type '{checkpoint.model_type}') is not a supported "
        "reranker; expected a *ForSequenceClassification cross-encoder, Qwen3ForCausalLM (Qwen3-Reranker) "
        "or a sentence-embedding encoder"
    )


def make_encoder(
    family: type[ModelFamily], model: str, max_model_len: int, window_overlap: int | None = None,
    max_windows: int | None = None,
) -> RequestEncoder:
    """The encoder of a model family, e.g. `make_encoder(detect_model(path).family, path, 512)`; `window_overlap`
    (tokens shared by neighbouring windows) switches long documents from cutting to at most `max_windows` windows per
    document."""
    return family.encoder(model, max_model_len, LongDocuments(window_overlap, max_windows))
