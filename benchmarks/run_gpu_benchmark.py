#!/usr/bin/env python3
"""Reranker serving benchmark on one GPU: this ensemble against the direct engine, `vllm serve` (same settings and
as a user starts it) and a transformers loop, on the same requests, in one run (benchmarks/README.md).

Each step or system (benchmarks/systems/) runs in its own child process with a hard time limit, so one failure or
hang loses only its own numbers; servers are stopped and GPU memory waited for between systems. Every engine system
reads its vLLM arguments from the committed configuration (benchmarks/engine_config.py); ``--sweep KEY=JSON`` adds
points that change one of them. Results merge across invocations sharing ``--work``.

    python3 benchmarks/run_gpu_benchmark.py --out /tmp/bench_out --work /tmp/bench               # GPU, every system
    python3 benchmarks/run_gpu_benchmark.py --out /tmp/o --work /tmp/bt --tiny            # CPU, tiny shapes
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("PYTHONUNBUFFERED", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

from benchmarks import engine_config, hf_cache, report, rounds  # noqa: E402
from benchmarks.environment import environment  # noqa: E402
from benchmarks.procs import MemoryPoller, gpu_memory_used_mib, kill_group, log, wait_gpu_free  # noqa: E402
from benchmarks.settings import Settings, parse_args, settings_from  # noqa: E402
from benchmarks.systems import SYSTEMS  # noqa: E402


def run_child(system: str, s: Settings, result_path: Path, pgid_file: Path) -> int:
    result = {"system": system, "point": s.point, "override": s.override, "config": s.variant, "status": "error",
              "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    t0 = time.monotonic()

    def on_term(signum, frame):
        raise SystemExit(f"terminated by signal {signum} (time budget)")

    signal.signal(signal.SIGTERM, on_term)
    hf_cache.use(s.hf_home)
    try:
        SYSTEMS[system].run(s, result, pgid_file)
        cut = result.get("skipped_levels") or any(not lv["complete"] for lv in result.get("levels", []))
        result["status"] = "partial" if cut else "ok"
    except BaseException as exc:  # noqa: BLE001 - the parent records it and goes on
        result["error"] = f"{type(exc).__name__}: {exc}"[-4000:]
        result["traceback"] = traceback.format_exc()[-6000:]
        log(f"  {system} failed: {result['error'][:500]}")
    result["seconds"] = round(time.monotonic() - t0, 1)
    result_path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return 0 if result["status"] != "error" else 1


def run_system(system: str, s: Settings, budget: float) -> dict:
    """One child process; its output lines starting with [bench go to our stdout, all of it to logs/<key>.log."""
    key = system if s.point == "base" else f"{system}@{s.point}"
    result_path, pgid_file = s.logs / f"{key}.result.json", s.logs / f"{key}.pgids"
    result_path.unlink(missing_ok=True)
    pgid_file.write_text("")
    settings_path = s.logs / "settings.json"
    settings_path.write_text(json.dumps(dict(s.to_json(), budgets=dict(s.budgets, **{system: budget})), indent=1))
    log(f"{key}: start (budget {budget:.0f} s)")
    with MemoryPoller() as mem, (s.logs / f"{key}.log").open("w") as out:
        proc = subprocess.Popen([sys.executable, "-u", __file__, "--child", system, "--settings", str(settings_path),
                                 "--result", str(result_path), "--pgids", str(pgid_file)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)

        def pump():
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if line.startswith("[bench"):
                    print(line, end="", flush=True)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            log(f"{key}: over its {budget:.0f} s budget, stopping it")
            kill_group(proc.pid, 30, proc)
            proc.wait()
        reader.join(timeout=10)
    for line in pgid_file.read_text().split():  # servers a killed child could not stop
        kill_group(int(line), 10)
    kill_group(proc.pid, 5, proc)
    wait_gpu_free(mem.baseline)
    if result_path.is_file():
        result = json.loads(result_path.read_text())
    else:
        result = {"system": system, "status": "error", "error": f"no result (exit {proc.returncode}; over budget?)",
                  "log_tail": (s.logs / f"{key}.log").read_text(errors="replace")[-3000:]}
    result["gpu_memory"] = mem.report()
    log(f"{key}: {result['status']} in {result.get('seconds', '?')} s"
        + (f" - {result.get('error', '')[:300]}" if result["status"] == "error" else ""))
    return result


def chosen(systems_arg: str, results: dict) -> list[str]:
    systems = [x.strip() for x in systems_arg.split(",") if x.strip()]
    if "rest" in systems:  # what an earlier invocation (same --work) did not finish
        rest = ["build"] + [x for x in SYSTEMS if x != "build" and results.get(x, {}).get("status") not in
                            ("ok", "partial")]
        i = systems.index("rest")
        systems = list(dict.fromkeys(systems[:i] + rest + systems[i + 1:]))
    unknown = [x for x in systems if x not in SYSTEMS]
    if unknown:
        raise SystemExit(f"unknown systems {unknown}; known: {', '.join(SYSTEMS)}")
    return systems


def points(sweep: list[str], configs: list[str] = (), base: bool = True) -> list[tuple[str, dict, str]]:
    """(name, override, committed config) per point: ("base", {}, "") (unless base is False), one per --sweep
    KEY=JSON (the committed engine_args + that override), one per --config-point NAME (the committed
    configs/NAME.pbtxt as it is)."""
    out = [("base", {}, "")] if base else []
    for item in sweep:
        key, value = engine_config.parse_override(item)
        out.append((engine_config.point_name(key, value), {key: value}, ""))
    out += [(name, {}, name) for name in configs]
    return out


def main(argv=None) -> int:
    args = parse_args(argv, tuple(SYSTEMS))
    if args.child:
        s = Settings.from_json(json.loads(args.settings.read_text()))
        return run_child(args.child, s, args.result, args.pgids)
    t_begin = time.monotonic()
    device = args.device if args.device != "auto" else ("cuda" if gpu_memory_used_mib() else "cpu")
    s = settings_from(args, device)
    s.logs.mkdir(parents=True, exist_ok=True)
    merged_path = s.work / ("results-tiny.json" if s.tiny else "results.json")
    results = json.loads(merged_path.read_text()) if merged_path.is_file() else {}
    results.pop("cross_check", None)
    results["environment"] = environment()
    log(f"environment {results['environment']}")
    systems = chosen(args.systems, results)
    n_rounds = args.rounds or (1 if s.tiny else 2)
    log(f"device {s.device}, systems {systems}, model {s.hub_id} ({s.variant}), plan {s.plan()} x {n_rounds} "
        f"round(s), out {s.out}"
        + (f", deadline {args.deadline:.0f} s" if args.deadline else ""))
    ok = True
    base = args.base or not (args.sweep or args.config_point)
    for point, override, config in points(args.sweep, args.config_point, base):
        s.point, s.override, s.config = point, override, config
        for round_no in range(n_rounds):  # A B A B: every load system once per round
            for system in systems:
                if (point != "base" or round_no) and not SYSTEMS[system].load:
                    continue  # preparation steps run once
                key = system if point == "base" else f"{system}@{point}"
                budget = s.budgets[system]
                if args.deadline:
                    budget = min(budget, args.deadline - (time.monotonic() - t_begin) - 15)
                    if budget < 20:
                        log(f"{key}: round {round_no + 1} skipped, no time left")
                        if not round_no:
                            results[key] = {"system": system, "status": "error", "error": "no time left (--deadline)"}
                            ok = False
                        continue
                result = run_system(system, s, budget)
                ok &= result.get("status") in ("ok", "partial")
                results[key] = rounds.merge(results.get(key) if round_no else None, result) \
                    if SYSTEMS[system].load else result
                results["settings"] = s.to_json()
                report.export(s, results, final=False)
    s.point, s.override, s.config = "base", {}, ""
    report.export(s, results, final=True)
    print(report.table(results), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
