"""`reranker-model check --load`: start the engine once with the settings `add` would write (GPU ones when a GPU is
there), score probe pairs and show what comes back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from google.protobuf import json_format

from python_backends.model_repository import ENGINE, PREPROCESS, VariantModel

from .checkpoint import ModelCheck
from .offline import open_steps, raw_scores
from .variant import VariantSpec, step_configs

PROBE_MAX_LEN = 512  # enough for the probe pairs; a model's full length would size the CPU engine for nothing


def probe_lines(model: ModelCheck, repository: Path, query: str, documents: list[str]) -> list[str]:
    import torch

    gpu = torch.cuda.is_available()
    spec = VariantSpec("check", model, min(model.length_limit, PROBE_MAX_LEN), gpu=gpu)
    configs = {step: json_format.MessageToDict(config, preserving_proto_field_name=True)
               for step, config in step_configs(spec, repository).items()}
    variant = VariantModel(Path("(the probe's engine config)"), configs[ENGINE])
    with open_steps(configs[PREPROCESS], variant) as (preprocess, engine):
        scores = raw_scores(preprocess, engine, query, documents)
        lines = [f"engine: loaded on {'GPU' if gpu else 'CPU'} in {engine.start_seconds:.1f} s, task "
                 f"{engine.kind.task}, max_model_len {engine.limits.max_model_len}"]
    lines.append(f"RAW_SCORES: {scores.dtype} shape {list(scores.shape)} (one per document) for query {query!r}")
    lines += [f"  {score:+.6f}  {document}" for score, document in zip(np.asarray(scores).tolist(), documents)]
    return lines
