"""Each request's way through vLLM, from the records of `step_probe.py`: per front-end process (the Triton engine
step's stub, the direct engine's benchmark child), the requests answered alone (concurrency 1) and, as medians:

  submit      first to last sequence handed to the engine core (front end)
  nsteps      engine-core steps that ran the request's tokens
  step_ms     those steps' wall time, summed; last_step: the last one's
  back        the last step's end to the front end's answer
  total       first sequence handed over to the answer
  hop         (the Triton engine step) `execute`'s hand-over to the request's start on the step's event loop
  before      that start to the first sequence handed to the engine core (the prompts built)
  after       the front end's answer to the request's scores (its outputs gathered, the scores computed)

per engine core profiled (STEP_PROBE_PROFILE=1), the functions with the most own time in its steps; and per
preprocess process, the medians of a request's `run` (parse and encode), `encode` and `tokenize` (the
documents' batch tokenization, summed over its rounds), in ms: what of the step's time from `execute` to its answer
is its own code, the rest being Triton's and the response's. Per engine core, its full steps (a whole
`max_num_batched_tokens` of tokens, the steps of a saturated level): their wall and CPU time, the same work in both
systems, so what a level's rate owes to the step itself rather than to how requests reach it.

    python -m benchmarks.step_report /tmp/step_probe [--min-sequences 32]
"""

from __future__ import annotations

import argparse
import bisect
import glob
import json
import os
from collections import defaultdict

from loadtest.closed_loop import percentile

FIELDS = ("submit", "nsteps", "step_ms", "last_step", "back", "total")
STEP_FIELDS = ("hop", "before", "after")
MIN_FULL_STEPS = 5
FULL_SHARE = 0.95
PROFILE_TOP = 15  # functions shown per profiled engine core


def load(folder: str) -> dict[int, list[dict]]:
    processes = {}
    for path in glob.glob(f"{folder}/*.jsonl"):
        with open(path) as lines:
            processes[int(os.path.basename(path).split(".")[0])] = [json.loads(line) for line in lines if line.strip()]
    return processes


def request_rows(records: list[dict], core_of: dict[str, tuple[int, float]], processes: dict, min_sequences: int):
    """One row per request of this front end answered with no other request in flight."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r["ev"] == "fe_add":
            groups[r["rid"].rsplit("-", 2)[0]].append(r)  # <request>-<sequence>-<vLLM's suffix>
    order = sorted(groups, key=lambda g: groups[g][0]["t"])
    answers = sorted((r for r in records if r["ev"] == "fe_out" and r["n"]), key=lambda r: r["t0"])
    rows = []
    for k, key in enumerate(order):
        adds = groups[key]
        start, handed = adds[0]["t"], adds[-1]["t"]
        following = groups[order[k + 1]][0]["t"] if k + 1 < len(order) else float("inf")
        core = core_of.get(adds[0]["rid"])
        if len(adds) < min_sequences or core is None:
            continue
        steps = sorted((r for r in processes[core[0]] if r["ev"] == "step" and start <= r["t0"] < following),
                       key=lambda r: r["t0"])
        working = [s for s in steps if s.get("nout")]
        done = [a["t1"] for a in answers if working and working[-1]["t1"] <= a["t0"] < following]
        if not working or not done or done[0] > following:
            continue  # overlapped by the next request: not answered alone
        scheds = [r for r in processes[core[0]] if r["ev"] == "sched" and start <= r["t0"] <= working[-1]["t1"]]
        rows.append({**engine_step_times(records, key.split(".")[0], start, done[0]),
                     "n": len(adds), "submit": (handed - start) * 1e3,
                     "nsteps": sum(1 for s in scheds if s["ntok"]),
                     "step_ms": sum(s["t1"] - s["t0"] for s in steps if s["t1"] <= working[-1]["t1"]) * 1e3,
                     "last_step": (working[-1]["t1"] - working[-1]["t0"]) * 1e3,
                     "back": (done[0] - working[-1]["t1"]) * 1e3, "total": (done[0] - start) * 1e3,
                     "tokens_per_step": [s["ntok"] for s in scheds if s["ntok"]]})
    return rows


def engine_step_times(records: list[dict], request_id: str, start: float, done: float) -> dict[str, float]:
    """hop, before and after of one request in the Triton engine step's process (none in the direct engine's)."""
    run = next((r for r in records if r["ev"] == "eng_run" and r["rid"] == request_id), None)
    if run is None:
        return {}
    submits = [r["t0"] for r in records if r["ev"] == "eng_submit" and r["t0"] <= run["t0"]]
    times = {"before": (start - run["t0"]) * 1e3, "after": (run["t1"] - done) * 1e3}
    return times | ({"hop": (run["t0"] - max(submits)) * 1e3} if submits else {})


def preprocess_rows(records: list[dict]) -> dict[str, list[float]]:
    """Each request's run, encode and tokenize times (ms) in one preprocess process; the tokenize calls inside a
    run (a retry with a longer cut is a second call) are summed."""
    runs = [r for r in records if r["ev"] == "pre_run"]
    inside = {kind: [r for r in records if r["ev"] == f"pre_{kind}"] for kind in ("encode", "tokenize")}
    rows: dict[str, list[float]] = {"run": [], "encode": [], "tokenize": []}
    for run in runs:
        rows["run"].append((run["t1"] - run["t0"]) * 1e3)
        for kind, calls in inside.items():
            within = (c["t1"] - c["t0"] for c in calls if run["t0"] <= c["t0"] and c["t1"] <= run["t1"])
            rows[kind].append(sum(within) * 1e3)
    return rows


def full_steps(records: list[dict]) -> tuple[int, dict[str, list[float]]] | None:
    """An engine core's step budget (its largest token count in a step) and the wall and CPU ms of its steps that
    scheduled at least FULL_SHARE of it (an encoder's steps hold whole sequences, so they end short of it), when
    there are at least MIN_FULL_STEPS of them."""
    scheds = sorted((r for r in records if r["ev"] == "sched"), key=lambda r: r["t0"])
    starts = [r["t0"] for r in scheds]
    paired = []
    for step in (r for r in records if r["ev"] == "step"):
        at = bisect.bisect_left(starts, step["t0"])  # the step's own schedule() runs inside it
        if at < len(scheds) and scheds[at]["t0"] <= step["t1"]:
            paired.append((scheds[at]["ntok"], step))
    budget = max((tokens for tokens, _ in paired), default=0)
    full = [step for tokens, step in paired if tokens >= FULL_SHARE * budget]
    if not budget or len(full) < MIN_FULL_STEPS:
        return None
    return budget, {"wall": [(s["t1"] - s["t0"]) * 1e3 for s in full], "cpu": [s["cpu_ms"] for s in full]}


def profile_lines(path: str) -> list[str]:
    """The PROFILE_TOP functions with the most own time in one engine core's profiled steps: own seconds, their
    share of all own time, calls, cumulative seconds."""
    import pstats

    stats = pstats.Stats(path).stats
    total = sum(own for _, _, own, _, _ in stats.values()) or 1.0
    top = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:PROFILE_TOP]
    lines = [f"  profile: {total:.2f} s own time in its steps; own s, share, calls, cumulative s"]
    for (file, line, name), (_, calls, own, cumulative, _) in top:
        where = f"{'/'.join(file.split('/')[-3:])}:{line}({name})"
        lines.append(f"  {own:8.3f} {own / total:6.1%} {calls:8d} {cumulative:8.3f}  {where}")
    return lines


def _medians(values: dict[str, list[float]]) -> str:
    return ", ".join(f"{name} {percentile(sorted(v), 50):.2f} ({percentile(sorted(v), 10):.2f}, "
                     f"{percentile(sorted(v), 90):.2f})" for name, v in values.items())


def report(folder: str, min_sequences: int) -> str:
    processes = load(folder)
    core_of = {r["rid"]: (pid, r["t"]) for pid, records in processes.items() for r in records
               if r["ev"] == "core_add"}
    out = []
    for pid, records in sorted(processes.items()):
        pre = preprocess_rows(records)
        if pre["run"]:
            out.append(f"preprocess {pid}: {len(pre['run'])} requests; ms, median (p10, p90): " + _medians(pre))
        full = full_steps(records)
        if full:
            tokens, full = full
            out.append(f"engine core {pid}: {len(full['wall'])} full steps (of up to {tokens} tokens); "
                       "ms, median (p10, p90): " + _medians(full))
        if os.path.isfile(f"{folder}/{pid}.prof"):
            out += profile_lines(f"{folder}/{pid}.prof")
        rows = request_rows(records, core_of, processes, min_sequences)
        if not rows:
            continue
        who = next((r for r in records if r["ev"] == "process"), {})
        out.append(f"front end {pid} ({who.get('exe')} {who.get('argv')}): {len(rows)} requests answered alone")
        for name in FIELDS + STEP_FIELDS:
            values = sorted(row[name] for row in rows if name in row)
            if not values:
                continue
            out.append(f"  {name:10s} median {percentile(values, 50):8.2f}   p10 {percentile(values, 10):8.2f}"
                       f"   p90 {percentile(values, 90):8.2f}")
        out.append("  tokens per step, first requests: " + "; ".join(str(r["tokens_per_step"]) for r in rows[:4]))
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--min-sequences", type=int, default=32, help="requests with fewer sequences are left out")
    args = ap.parse_args()
    print(report(args.folder, args.min_sequences))


if __name__ == "__main__":
    main()
