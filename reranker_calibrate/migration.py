"""Moving thresholds from an old stack to the served one, checked on queries the mapping never saw.

The old stack is what a legacy service ran before this server: the same checkpoint through
sentence-transformers, scored 0..1. ``old_stack_scores`` reproduces it; ``map_thresholds`` maps each old threshold
onto the calibrated scale on the mapping queries (same share of pairs kept, no labels needed) and reports
precision and recall of old and new on the held-out queries.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .metrics import OperatingPoint, map_threshold_by_quantile, operating_point
from .pair_scoring import LabelledPair
from .selection import query_folds

HELD_OUT_FOLDS = 5  # one query fold in five is held out


def old_stack_scores(pairs: Sequence[LabelledPair], model_dir: str, progress: bool = True) -> np.ndarray:
    """What a legacy sentence-transformers service returned for a bi-encoder: (1 + cosine) / 2 in 0..1, the
    scale Elasticsearch and OpenSearch give cosine similarity. Each distinct text is embedded once."""
    from sentence_transformers import SentenceTransformer  # the old stack's own library, for this command only

    model = SentenceTransformer(model_dir, device="cpu")
    texts = sorted({p.query for p in pairs} | {p.document for p in pairs})
    print(f"old stack: embedding {len(texts)} distinct texts with sentence-transformers", file=sys.stderr)
    vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=progress)
    index = {t: i for i, t in enumerate(texts)}
    cosine = np.array([float(vectors[index[p.query]] @ vectors[index[p.document]]) for p in pairs])
    return (1.0 + cosine) / 2.0


@dataclass(frozen=True)
class MappedThreshold:
    old_threshold: float
    new_threshold: float
    old: OperatingPoint  # old scores, old threshold, held-out queries
    new: OperatingPoint  # calibrated scores, mapped threshold, held-out queries

    @property
    def worst_gap(self) -> float:
        return max(abs(self.new.precision - self.old.precision), abs(self.new.recall - self.old.recall))


def map_thresholds(
    pairs: Sequence[LabelledPair], old: np.ndarray, calibrated: np.ndarray, thresholds: Sequence[float]
) -> list[MappedThreshold]:
    """Map on 4 query folds of 5, measure on the fifth (folds by sha256 of the query, as the fit's)."""
    held_out = query_folds([p.query for p in pairs], HELD_OUT_FOLDS) == 0
    labels = np.array([p.label for p in pairs], dtype=np.float64)
    rows = []
    for t in thresholds:
        new_t = map_threshold_by_quantile(old[~held_out], calibrated[~held_out], t)
        rows.append(MappedThreshold(
            t, new_t, operating_point(old[held_out], labels[held_out], t),
            operating_point(calibrated[held_out], labels[held_out], new_t),
        ))
    return rows


def render(rows: Sequence[MappedThreshold], n_pairs: int, n_held_out: int) -> str:
    lines = [f"Thresholds mapped on the other queries, measured on {n_held_out} held-out pairs of {n_pairs}:", "",
             "| old threshold | new threshold | old precision | new precision | old recall | new recall | worst gap |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.old_threshold:.3f} | {r.new_threshold:.4f} | {r.old.precision:.4f} | {r.new.precision:.4f} "
                     f"| {r.old.recall:.4f} | {r.new.recall:.4f} | {r.worst_gap:.4f} |")
    return "\n".join(lines) + "\n"
