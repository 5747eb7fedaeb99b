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
                 f"{engine.score_kind.task}, max_model_len {engine.limits.max_model_len}"]
        lines.append(f"RAW_SCORES: {scores.dtype} shape {list(scores.shape)} (one per document) for query {query!r}")
        lines += [f"  {score:+.6f}  {document}" for score, document in zip(np.asarray(scores).tolist(), documents)]
        if parity_rows:
            dtype = str(variant.engine_args.get("dtype", "float32"))
            lines += parity_report(preprocess, engine, model.path, spec.max_model_len, parity_rows, dtype)
    return lines


# How far the served raw scores may be from the model card's recipe (transformers, fp32): fp32, what CI asserts for
# every family (tests/engine); bf16 and fp16, the largest difference measured on an H100 (0.019, Qwen3 shape,
# docs/CALIBRATION.md), which is the precision itself
PARITY_BOUNDS = {"float32": 1e-4, "bfloat16": 0.02, "float16": 0.02}


def parity_report(preprocess, engine, folder: str, max_model_len: int, rows: list[dict], dtype: str) -> list[str]:
    """The served raw scores of `rows`, one request per query, against the family's reference (transformers, fp32):
    a line per query (its largest difference, whether its ranking changed) and a verdict against PARITY_BOUNDS."""
    reference = reference_for(folder, max_model_len)
    groups: dict[tuple[str, str | None], list[str]] = {}
    for row in rows:
        groups.setdefault((row["query"], row.get("instruction")), []).append(row["document"])
    table, largest, reordered = [], 0.0, 0
    for (query, instruction), documents in groups.items():
        served = raw_scores(preprocess, engine, query, documents, instruction)
        expected = reference.scores(query, documents, instruction)
        difference = float(np.max(np.abs(served - expected)))
        changed = not np.array_equal(np.argsort(-served, kind="stable"), np.argsort(-expected, kind="stable"))
        largest, reordered = max(largest, difference), reordered + changed
        table.append(f"  {difference:.2e}  {'changed' if changed else 'same':<7}  {len(documents):>5}  {query[:60]!r}")
    bound = PARITY_BOUNDS.get(dtype, PARITY_BOUNDS["bfloat16"])
    within = largest <= bound
    return [f"parity with the model card's recipe ({reference.family}, transformers fp32; served in {dtype}): "
            f"{len(rows)} pairs in {len(groups)} queries",
            "  max |raw diff|  ranking  pairs  query", *table,
            f"verdict: {'within' if within else 'OVER'} the {dtype} bound of {bound:.0e}: max |raw diff| {largest:.2e}, "
            f"ranking changed in {reordered} of {len(groups)} queries" + ("" if within else
            " (check the template, the tokenizer and the truncation the model card uses)")]
