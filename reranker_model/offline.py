"""`reranker-model score`: a variant's raw scores without Triton, through the same code the server runs.

The preprocess step's `Preprocessor` (template, truncation, token ids) and the engine step's `AsyncEngine` (vLLM
in-process, the variant's EngineSettings), built from the variant's own config files: one request per query with
all its documents, as the served ensemble gets them, so the raw scores are RAW_SCORES.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from python_backends.engine import AsyncEngine, Deadline, EngineSettings, SequenceBatch
from python_backends.model_repository import PREPROCESS, VariantModel, config_dict, config_path
from python_backends.preprocess.settings import PreprocessSettings
from python_backends.preprocess.step import Preprocessor
from python_backends.triton_params import ModelParameters


@contextmanager
def open_steps(preprocess_config: dict[str, Any], variant: VariantModel) -> Iterator[tuple[Preprocessor, AsyncEngine]]:
    """The preprocess of a step config (as Triton passes it) and the engine of the variant's engine config, the
    engine closed on exit."""
    preprocess = Preprocessor.from_settings(PreprocessSettings.from_model_config(preprocess_config, variant))
    engine = AsyncEngine(EngineSettings.from_parameters(ModelParameters.from_model_config(variant.engine_config)))
    try:
        yield preprocess, engine
    finally:
        engine.close()


def open_variant(repository: Path, name: str) -> Any:
    """The preprocess and engine of variant `name` of `repository`."""
    preprocess_config = config_dict(config_path(repository, PREPROCESS, name, fallback=False))
    return open_steps(preprocess_config, VariantModel.for_step(repository / PREPROCESS, preprocess_config))


def raw_scores(preprocess: Preprocessor, engine: AsyncEngine, query: str, documents: list[str],
               instruction: str | None = None) -> np.ndarray:
    """One request's raw scores, one per document."""
    text = lambda *values: np.asarray([[v.encode() for v in values]], dtype=object)  # noqa: E731 - [1, n] as Triton
    inputs = preprocess(text(query), text(*documents), None if instruction is None else text(instruction))
    # checked by the engine's own contract, as the engine step checks what reaches it
    return engine.submit(SequenceBatch.from_arrays(inputs.sequences.tensors(), engine.limits), Deadline()).result()


@dataclass(frozen=True)
class ScoredPairs:
    rows: list[dict[str, Any]]  # the input lines, each with its raw_score
    seconds: float

    @property
    def rate(self) -> float:
        return len(self.rows) / self.seconds if self.seconds else float("inf")


def read_pair_rows(path: Path) -> list[dict[str, Any]]:
    """JSONL lines with "query" and "document" (other fields, e.g. "label", are kept as they are)."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            row = json.loads(line)
            if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("query", "document")):
                raise ValueError(f"{path}:{number}: expected a JSON object with string 'query' and 'document'")
            if not isinstance(row.get("instruction", ""), str):
                raise ValueError(f"{path}:{number}: 'instruction' must be a string")
            rows.append(row)
    return rows


def requests_of(rows: list[dict[str, Any]], instruction: str | None, max_documents: int
                ) -> list[tuple[str, str | None, list[int]]]:
    """The requests a served client would send for the rows: (query, instruction, row indices), one per query and
    instruction (a row's own "instruction", else `instruction`), at most `max_documents` rows each, in row order."""
    groups: dict[tuple[str, str | None], list[int]] = {}
    for index, row in enumerate(rows):
        groups.setdefault((row["query"], row.get("instruction", instruction)), []).append(index)
    return [(query, asked, indices[start:start + max_documents])
            for (query, asked), indices in groups.items() for start in range(0, len(indices), max_documents)]


def score_rows(repository: Path, name: str, rows: list[dict[str, Any]], instruction: str | None = None,
               progress: bool = True) -> ScoredPairs:
    """Every row with its raw_score, scored as `requests_of` groups them: each pair as a served request scores it."""
    from tqdm import tqdm

    scored = [dict(row) for row in rows]
    with open_variant(repository, name) as (preprocess, engine):
        started = time.monotonic()
        with tqdm(total=len(rows), unit="pair", file=sys.stderr, disable=not progress, desc="scoring") as bar:
            for query, asked, chunk in requests_of(rows, instruction, preprocess.limits.max_documents):
                scores = raw_scores(preprocess, engine, query, [rows[i]["document"] for i in chunk], asked)
                for index, score in zip(chunk, scores.tolist()):
                    scored[index]["raw_score"] = score
                bar.update(len(chunk))
        seconds = time.monotonic() - started
    return ScoredPairs(scored, seconds)
