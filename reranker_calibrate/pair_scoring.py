"""Labelled pairs in, raw engine scores out: the data files and the scorers behind one interface.

Why an interface: the fitting tool normally scores the pairs through the served ``reranker``
ensemble (so the raw scores are exactly the ones production calibrates), but tests and re-fits
pass scores computed earlier (``--raw-scores-from``) without a server.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from python_backends.json_text import decode_json_object


class DataError(ValueError):
    """A data or score file line that cannot be used; the message is "<file>:<line>: <problem>"."""


class ScoringError(RuntimeError):
    """The server did not score a request (unreachable, model not ready, wrong answer)."""


@dataclass(frozen=True)
class LabelledPair:
    query: str
    document: str
    label: int
    old_score: float | None = None


@dataclass(frozen=True)
class ScoreResult:
    """Raw scores in pair order; ``truncated`` counts pairs cut at max_model_len (None: unknown)."""

    raw_scores: np.ndarray
    truncated: int | None


class Scorer(Protocol):
    def score(self, pairs: Sequence[LabelledPair]) -> ScoreResult: ...


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line."""
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, decode_json_object(line)))
        except ValueError as problem:
            raise DataError(f"{path}:{number}: {problem}") from None
    if not rows:
        raise DataError(f"{path}: no pairs")
    return rows


def _finite(obj: dict[str, Any], key: str, where: str) -> float:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(f"{where}: '{key}' must be a finite number")
    return float(value)


def read_pairs(path: str | os.PathLike[str]) -> list[LabelledPair]:
    """Read JSONL lines {"query", "document", "label": 0|1, optional "old_score"}; other fields are
    ignored. old_score must be on every line or on none, so old and new cover the same pairs."""
    p = Path(path)
    pairs = []
    for number, obj in _read_jsonl(p):
        where = f"{p}:{number}"
        for key in ("query", "document"):
            if not isinstance(obj.get(key), str) or not obj[key].strip():
                raise DataError(f"{where}: '{key}' must be a non-empty string")
        label = obj.get("label")
        if isinstance(label, bool) or label not in (0, 1):
            raise DataError(f"{where}: 'label' must be 0 or 1")
        old = _finite(obj, "old_score", where) if "old_score" in obj else None
        pairs.append(LabelledPair(obj["query"], obj["document"], int(label), old))
    with_old = sum(pair.old_score is not None for pair in pairs)
    if 0 < with_old < len(pairs):
        raise DataError(f"{p}: 'old_score' is on {with_old} of {len(pairs)} lines; put it on every line or on none")
    return pairs


def write_scored(path: str | os.PathLike[str], pairs: Sequence[LabelledPair], raw_scores: np.ndarray) -> None:
    """Pairs with their raw_score, readable again both as data and by ``PrecomputedScorer``."""
    with Path(path).open("w", encoding="utf-8") as f:
        for pair, raw in zip(pairs, raw_scores.tolist(), strict=True):
            row: dict[str, Any] = {"query": pair.query, "document": pair.document, "label": pair.label}
            if pair.old_score is not None:
                row["old_score"] = pair.old_score
            row["raw_score"] = raw
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


class PrecomputedScorer:
    """Scores from a JSONL file with one ``raw_score`` per line, in the order of the data file.

    Lines that also carry query/document must match the pair, which catches a file of another set.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def score(self, pairs: Sequence[LabelledPair]) -> ScoreResult:
        rows = _read_jsonl(self.path)
        if len(rows) != len(pairs):
            raise DataError(f"{self.path}: {len(rows)} scores for {len(pairs)} pairs")
        raw = np.empty(len(pairs), dtype=np.float64)
        for i, ((number, obj), pair) in enumerate(zip(rows, pairs, strict=True)):
            where = f"{self.path}:{number}"
            if "raw_score" not in obj:
                raise DataError(f"{where}: missing 'raw_score'")
            for key in ("query", "document"):
                if key in obj and obj[key] != getattr(pair, key):
                    raise DataError(f"{where}: '{key}' differs from the data file's pair {i + 1}")
            raw[i] = _finite(obj, "raw_score", where)
        return ScoreResult(raw, truncated=None)


def group_by_query(pairs: Sequence[LabelledPair]) -> list[tuple[str, list[int]]]:
    """(query, indices of its pairs), queries in order of first appearance: one request each."""
    groups: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(pair.query, []).append(i)
    return list(groups.items())


class TritonScorer:
    """Scores through the ``reranker`` ensemble over gRPC: one request per query with all of its
    documents, ``concurrency`` requests in flight, reading RAW_SCORES (the engine's score before
    calibration) and TRUNCATED. See docs/CONTRACT.md for the tensors."""

    def __init__(
        self,
        url: str = "localhost:8001",
        model_name: str = "reranker",
        concurrency: int = 8,
        instruction: str | None = None,
        timeout_s: float = 120.0,
        progress: bool = True,
        client: Any = None,
    ) -> None:
        import tritonclient.grpc as grpcclient  # only the scoring path needs tritonclient

        from reranker_client import build_inputs

        self._build_inputs = build_inputs

        self._grpc = grpcclient
        self.client = client if client is not None else grpcclient.InferenceServerClient(url=url)
        self.model_name = model_name
        self.concurrency = max(1, concurrency)
        self.instruction = instruction
        self.timeout_s = timeout_s
        self.progress = progress

    def _score_query(self, query: str, documents: list[str]) -> tuple[np.ndarray, int]:
        inputs = self._build_inputs(self._grpc, query, documents, instruction=self.instruction)
        # SCORES is requested though unused (it was needed while the ensemble deadlocked on output subsets).
        outputs = [self._grpc.InferRequestedOutput(name) for name in ("RAW_SCORES", "TRUNCATED", "SCORES")]
        try:
            result = self.client.infer(self.model_name, inputs, outputs=outputs, client_timeout=self.timeout_s)
        except self._grpc.InferenceServerException as e:
            raise ScoringError(f"{self.model_name}: {e}") from None
        raw = np.asarray(result.as_numpy("RAW_SCORES"), dtype=np.float64).ravel()
        if raw.size != len(documents):
            raise ScoringError(f"{self.model_name} returned {raw.size} RAW_SCORES for {len(documents)} documents")
        return raw, int(np.asarray(result.as_numpy("TRUNCATED")).sum())

    def score(self, pairs: Sequence[LabelledPair]) -> ScoreResult:
        from tqdm import tqdm

        groups = group_by_query(pairs)
        raw = np.empty(len(pairs), dtype=np.float64)
        truncated = 0
        with (
            ThreadPoolExecutor(max_workers=self.concurrency) as pool,
            tqdm(total=len(groups), unit="query", file=sys.stderr, disable=not self.progress, desc="scoring") as bar,
        ):
            futures = {
                pool.submit(self._score_query, query, [pairs[i].document for i in indices]): indices
                for query, indices in groups
            }
            try:
                for future in as_completed(futures):
                    scores, cut = future.result()
                    raw[futures[future]] = scores
                    truncated += cut
                    bar.update(1)
            except BaseException:
                for future in futures:  # one failed request fails the run: do not wait for the rest
                    future.cancel()
                raise
        return ScoreResult(raw, truncated)
