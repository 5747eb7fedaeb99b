"""Draw the chart's Grafana dashboard from a real Prometheus, where no Grafana is at hand: each panel's own queries
(deploy/helm/reranker/dashboards/reranker.json, `$model` and `$__rate_interval` filled in) are asked of Prometheus's
query_range API over the last minutes and drawn as the panel's lines, titled and laid out in the dashboard's order.

    python tools/dashboard_preview.py --prometheus http://localhost:9090 --minutes 10 --out docs/dashboard.png

The picture shows what the series hold, not Grafana's styling.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deploy" / "helm" / "reranker" / "dashboards" / "reranker.json"
COLUMNS = 3


def query_range(prometheus: str, expr: str, start: float, end: float, step_s: int) -> list[dict]:
    query = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": step_s})
    with urllib.request.urlopen(f"{prometheus}/api/v1/query_range?{query}", timeout=30) as response:
        answer = json.load(response)
    if answer["status"] != "success":
        raise RuntimeError(f"{expr}: {answer}")
    return answer["data"]["result"]


def filled(expr: str, model: str, rate_interval: str) -> str:
    return expr.replace("$model", model).replace("$__rate_interval", rate_interval)


def legend(target: dict, labels: dict[str, str]) -> str:
    """Grafana's legendFormat ({{label}} replaced), else the labels."""
    form = target.get("legendFormat")
    if form:
        return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), form)
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__") or target.get("expr", "")[:40]


def draw(panels: list[dict], series: list[list[tuple[str, list[float], list[float]]]], start: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = math.ceil(len(panels) / COLUMNS)
    figure, axes = plt.subplots(rows, COLUMNS, figsize=(6 * COLUMNS, 3.2 * rows), squeeze=False)
    for ax, panel, lines in zip(axes.flat, panels, series):
        ax.set_title(panel["title"], fontsize=10, loc="left")
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        for name, times, values in lines:
            ax.plot([(t - start) / 60 for t in times], values, label=name[:48], linewidth=1.2)
        if lines:
            ax.legend(fontsize=7, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")
        ax.set_xlabel("minutes", fontsize=8)
        ax.set_ylabel(unit, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(panels):]:
        ax.axis("off")
    figure.tight_layout()
    figure.savefig(out, dpi=80)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prometheus", default="http://localhost:9090")
    parser.add_argument("--dashboard", type=Path, default=DASHBOARD)
    parser.add_argument("--model", default="reranker", help="the dashboard's $model")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate-interval", default="1m", help="Grafana's $__rate_interval")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    end = time.time()
    start = end - args.minutes * 60
    step_s = max(5, int(args.minutes * 60 / 200))
    panels = [p for p in json.loads(args.dashboard.read_text())["panels"] if p.get("type") != "row"]
    series = []
    for panel in panels:
        lines = []
        for target in panel.get("targets", []):
            for result in query_range(args.prometheus, filled(target["expr"], args.model, args.rate_interval),
                                      start, end, step_s):
                points = [(float(t), float(v)) for t, v in result["values"] if v not in ("NaN", "+Inf", "-Inf")]
                if points:
                    times, values = zip(*points)
                    lines.append((legend(target, result["metric"]), list(times), list(values)))
        series.append(lines)
        print(f"{panel['title']}: {len(lines)} series")
    draw(panels, series, start, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
