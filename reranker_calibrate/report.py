"""The Markdown + PNG report of a calibration run (``selection.analyse``).

matplotlib is imported here only, with the Agg backend: the report is written to files on
machines without a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from python_backends.calibrate.profiles import Calibrator, sigmoid  # noqa: E402

from .metrics import OperatingPoint, reliability_bins, roc_auc  # noqa: E402
from .selection import CalibrationRun  # noqa: E402


def _fmt(v: float | None) -> str:
    return "n/a" if v is None or np.isnan(v) else f"{v:.4f}"


def _fmt_params(calibrator: Calibrator | None) -> str:
    if calibrator is None:
        return ""
    params = calibrator.params()
    if calibrator.method == "isotonic":
        return f"{len(params['x'])} knots"
    return ", ".join(f"{k}={v:.4g}" for k, v in params.items())


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def _point_cells(point: OperatingPoint | None) -> tuple[str, ...]:
    """threshold, precision, recall, kept fraction."""
    if point is None:
        return ("not reachable", "", "", "")
    return (f"{point.threshold:.4f}", _fmt(point.precision), _fmt(point.recall), _fmt(point.kept_fraction))


def render_markdown(run: CalibrationRun, png_name: str, profile_name: str) -> str:
    p = run.profile
    n = len(run.pairs)
    pos, neg = run.raw[run.labels == 1], run.raw[run.labels == 0]
    lines = [
        f"# Calibration report: `{p.tag}`",
        "",
        f"- model: `{p.model}`, raw score type: `{p.score_type}`",
        f"- data: {n} pairs, {p.fitted_on['queries']} queries, {p.fitted_on['relevant']} relevant"
        + (f" (`{p.fitted_on['data']}`)" if "data" in p.fitted_on else ""),
        f"- method chosen by held-out log-loss over {run.n_folds} folds by query: every pair is scored by "
        "the fit that did not see its query; the profile is the chosen method fitted on all pairs",
        "- truncation: "
        + (
            "unknown (raw scores were precomputed)"
            if run.truncated is None
            else f"{run.truncated} of {n} pairs were cut to fit max_model_len"
        ),
        f"- raw scores: relevant mean {pos.mean():.4f} (min {pos.min():.4f}), irrelevant mean {neg.mean():.4f} "
        f"(max {neg.max():.4f}), overall range {run.raw.min():.4f} .. {run.raw.max():.4f}; "
        f"ranking AUC {roc_auc(run.raw, run.labels):.4f}",
        "",
        f"## Methods (held-out metrics; ECE with {run.n_bins} equal-width bins)",
        "",
        _row("method", "params (fitted on all pairs)", "ECE", "Brier", "log-loss", "AUC", "note"),
        _row(*["---"] * 7),
    ]
    for r in run.results:
        m = r.metrics
        name = f"**{r.method}** (chosen)" if r is run.chosen else r.method
        cells = [_fmt(None)] * 4 if m is None else [_fmt(m.ece), _fmt(m.brier), _fmt(m.log_loss), _fmt(m.auc)]
        lines.append(_row(name, _fmt_params(r.calibrator), *cells, r.note or ""))
    lines += [
        "",
        "## Chosen profile",
        "",
        f"`{profile_name}`: method `{p.method}`, fitted on all {n} pairs: {_fmt_params(p.calibrator)}. "
        f"The ensemble reports it as CALIBRATION = `{p.tag}`.",
        "",
        "## Thresholds on the calibrated score (all pairs; keep score >= threshold)",
        "",
        _row("target", "threshold", "precision", "recall", "kept"),
        _row(*["---"] * 5),
        _row(f"precision >= {run.target_precision:g}", *_point_cells(run.precision_point)),
        _row(f"recall >= {run.target_recall:g}", *_point_cells(run.recall_point)),
    ]
    if run.old_mappings:
        lines += [
            "",
            "## Old -> new thresholds",
            "",
            "Same fraction: the new threshold keeps as many pairs as the old one did (no labels needed). "
            "Same precision: the lowest new threshold whose precision is at least the old one's.",
            "",
            _row(
                "old threshold",
                "old precision",
                "old recall",
                "old kept",
                "new (same fraction)",
                "its precision",
                "its recall",
                "new (same precision)",
                "its precision",
                "its recall",
            ),
            _row(*["---"] * 10),
        ]
        for mapping in run.old_mappings:
            old_cells = _point_cells(mapping.old)[1:]
            fraction_cells = _point_cells(mapping.same_fraction)[:3]
            precision_cells = _point_cells(mapping.same_precision)[:3]
            lines.append(_row(f"{mapping.old.threshold:g}", *old_cells, *fraction_cells, *precision_cells))
    lines += ["", f"![reliability and score distributions]({png_name})", ""]
    return "\n".join(lines)


def _hist_by_label(ax: Any, values: np.ndarray, labels: np.ndarray, title: str, xlabel: str) -> None:
    bins = np.linspace(values.min(), values.max(), 31) if values.max() > values.min() else 10
    ax.hist(values[labels == 0], bins=bins, alpha=0.6, label="irrelevant (0)", color="tab:red")
    ax.hist(values[labels == 1], bins=bins, alpha=0.6, label="relevant (1)", color="tab:green")
    ax.set(title=title, xlabel=xlabel, ylabel="pairs")
    ax.legend()


def render_png(run: CalibrationRun, path: Path) -> None:
    """Reliability before/after, score histograms by label, the map itself, and old vs new when known."""
    old = run.old_scores
    cols = 3 if old is not None else 2
    fig, axes = plt.subplots(2, cols, figsize=(6 * cols, 10), squeeze=False)
    ax = axes[0][0]
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfect")
    curves = (
        ("before: sigmoid(raw)", sigmoid(run.raw)),
        (f"after: {run.chosen.method} (out-of-fold)", run.chosen.held_out),
    )
    for label, probs in curves:
        bins = reliability_bins(probs, run.labels, run.n_bins)  # type: ignore[arg-type]
        filled = bins.count > 0
        (line,) = ax.plot(bins.mean_predicted[filled], bins.fraction_positive[filled], label=label)
        ax.scatter(
            bins.mean_predicted[filled],
            bins.fraction_positive[filled],
            s=10 + 4 * bins.count[filled],
            color=line.get_color(),
        )
    ax.set(
        title="Reliability (marker area ~ pairs in bin)",
        xlabel="mean predicted probability",
        ylabel="fraction relevant",
        xlim=(0, 1),
        ylim=(0, 1),
    )
    ax.legend()
    _hist_by_label(axes[0][1], run.raw, run.labels, "Raw engine score", f"raw ({run.profile.score_type})")
    _hist_by_label(axes[1][0], run.calibrated, run.labels, f"Calibrated score ({run.profile.tag})", "probability")
    targets = (
        (run.precision_point, "--", f"precision >= {run.target_precision:g}"),
        (run.recall_point, ":", f"recall >= {run.target_recall:g}"),
    )
    for point, style, label in targets:
        if point is not None:
            axes[1][0].axvline(point.threshold, color="black", linestyle=style, label=label)
    axes[1][0].legend()
    ax = axes[1][1]
    order = np.argsort(run.raw)
    ax.plot(run.raw[order], run.calibrated[order], color="tab:blue")
    ax.set(title="Calibration map", xlabel="raw score", ylabel="calibrated probability")
    if old is not None:
        _hist_by_label(axes[0][2], old, run.labels, "Old score", "old score")
        ax = axes[1][2]
        ax.scatter(old, run.calibrated, s=8, c=np.where(run.labels == 1, "tab:green", "tab:red"), alpha=0.6)
        for m in run.old_mappings:
            ax.plot([m.old.threshold], [m.same_fraction.threshold], marker="x", color="black")
        ax.set(title="Old vs new (x: mapped thresholds)", xlabel="old score", ylabel="calibrated score")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(run: CalibrationRun, out_dir: Path, profile_name: str) -> tuple[Path, Path]:
    """Write report.md and report.png into ``out_dir``; returns their paths."""
    md, png = out_dir / "report.md", out_dir / "report.png"
    render_png(run, png)
    md.write_text(render_markdown(run, png.name, profile_name), encoding="utf-8")
    return md, png
