"""`reranker-model check --load`: start the engine once with the settings `add` would write (GPU ones when a GPU is
there), score probe pairs and show what comes back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from google.protobuf import json_format

from python_backends.model_repository import ENGINE, PREPROCESS, VariantModel

from .checkpoint import ModelCheck
from .offline import open_steps, raw_scores
from .parity import reference_for
from .variant import VariantSpec, step_configs

PROBE_MAX_LEN = 512  # enough for the probe pairs; a model's full length would size the CPU engine for nothing


def probe_lines(model: ModelCheck, repository: Path, query: str, documents: list[str],
                parity_rows: list[dict] | None = None) -> list[str]:
    """The probe pairs' raw scores from the engine `add` would configure (GPU settings when a GPU is there), and with
    `parity_rows` ({"query", "document"[, "instruction"]}) their comparison with the model card's recipe."""
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
        if parity_rows:
            lines += parity_report(preprocess, engine, model.path, spec.max_model_len, parity_rows)
    return lines


def parity_report(preprocess, engine, folder: str, max_model_len: int, rows: list[dict]) -> list[str]:
    """The served raw scores of `rows`, one request per query, against the family's reference (transformers, fp32):
    the largest difference and the queries whose ranking differs."""
    reference = reference_for(folder, max_model_len)
    groups: dict[tuple[str, str | None], list[str]] = {}
    for row in rows:
        groups.setdefault((row["query"], row.get("instruction")), []).append(row["document"])
    largest, reordered = 0.0, 0
    for (query, instruction), documents in groups.items():
        served = raw_scores(preprocess, engine, query, documents, instruction)
        expected = reference.scores(query, documents, instruction)
        largest = max(largest, float(np.max(np.abs(served - expected))))
        reordered += not np.array_equal(np.argsort(-served, kind="stable"), np.argsort(-expected, kind="stable"))
    return [f"parity with the model card's recipe ({reference.family}, transformers fp32): {len(rows)} pairs in "
            f"{len(groups)} queries, max |raw diff| {largest:.2e}, ranking changed in {reordered} of {len(groups)} queries"]
