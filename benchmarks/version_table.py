#!/usr/bin/env python3
"""One table across vLLM releases from benchmark runs of each (benchmarks/gpu_run.sh, one folder per release holding
<model>.benchmark.json): per shape, the ensemble's and the direct engine's rate and c=1 P50, whether the served scores
equal the direct engine's of the same release, and the served scores against the first folder's release (max |raw
diff|, top-10 overlap) on the same probe requests and the same random-weight checkpoint.

    python3 benchmarks/version_table.py --out benchmarks/results/X/versions.json \\
        benchmarks/results/X/vllm-0.26.0 benchmarks/results/X/vllm-0.27.1 benchmarks/results/X/vllm-0.34.0
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.report import compare_raw  # noqa: E402

SHAPES = {"qwen3": "Qwen3", "xlmr": "XLM-R"}
LEVELS = (1, 8, 32)


def level(result: dict, concurrency: int) -> dict | None:
    return next((lv for lv in result.get("levels") or [] if lv["concurrency"] == concurrency), None)


def rate(lv: dict | None) -> float | None:
    """Pairs/s over the whole level: the steady window can flatter a system that answers in bursts."""
    return lv.get("wall", {}).get("pairs_per_s", lv["pairs_per_s"]) if lv else None


def shape_row(run: dict, base: dict | None) -> dict:
    triton, direct = run.get("triton", {}), run.get("async_llm", {})
    row = {"triton_c1_p50_ms": (level(triton, 1) or {}).get("latency_ms", {}).get("p50"),
           "direct_c1_p50_ms": (level(direct, 1) or {}).get("latency_ms", {}).get("p50")}
    for c in LEVELS[1:]:
        row[f"triton_c{c}_pairs_s"], row[f"direct_c{c}_pairs_s"] = rate(level(triton, c)), rate(level(direct, c))
    served = (run.get("cross_check") or {}).get("triton~async_llm") or {}
    row["served_vs_direct_max_raw_diff"] = served.get("max_abs_raw_diff")
    if base is not None and triton.get("probe") and base.get("triton", {}).get("probe"):
        c = compare_raw(base["triton"]["probe"], triton["probe"]) or {}
        row["vs_base_max_raw_diff"], row["vs_base_top10_overlap_min"] = c.get("max_abs_raw_diff"), c.get(
            "top10_overlap_min")
    return row


def environment_of(run: dict) -> dict:
    """The run's recorded environment; a run made before it was recorded names its vLLM only in its work folder
    (gpu_run.sh: --work /tmp/bench/<version>/<model>)."""
    if run.get("environment"):
        return run["environment"]
    return {"vllm": Path(run.get("settings", {}).get("work", "")).parent.name or None, "torch": None}


def collect(folders: list[Path]) -> list[dict]:
    runs = []
    for folder in folders:
        entry = {"folder": str(folder), "shapes": {}}
        for model in SHAPES:
            path = folder / f"{model}.benchmark.json"
            if path.is_file():
                entry["shapes"][model] = json.loads(path.read_text())
                entry.setdefault("environment", environment_of(entry["shapes"][model]))
        runs.append(entry)
    base = runs[0]["shapes"] if runs else {}
    return [{"folder": r["folder"], "environment": r.get("environment", {}),
             "shapes": {m: shape_row(run, base.get(m) if r is not runs[0] else None) for m, run in r["shapes"].items()}}
            for r in runs]


def _f(x, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def markdown(rows: list[dict]) -> str:
    head = ("| vLLM | torch | shape | Triton c=1 P50 ms | direct c=1 P50 ms | Triton / direct pairs/s c=8 | c=32 | "
            "served = direct (max raw diff) | vs first release: max raw diff, top-10 overlap |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        env = r["environment"]
        for model, s in r["shapes"].items():
            versus = ("(baseline)" if "vs_base_max_raw_diff" not in s else
                      f"{_f(s['vs_base_max_raw_diff'], '.3g')}, {_f(s['vs_base_top10_overlap_min'], '.2f')}")
            lines.append(
                f"| {env.get('vllm') or '-'} | {env.get('torch') or '-'} | {SHAPES[model]} | {_f(s['triton_c1_p50_ms'])} | "
                f"{_f(s['direct_c1_p50_ms'])} | {_f(s['triton_c8_pairs_s'])} / {_f(s['direct_c8_pairs_s'])} | "
                f"{_f(s['triton_c32_pairs_s'])} / {_f(s['direct_c32_pairs_s'])} | "
                f"{_f(s['served_vs_direct_max_raw_diff'], '.3g')} | {versus} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="one folder per release; the first is the baseline")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    rows = collect(args.folders)
    print(markdown(rows))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
