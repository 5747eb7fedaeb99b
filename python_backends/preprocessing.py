"""The preprocess step: validated request in, flat token tensors for the engine out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model_family import detect_model
from .model_source import resolve_model
from .request_validation import InputLimits, InvalidRequest, parse_request
from .tokenization import QueryTooLongError, RequestEncoder, make_encoder
from .triton_params import ConfigError, ModelParameters


@dataclass
class EngineInputs:
    """One request's sequences, flattened so they travel as three ragged INT32 tensors."""

    token_ids: np.ndarray  # [T]
    token_type_ids: np.ndarray  # [T]
    sequence_lengths: np.ndarray  # [S]
    sequence_documents: np.ndarray  # [S] document index of each sequence, -1 for a bi-encoder's query
    documents: int
    truncated: int
    top_n: int


class Preprocessor:
    def __init__(self, encoder: RequestEncoder, limits: InputLimits) -> None:
        self.encoder = encoder
        self.limits = limits

    @classmethod
    def from_parameters(cls, params: ModelParameters) -> "Preprocessor":
        model = resolve_model(params.text("model"))
        info = detect_model(model)
        mode = params.text("long_documents")
        if mode not in ("truncate", "window"):
            raise ConfigError(f"model '{params.model_name}': long_documents must be 'truncate' or 'window', got '{mode}'")
        overlap = params.integer("window_overlap_tokens", minimum=0) if mode == "window" else None
        encoder = make_encoder(info.family, model, params.integer("max_model_len", minimum=8), overlap)
        return cls(encoder, InputLimits.from_parameters(params))

    def __call__(
        self,
        query: np.ndarray,
        documents: np.ndarray,
        instruction: np.ndarray | None = None,
        top_n: np.ndarray | None = None,
    ) -> EngineInputs:
        request = parse_request(self.limits, query, documents, instruction, top_n, self.encoder.takes_instruction)
        try:
            encoded = self.encoder.encode(request.query, request.documents, request.instruction)
        except QueryTooLongError as exc:
            raise InvalidRequest(f"QUERY: {exc}") from None
        flat_ids = np.fromiter((t for seq in encoded.token_ids for t in seq), dtype=np.int32)
        if encoded.token_type_ids is None:
            flat_types = np.zeros_like(flat_ids)
        else:
            flat_types = np.fromiter((t for seq in encoded.token_type_ids for t in seq), dtype=np.int32)
        return EngineInputs(
            token_ids=flat_ids,
            token_type_ids=flat_types,
            sequence_lengths=np.asarray(encoded.lengths, dtype=np.int32),
            sequence_documents=np.asarray(encoded.document_index, dtype=np.int32),
            documents=len(request.documents),
            truncated=encoded.truncated,
            top_n=request.top_n,
        )
