"""The preprocess step's configuration, read once from rerank_preprocess's config.pbtxt (or configs/<variant>.pbtxt)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contract import RequestLimits
from ..families import ModelFamily, detect_model
from ..model_repository import VariantModel
from ..model_source import resolve_model
from ..triton_params import ConfigError, ModelParameters

LONG_DOCUMENTS = ("truncate", "window")


@dataclass(frozen=True)
class PreprocessSettings:
    model: str  # the checkpoint: a folder or a hub id, resolved from the config's reference
    family: type[ModelFamily]  # read from the checkpoint's own config
    limits: RequestLimits  # per request; max_model_len is the tokens of one sequence
    window_overlap: int | None  # None: a long document is cut; else split into windows sharing this many tokens
    max_windows: int  # windows per document (1 when cutting)
    batch_token_budget: int  # document tokens one execute may tokenize (admission by work)
    tokenizer_threads: int  # the Rust tokenizer's thread pool, and a tiktoken twin's threads (fast_bpe); 0: the
    # pool's own default, one thread per core, and the twin on the tokenizing thread alone

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> "PreprocessSettings":
        """From what Triton passes to `initialize`: the step's config and folder, and through them its variant."""
        config = json.loads(args["model_config"])
        return cls.from_model_config(config, VariantModel.for_step(Path(args["model_repository"]), config))

    @classmethod
    def from_model_config(cls, config: Mapping[str, Any], variant: VariantModel) -> "PreprocessSettings":
        """From the step's model configuration (as Triton passes it, parsed) and the variant it serves, whose engine
        file states the checkpoint and max_model_len."""
        params = ModelParameters.from_model_config(config)
        mode = params.text("long_documents")
        if mode not in LONG_DOCUMENTS:
            raise ConfigError(f"model '{params.model_name}': long_documents must be 'truncate' or 'window', got '{mode}'")
        windowed = mode == "window"
        model = resolve_model(variant.model)
        limits = RequestLimits.from_model_configs(config, variant.engine_config)
        max_windows = params.integer("max_windows_per_document", minimum=1) if windowed else 1
        _check_engine_takes(limits.max_documents * max_windows + 1, variant)
        return cls(
            model=model,
            family=detect_model(model).family,
            limits=limits,
            window_overlap=params.integer("window_overlap_tokens", minimum=0) if windowed else None,
            max_windows=max_windows,
            batch_token_budget=params.integer("batch_token_budget", minimum=1),
            tokenizer_threads=params.integer("tokenizer_threads", minimum=0),
        )


def _check_engine_takes(sequences: int, variant: VariantModel) -> None:
    """The largest request this step can send (every document, each in all its windows, and a bi-encoder's query
    row) must be one the engine takes: otherwise valid requests near the limits would fail in the engine."""
    engine_takes = ModelParameters.from_model_config(variant.engine_config).integer("max_sequences", minimum=1)
    if engine_takes < sequences:
        raise ConfigError(f"max_documents x max_windows_per_document + 1 = {sequences} sequences per request, but the "
                          f"engine takes at most {engine_takes} (max_sequences in {variant.engine_file}): raise it there "
                          "or lower max_documents")
