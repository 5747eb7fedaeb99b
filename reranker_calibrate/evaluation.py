"""Data sets side by side: what the reranker buys over BM25 (MRR, NDCG@10, P@1 on the same candidates), and how
each calibration profile holds on each data set (ECE, Brier, log-loss, AUC): in domain and across domains."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from python_backends.calibrate.profiles import CalibrationProfile

from .bm25 import BM25
from .metrics import Metrics, evaluate
from .pair_scoring import LabelledPair, group_by_query


@dataclass(frozen=True)
class Ranking:
    mrr: float
    ndcg_at_10: float
    precision_at_1: float


def ranking_quality(pairs: Sequence[LabelledPair], scores: np.ndarray) -> Ranking:
    """Mean over queries with a relevant candidate; ties keep the data's order (stable sort)."""
    rr, ndcg, p1 = [], [], []
    for _, indices in group_by_query(pairs):
        labels = np.array([pairs[i].label for i in indices], dtype=np.float64)
        if labels.sum() == 0:
            continue
        ranked = labels[np.argsort(-scores[indices], kind="stable")]
        rr.append(1.0 / (1 + int(np.argmax(ranked > 0))))
        discounts = 1.0 / np.log2(np.arange(2, 12))
        ideal = np.sort(labels)[::-1][:10]
        ndcg.append(float((ranked[:10] * discounts[: ranked[:10].size]).sum() / (ideal * discounts[: ideal.size]).sum()))
        p1.append(float(ranked[0]))
    return Ranking(float(np.mean(rr)), float(np.mean(ndcg)), float(np.mean(p1)))


def bm25_scores(pairs: Sequence[LabelledPair]) -> np.ndarray:
    """BM25 of each pair, the corpus being every distinct document of the set."""
    documents = sorted({p.document for p in pairs})
    index = {d: i for i, d in enumerate(documents)}
    bm25 = BM25(documents)
    return np.array([bm25.score(p.query, index[p.document]) for p in pairs], dtype=np.float64)


def profile_on(profile: CalibrationProfile, pairs: Sequence[LabelledPair], raw: np.ndarray, n_bins: int = 10) -> Metrics:
    labels = np.array([p.label for p in pairs], dtype=np.float64)
    return evaluate(profile.apply(raw).astype(np.float64), labels, n_bins)


def render(
    sets: dict[str, tuple[Sequence[LabelledPair], np.ndarray, np.ndarray]],
    profiles: dict[str, CalibrationProfile],
) -> str:
    """Markdown: per set (pairs, raw scores, BM25 scores), ranking of the served model vs BM25, then every profile
    on every set."""
    lines = ["## Ranking: served model vs BM25 on the same candidates", "",
             "| data set | pairs | queries | order | MRR | NDCG@10 | P@1 |", "|---|---|---|---|---|---|---|"]
    for name, (pairs, raw, bm25) in sets.items():
        queries = len({p.query for p in pairs})
        for order, scores in (("served model", raw), ("BM25", bm25)):
            r = ranking_quality(pairs, scores)
            lines.append(f"| {name} | {len(pairs)} | {queries} | {order} | {r.mrr:.4f} | {r.ndcg_at_10:.4f} | "
                         f"{r.precision_at_1:.4f} |")
    lines += ["", "## Calibration: each profile on each data set (in-sample for its own set)", "",
              "| profile | fitted on | data set | ECE | Brier | log-loss | AUC |", "|---|---|---|---|---|---|---|"]
    for pname, profile in profiles.items():
        for name, (pairs, raw, _) in sets.items():
            m = profile_on(profile, pairs, raw)
            lines.append(f"| `{profile.tag}` | {pname} | {name} | {m.ece:.4f} | {m.brier:.4f} | {m.log_loss:.4f} | "
                         f"{m.auc:.4f} |")
    return "\n".join(lines) + "\n"
