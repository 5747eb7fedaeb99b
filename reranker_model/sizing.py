"""`reranker-model add --documents`: how long the sample's query+document sequences are in this model's tokens, the
max_model_len that covers most of them, and what the engine then needs of the GPU's memory."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from python_backends.preprocess.tokenization import make_encoder

from .checkpoint import ModelCheck

COVERAGE = 0.95  # the share of sample sequences max_model_len keeps whole
PERCENTILES = (50, 90, 95, 99)
UNCAPPED = 1 << 30  # an encoder length nothing reaches: sequences are measured whole
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "auto": 2}


def read_sample(path: Path) -> list[tuple[str, str]]:
    """(query, document) pairs: calibration JSONL lines ({"query", "document", ...}), or one document text per line
    (then the query is empty: the lengths are the document's and the template's)."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = line
        if isinstance(row, dict):
            pairs.append((str(row.get("query", "")), str(row["document"])))
        else:
            pairs.append(("", line))
    if not pairs:
        raise ValueError(f"{path}: no documents")
    return pairs


def sequence_lengths(model: ModelCheck, pairs: list[tuple[str, str]]) -> np.ndarray:
    """Each pair's longest sequence, whole, as the family's encoder builds it (template and special tokens included)."""
    encoder = make_encoder(model.family, model.path, UNCAPPED)
    return np.asarray([max(encoder.encode(query or "?", [document], None).lengths) for query, document in pairs])


@dataclass(frozen=True)
class LengthChoice:
    percentiles: dict[int, int]
    longest: int
    max_model_len: int
    truncated: float  # share of the sample's sequences longer than max_model_len

    def lines(self, limit: int) -> list[str]:
        shown = "  ".join(f"P{p} {n}" for p, n in self.percentiles.items())
        capped = " (the model's limit)" if self.max_model_len == limit else ""
        return [f"sequence tokens: {shown}  max {self.longest}",
                f"max_model_len {self.max_model_len}{capped}: {self.truncated:.1%} of the sample truncated"]


def choose_length(lengths: np.ndarray, limit: int) -> LengthChoice:
    """The smallest max_model_len that keeps >= COVERAGE of the sequences whole, at most the model's limit."""
    ordered = np.sort(lengths)
    covering = int(ordered[math.ceil(COVERAGE * len(ordered)) - 1])
    chosen = min(covering, limit)
    return LengthChoice(
        percentiles={p: int(np.percentile(ordered, p, method="higher")) for p in PERCENTILES},
        longest=int(ordered[-1]),
        max_model_len=chosen,
        truncated=float(np.mean(ordered > chosen)),
    )


def parameter_count(folder: str) -> int | None:
    """Parameters in the checkpoint's safetensors files, read from their headers (no weights loaded)."""
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for file in files:
        with file.open("rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(size))
        total += sum(math.prod(entry["shape"]) for key, entry in header.items() if key != "__metadata__")
    return total


def memory_lines(model: ModelCheck, engine_args: dict, gpu_bytes: int | None) -> list[str]:
    """The engine's weights and its prefill budget's activations against the GPU share it may use."""
    params = parameter_count(model.path)
    dtype = DTYPE_BYTES.get(engine_args.get("dtype", "auto"), 2)
    config = json.loads((Path(model.path) / "config.json").read_text())
    width = max(config.get("intermediate_size", 0), 3 * config.get("hidden_size", 0))
    # the widest activation of one step (the MLP's or attention's q/k/v) for every token of the prefill budget
    activations = engine_args["max_num_batched_tokens"] * width * dtype
    weights = params * dtype if params is not None else 0
    share = engine_args.get("gpu_memory_utilization")
    gib = 1 << 30
    lines = [f"weights: {params or 0:,} parameters x {dtype} B = {weights / gib:.2f} GiB"
             + ("" if params is not None else " (no safetensors in the local copy)"),
             f"prefill budget: {engine_args['max_num_batched_tokens']} tokens x {width} x {dtype} B = "
             f"{activations / gib:.2f} GiB of activations",
             f"engine needs ~{(weights + activations) / gib:.2f} GiB before any KV cache"]
    if share is not None and gpu_bytes:
        lines.append(f"GPU share: gpu_memory_utilization {share} x {gpu_bytes / gib:.1f} GiB = {share * gpu_bytes / gib:.1f} GiB")
    elif share is not None:
        lines.append(f"GPU share: gpu_memory_utilization {share}: a GPU of >= {(weights + activations) / share / gib:.1f} GiB")
    return lines
