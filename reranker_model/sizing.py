"""`reranker-model add --documents`: how long the sample's documents are in this model's tokens beside the longest
query the variant is sized for, the max_model_len that covers most of them, what it cuts, and what the engine then
needs of the GPU's memory."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from python_backends.encoding.tokenization import QueryTooLongError
from python_backends.families import make_encoder

from .checkpoint import ModelCheck

COVERAGE = 0.95  # the share of sample sequences max_model_len keeps whole
TRUNCATION_LIMIT = 0.05  # past this share of the sample cut, `add` stops unless told to accept it
# Each document is measured beside a query of this many one-token words, at most 1/QUERY_SHARE of the model's limit,
# or beside the sample's longest query where that is longer: queries longer than a sample's still fit after a switch
DEFAULT_QUERY_WORDS = 64
QUERY_SHARE = 4
PERCENTILES = (50, 90, 95, 99)
UNCAPPED = 1 << 30  # an encoder length nothing reaches: sequences are measured whole
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "auto": 2}


@dataclass(frozen=True)
class Sample:
    """(query, document) pairs; `has_queries`: the sample was calibration JSONL, not one document per line."""

    pairs: list[tuple[str, str]]
    has_queries: bool


def read_sample(path: Path) -> Sample:
    """Calibration JSONL lines ({"query", "document", ...}), or one document text per line (no queries)."""
    pairs, rows = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = line
        if isinstance(row, dict):
            pairs.append((str(row.get("query", "")), str(row["document"])))
            rows += 1
        else:
            pairs.append(("", line))
    if not pairs:
        raise ValueError(f"{path}: no documents")
    return Sample(pairs, has_queries=rows == len(pairs) and any(query for query, _ in pairs))


@dataclass(frozen=True)
class SampleLengths:
    """Each document's longest sequence, whole, with the longest query the variant is sized for (template and special
    tokens included, as the family's encoder builds it), and how that query was chosen."""

    lengths: np.ndarray
    queries: str


def sample_lengths(model: ModelCheck, sample: Sample, query_words: int | None = None) -> SampleLengths:
    """Every document measured beside one query: `query_words` words when given; else the longer of the sample's
    longest query (in this model's tokens) and `default_query_words` words."""
    encoder = make_encoder(model.family, model.path, UNCAPPED)

    def length(query: str, document: str) -> int:
        return max(encoder.encode(query, [document], None).lengths)

    words = query_words or default_query_words(model.length_limit)
    query = " ".join(["x"] * words)
    described = f"each document beside a {words}-word query"
    if query_words is not None:
        described += " (--max-query-words)"
    elif not sample.has_queries:
        described = f"none in the sample (one document per line): {described} (--max-query-words sets another)"
    else:
        longest = max({q for q, _ in sample.pairs if q}, key=lambda q: length(q, "?"))
        tokens = length(longest, "?") - length("?", "?") + 1
        if length(longest, "?") > length(query, "?"):
            query, described = longest, f"each document beside the sample's longest query ({tokens} tokens)"
        else:
            described += (f", longer than the sample's longest ({tokens} tokens): 1/{QUERY_SHARE} of the model's "
                          f"limit or {DEFAULT_QUERY_WORDS} words, whichever is less (--max-query-words sets another)")
    return SampleLengths(np.asarray([length(query, document) for _, document in sample.pairs]), described)


def default_query_words(limit: int) -> int:
    return max(1, min(DEFAULT_QUERY_WORDS, limit // QUERY_SHARE))


def takes_line(model: ModelCheck, max_model_len: int) -> str:
    """The longest query the variant accepts (a longer one is refused) and the longest document it keeps whole beside
    a one-word query, in this model's tokens."""
    encoder = make_encoder(model.family, model.path, max_model_len)
    whole = make_encoder(model.family, model.path, UNCAPPED)

    def fits(words: int) -> bool:
        try:
            encoder.encode(" ".join(["x"] * words), ["d"], None)
            return True
        except QueryTooLongError:
            return False

    low, high = 0, max_model_len  # the most words that fit: fits(low), not fits(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    overhead = max(whole.encode("x", ["d"], None).lengths) - 1  # everything around a one-token document
    return (f"the variant takes: queries of up to {low} tokens (a longer one is refused), and beside a one-word query "
            f"documents of up to {max_model_len - overhead} tokens whole (longer ones are cut)")


@dataclass(frozen=True)
class LengthChoice:
    percentiles: dict[int, int]
    longest: int
    max_model_len: int

    def lines(self, limit: int) -> list[str]:
        shown = "  ".join(f"P{p} {n}" for p, n in self.percentiles.items())
        capped = " (the model's limit)" if self.max_model_len == limit else ""
        return [f"sequence tokens: {shown}  max {self.longest}",
                f"max_model_len from the sample: {self.max_model_len}{capped}"]


def choose_length(lengths: np.ndarray, limit: int) -> LengthChoice:
    """The smallest max_model_len that keeps >= COVERAGE of the sequences whole, at most the model's limit."""
    ordered = np.sort(lengths)
    covering = int(ordered[math.ceil(COVERAGE * len(ordered)) - 1])
    return LengthChoice(
        percentiles={p: int(np.percentile(ordered, p, method="higher")) for p in PERCENTILES},
        longest=int(ordered[-1]),
        max_model_len=min(covering, limit),
    )


def truncation_line(lengths: np.ndarray, max_model_len: int, accept: bool) -> str:
    """What max_model_len cuts of the sample; past TRUNCATION_LIMIT a refusal (ValueError) unless `accept`."""
    cut = int(np.sum(lengths > max_model_len))
    line = f"max_model_len {max_model_len}: {cut} of {len(lengths)} sample documents ({cut / len(lengths):.1%}) cut"
    if cut > TRUNCATION_LIMIT * len(lengths) and not accept:
        raise ValueError(f"{line}, over {TRUNCATION_LIMIT:.0%}: --accept-truncation writes the variant anyway, "
                         f"--max-model-len sets a longer one")
    return line


def memory_lines(model: ModelCheck, engine_args: dict, gpu_bytes: int | None) -> list[str]:
    """The engine's weights and its prefill budget's activations against the GPU share it may use."""
    params = model.weights.parameters
    dtype = DTYPE_BYTES.get(engine_args.get("dtype", "auto"), 2)
    config = json.loads((Path(model.path) / "config.json").read_text())
    width = max(config.get("intermediate_size", 0), 3 * config.get("hidden_size", 0))
    # the widest activation of one step (the MLP's or attention's q/k/v) for every token of the prefill budget
    activations = engine_args["max_num_batched_tokens"] * width * dtype
    weights = params * dtype if params is not None else 0
    share = engine_args.get("gpu_memory_utilization")
    gib = 1 << 30
    lines = [f"weights: {params or 0:,} parameters x {dtype} B = {weights / gib:.2f} GiB"
             + ("" if params is not None else " (pickled weights: not counted)"),
             f"prefill budget: {engine_args['max_num_batched_tokens']} tokens x {width} x {dtype} B = "
             f"{activations / gib:.2f} GiB of activations",
             f"engine needs ~{(weights + activations) / gib:.2f} GiB before any KV cache"]
    if share is not None and gpu_bytes:
        lines.append(f"GPU share: gpu_memory_utilization {share} x {gpu_bytes / gib:.1f} GiB = {share * gpu_bytes / gib:.1f} GiB")
    elif share is not None:
        lines.append(f"GPU share: gpu_memory_utilization {share}: a GPU of >= {(weights + activations) / share / gib:.1f} GiB")
    return lines
