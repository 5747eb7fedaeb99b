"""What a benchmark run reports: per level the share of the FLOP ceiling, the raw-score cross-check between systems
(and between a sweep point and the base point: max |diff|, Spearman per request), the table, the JSON and the PNG.

Results are keyed by system name for the base point (the committed engine_args) and ``<system>@<point>`` for a
sweep point (one override)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from benchmarks import rounds
from benchmarks.procs import log
from benchmarks.systems import LOAD_SYSTEMS, SYSTEMS

NOMINAL_BF16_FLOPS = 790e12  # BRIEF.md's H200 figure, used only when no matmul was measured
COLORS = {"triton": "tab:blue", "async_llm": "tab:red", "engine_step": "tab:purple", "vllm_same": "tab:orange",
          "vllm_default": "tab:brown", "hf": "tab:green"}


def load_keys(results: dict) -> list[str]:
    """Result keys of load systems, base point first, in registry order."""
    keys = [k for k in results if isinstance(results[k], dict) and k.split("@")[0] in LOAD_SYSTEMS]
    return sorted(keys, key=lambda k: ("@" in k, LOAD_SYSTEMS.index(k.split("@")[0]), k))


def label(key: str) -> str:
    name, _, point = key.partition("@")
    return SYSTEMS[name].label + (f" [{point}]" if point else "")


def ceiling(results: dict) -> tuple[float, str]:
    m = results.get("matmul", {})
    if m.get("status") == "ok" and m.get("flops_per_s"):
        return m["flops_per_s"], f"measured {m['tflops']} TFLOP/s ({m['dtype']}, {m['n']}^3, {m['device']})"
    return NOMINAL_BF16_FLOPS, "nominal 790 TFLOP/s (no matmul measured)"


def finish_levels(results: dict) -> None:
    rate, _ = ceiling(results)
    for key in load_keys(results):
        for level in results[key].get("levels", []):
            level["ceiling_share"] = round(level["useful_flops_per_s"] / rate, 4)
            level["useful_tflops"] = round(level["useful_flops_per_s"] / 1e12, 2)


def compare_raw(a: list[dict], b: list[dict]) -> dict | None:
    """Raw scores of the same probe requests: max |diff|, Spearman and top-10 overlap per request."""
    import numpy as np

    diffs, rhos, overlaps = [], [], []
    for pa, pb in zip(a, b):
        x, y = np.asarray(pa["raw"], dtype=float), np.asarray(pb["raw"], dtype=float)
        if x.shape != y.shape or not len(x):
            continue
        diffs.append(float(np.max(np.abs(x - y))))
        rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
        rhos.append(float(np.corrcoef(rx, ry)[0, 1]) if len(x) > 1 else 1.0)
        k = min(10, len(x))
        overlaps.append(len(set(np.argsort(-x)[:k]) & set(np.argsort(-y)[:k])) / k)
    if not diffs:
        return None
    return {"max_abs_raw_diff": round(max(diffs), 5), "max_abs_raw_diff_per_request": [round(d, 5) for d in diffs],
            "spearman_per_request": [round(r, 4) for r in rhos], "spearman_min": round(min(rhos), 4),
            "top10_overlap_per_request": [round(o, 2) for o in overlaps],
            "top10_overlap_min": round(min(overlaps), 3), "raw_std": round(float(np.std(a[0]["raw"])), 5)}


def comparisons(results: dict) -> dict:
    """Triton against each in-process system of the same point, level by level (benchmarks/rounds.py)."""
    out = {}
    for key in load_keys(results):
        name, _, point = key.partition("@")
        triton_key = "triton" + (f"@{point}" if point else "")
        if name in ("triton", "hf") or triton_key not in results or not results[key].get("levels"):
            continue
        rows = rounds.compare(results[triton_key], results[key])
        if rows:
            out[f"{triton_key}~{key}"] = rows
    return out


def cross_check(results: dict) -> dict:
    """Base point: every pair of systems (Triton gRPC and HTTP against the rest). Sweep points: each against the
    same system at the base point (e.g. FP8 against bf16). The parity step's reference against every system."""
    probes = {k: results[k]["probe"] for k in load_keys(results) if results[k].get("probe")}
    if results.get("triton", {}).get("probe_http"):
        probes["triton_http"] = results["triton"]["probe_http"]
    for again in ("probe_repeat", "probe_alone"):  # the direct engine's own scores, its steps shared differently
        if results.get("async_llm", {}).get(again):
            probes[f"async_llm_{again.split('_')[1]}"] = results["async_llm"][again]
    out = {}
    base = [k for k in probes if "@" not in k]
    for i, a in enumerate(base):
        for b in base[i + 1:]:
            if (c := compare_raw(probes[a], probes[b])) is not None:
                out[f"{a}~{b}"] = c
    for key in (k for k in probes if "@" in k):
        name = key.split("@")[0]
        if name in probes and (c := compare_raw(probes[name], probes[key])) is not None:
            out[f"{name}~{key}"] = c
    reference = results.get("parity", {}).get("probe")
    for key in probes if reference else ():
        if (c := compare_raw(reference, probes[key])) is not None:
            out[f"parity~{key}"] = c
    return out


def plot(results: dict, path: Path, title: str) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return "matplotlib missing: no plot"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for key in load_keys(results):
        levels = results[key].get("levels") or []
        if not levels:
            continue
        c = [lv["concurrency"] for lv in levels]
        color, style = COLORS[key.split("@")[0]], ":" if "@" in key else "-"
        ax1.plot(c, [lv["pairs_per_s"] for lv in levels], "o" + style, color=color, label=label(key))
        ax2.plot(c, [lv["latency_ms"]["p50"] for lv in levels], "o" + style, color=color, label=f"{label(key)} P50")
        ax2.plot(c, [lv["latency_ms"]["p99"] for lv in levels], "s--", color=color, alpha=0.5)
    rate, _ = ceiling(results)
    work = next((results[k]["workload"] for k in load_keys(results) if results[k].get("workload")), None)
    if work:
        ceiling_pairs = rate / work["flop_per_token"] / work["tokens_per_pair_mean"]
        ax1.axhline(ceiling_pairs, color="gray", ls=":", label=f"FLOP ceiling ({ceiling_pairs:.0f} pairs/s)")
    ticks = sorted({lv["concurrency"] for k in load_keys(results) for lv in results[k].get("levels") or []})
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        if ticks:
            ax.set_xticks(ticks, [str(t) for t in ticks])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_xlabel("concurrent requests")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_ylabel("pairs / s")
    ax1.set_title("throughput")
    ax2.set_yscale("log")
    ax2.set_ylabel("latency (ms)")
    ax2.set_title("latency P50 (solid) / P99 (dashed)")
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None


def _system_lines(key: str, r: dict, w: int) -> list[str]:
    if r.get("status") == "error" and not r.get("levels"):
        return [f"{key:<{w}} ERROR {r.get('error', '')[:110]}"]
    mem = r.get("gpu_memory", {}).get("peak_over_baseline_mib")
    if r.get("torch_max_memory_allocated_mib") is not None:
        mem = r["torch_max_memory_allocated_mib"]
    mem_s = f"{mem / 1024:.1f}" if mem is not None else "-"
    lines = []
    for lv in r.get("levels", []):
        lat, ts = lv["latency_ms"], lv.get("triton_stats", {})
        pre = f"{ts['share_pre_calibrate'] * 100:.1f}%" if ts else ""
        vllm = f"{ts['share_vllm'] * 100:.1f}%" if "share_vllm" in ts else ""
        flag = "" if lv["complete"] and not lv["errors"] else "*"
        wall = lv.get("wall", {}).get("pairs_per_s", lv["pairs_per_s"])
        lines.append(f"{key:<{w}}{lv['concurrency']:>5}{str(lv['requests']) + flag:>6}{lv['pairs_per_s']:>9.1f}"
                     f"{wall:>9.1f}{lv['tokens_per_s']:>9}{lv.get('ceiling_share', 0) * 100:>6.1f}%"
                     f"{lat['p50'] or 0:>9.1f}{lat['p95'] or 0:>9.1f}{lat['p99'] or 0:>9.1f}"
                     f"{mem_s:>8}{pre:>8}{vllm:>7}")
    first = (r.get("levels") or [{}])[0]
    marks = first.get("triton_stats", {}).get("timeline_ms")
    if marks and first["concurrency"] == 1:
        lines.append(f"{'':{w}}  c=1 timeline (mean ms since send): " + ", ".join(f"{k} {v}" for k, v in marks.items()))
    extra = [f"startup {r['startup_s']} s"] if r.get("startup_s") is not None else []
    rates = [lv["prefix_cache_hit_rate"] for lv in r.get("levels", []) if lv.get("prefix_cache_hit_rate") is not None]
    if rates:
        extra.append(f"prefix-cache hit {min(rates) * 100:.1f}-{max(rates) * 100:.1f}% of prompt tokens")
    if "token_count_mismatches" in r:
        extra.append(f"token-count mismatches {r['token_count_mismatches']}")
    if r.get("padding_overhead") is not None:
        extra.append(f"padding +{r['padding_overhead'] * 100:.1f}% tokens")
    if r.get("http_vs_grpc_max_abs_diff") is not None:
        extra.append(f"HTTP vs gRPC raw max|diff| {r['http_vs_grpc_max_abs_diff']}")
    if r.get("single_request_split"):
        split = r["single_request_split"]
        extra.append("one at a time, P50 ms: " + ", ".join(f"{way} {v['p50']}" for way, v in split.items()))
    if r.get("status") != "ok":
        extra.append(f"status {r.get('status')}: {r.get('error', '')[:100]}")
    if extra:
        lines.append(f"{'':{w}}  " + "; ".join(extra))
    if r.get("overload"):
        o = r["overload"]
        lines.append(f"{'':{w}}  overload x{o['factor']} ({o['offered_requests_per_s']} req/s for {o['wall_s']} s): "
                     f"sent {o['sent']}, answered {o['answered']} (p99 {o['answered_latency_ms']['p99']} ms), refused "
                     f"{o['refused']} (p50 {o['refused_latency_ms']['p50']} ms), other {sum(o['other'].values())}, "
                     f"lost {o['lost']}; GPU memory peak {o['gpu_memory']['peak_mib']} MiB; probe after: max|diff| "
                     f"{o['probe_after_max_abs_diff']}")
    if r.get("invariance"):
        inv = r["invariance"]
        lines.append(f"{'':{w}}  invariance ({inv['probes']} probes x {inv['rounds']} rounds against alone): " + "; ".join(
            f"c={row['concurrency']} max|diff| {row['max_abs_diff']:.3g}, {row['pairs_changed']}/{row['pairs']} pairs "
            f"moved, top-10 changed {row['top10_changed']}/{row['answers']}" for row in inv["levels"]))
    for row in (r.get("perf_analyzer") or {}).get("levels", []):
        pa = row.get("perf_analyzer", {})
        lines.append(f"{'':{w}}  perf_analyzer c={row['concurrency']}: {pa.get('infer_per_s')} infer/s "
                     f"(p50 {pa.get('p50_ms')} ms) vs load generator {row['load_generator']['infer_per_s']} "
                     f"(p50 {row['load_generator']['p50_ms']} ms): ratio {row.get('ratio')}")
    return lines


def table(results: dict) -> str:
    rate, how = ceiling(results)
    lines = [f"FLOP ceiling: {how}"]
    env = results.get("environment")
    if env:
        lines.insert(0, f"vLLM {env['vllm']}, torch {env['torch']}, triton {env['triton']}, GPU {env['gpu']}, commit "
                        f"{env['commit']}, compile cache at start: {env['compile_cache_files_at_start']} files")
    work = next((results[k]["workload"] for k in load_keys(results) if results[k].get("workload")), None)
    if work:
        lines.append(f"load: {work['docs_per_request']} docs x {work['tokens_per_pair_mean']} tokens/pair "
                     f"({work['tokens_per_pair_min']}-{work['tokens_per_pair_max']}), top_n {work['top_n']}, "
                     f"{work['flop_per_token'] / 1e9:.4g} GFLOP/token, text: {work['text']['source']}, "
                     f"preprocess encode {work['encode_ms_per_request_median']} ms/request")
    w = max([14] + [len(k) + 1 for k in load_keys(results)])
    lines.append(f"{'system':<{w}}{'conc':>5}{'req':>6}{'pairs/s':>9}{'wall':>9}{'tok/s':>9}{'%ceil':>7}{'p50ms':>9}"
                 f"{'p95ms':>9}{'p99ms':>9}{'memGiB':>8}{'pre+cal':>8}{'vllm':>7}")
    for key in load_keys(results):
        lines += _system_lines(key, results[key], w)
    for pair, rows in comparisons(results).items():
        lines.append(f"{pair.replace('~', ' / ')}: " + "; ".join(
            f"c={r['concurrency']} pairs/s {r['rate_ratio']} ({r['rate_window']}), P50 {r['p50_ratio']}x" for r in rows))
    for pair, c in (results.get("cross_check") or {}).items():
        if "max_abs_raw_diff" in c:
            lines.append(f"scores {pair}: max|raw diff| {c['max_abs_raw_diff']} (raw std {c['raw_std']}), "
                         f"spearman >= {c['spearman_min']}, top-10 overlap >= {c['top10_overlap_min']} "
                         f"({len(c['spearman_per_request'])} requests)")
    lines.append("* = level incomplete (errors or time budget); pairs/s, tok/s, %ceil: over the steady window (every "
                 "worker answered once .. last send, loadtest/closed_loop.py), wall = pairs/s over the whole level; "
                 "levels: the median of the rounds (A B A B); a / b: rates over the steady window, or over the whole level "
                 "where, in any round, either side's differ by more than 10%; "
                 "%ceil = useful FLOP/s over the matmul rate; pre+cal (preprocess from execute to answer, its "
                 "counters, and calibrate's compute time) and vllm (hand-over to answer in rerank_engine, its "
                 "counters) = shares of the mean request latency")
    return "\n".join(lines)


def export(s, results: dict, final: bool) -> None:
    """What comes back from the device: benchmark.json, bench_logs.tar.gz and, at the end, table.txt and
    benchmark.png in s.out; called after every system, so a call killed at its limit still returns what was done."""
    finish_levels(results)
    if final:
        try:
            results["cross_check"] = cross_check(results)
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            results["cross_check"] = {"error": str(exc)}
        results["comparison"] = comparisons(results)
    text = json.dumps(results, indent=1, default=str) + "\n"
    (s.work / ("results-tiny.json" if s.tiny else "results.json")).write_text(text)
    s.out.mkdir(parents=True, exist_ok=True)
    (s.out / "benchmark.json").write_text(text)
    _pack_logs(s.logs, s.out / "bench_logs.tar.gz")
    if final:
        args = s.engine_args()
        title = (f"{s.hub_id} shape ({'tiny, ' if s.tiny else ''}{args.get('dtype')}), "
                 f"{s.shape.n_docs} docs x ~{s.shape.doc_tokens} tokens, {ceiling(results)[1]}")
        note = plot(results, s.out / "benchmark.png", title)
        if note:
            log(note)
        (s.out / "table.txt").write_text(table(results) + "\n")


def _pack_logs(logs: Path, path: Path) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for f in sorted(p for p in logs.rglob("*") if p.is_file() and p.suffix != ".cut"):
            name = f"logs/{f.relative_to(logs)}"
            if f.name == "perf_input.json":
                continue
            if f.stat().st_size <= 4 << 20:
                tar.add(f, arcname=name)
            else:  # keep the head and the tail of a huge log
                data = f.read_bytes()
                cut = f.with_name(f.name + ".cut")
                cut.write_bytes(data[: 1 << 20] + b"\n[... cut ...]\n" + data[-(2 << 20):])
                tar.add(cut, arcname=name)
                cut.unlink()
