"""Alternated rounds: each load system runs once per round (A B A B), so a slower minute of the machine falls on
both sides of a comparison; a system's reported level is the median of its rounds, with their spread.

A single reading cannot judge a ratio near 1: runs of one system on one warm machine differ by 5-13%. The rates
compared are the steady-window ones unless, in any round, either side's steady and whole-level rates differ by more
than `BURST_TOLERANCE`, then both sides' whole-level rates (a server answering in bursts looks faster in a window; a
median of rounds can hide the round that did).
"""

from __future__ import annotations

import statistics

BURST_TOLERANCE = 0.10
# the rates and latencies whose spread over the rounds is kept beside the median
SPREAD = {"pairs_per_s": ("pairs_per_s",), "wall_pairs_per_s": ("wall", "pairs_per_s"),
          "p50_ms": ("latency_ms", "p50"), "p99_ms": ("latency_ms", "p99")}
COUNTED = ("requests", "errors", "planned")  # summed over the rounds, not a median


def _dig(level: dict, path: tuple[str, ...]):
    for key in path:
        level = level.get(key) if isinstance(level, dict) else None
    return level


def _median(values: list):
    """Numbers: their median (integers stay integers); dicts: key by key; anything else: the first round's."""
    first = values[0]
    if all(v == first for v in values):
        return first
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return round(statistics.median(values))
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return round(statistics.median(values), 4)
    if all(isinstance(v, dict) for v in values):
        return {k: _median([v[k] for v in values if k in v]) for k in first}
    return first


def median_level(levels: list[dict]) -> dict:
    """One level from its readings in each round: every number the median, counts summed, the spread beside."""
    out = _median(levels)
    for key in COUNTED:
        out[key] = sum(lv.get(key, 0) for lv in levels)
    out["complete"] = all(lv.get("complete", False) for lv in levels)
    out["rounds"] = len(levels)
    out["spread"] = {name: [_dig(lv, path) for lv in levels] for name, path in SPREAD.items()}
    return out


def merge(earlier: dict | None, new: dict) -> dict:
    """A system's result after one more round: the first round's result (probes, start-up, logs) with `levels`
    the median per concurrency over every round so far; each round's own levels under `round_levels`."""
    merged = dict(new if earlier is None else earlier)
    for key, value in (("round_levels", new.get("levels", [])), ("round_status", new.get("status")),
                       ("round_startup_s", new.get("startup_s"))):
        merged[key] = (earlier or {}).get(key, []) + [value]
    if earlier is not None and new.get("status") == "error" and merged.get("status") == "ok":
        merged["status"] = "partial"
    by_level: dict[int, list[dict]] = {}
    for levels in merged["round_levels"]:
        for lv in levels:
            by_level.setdefault(lv["concurrency"], []).append(lv)
    merged["levels"] = [median_level(by_level[c]) for c in sorted(by_level)]
    return merged


def _bursty(level: dict) -> bool:
    """Whether any round's steady rate is more than BURST_TOLERANCE off its whole-level rate (a level of one
    reading has no spread: its own two rates)."""
    spread = level.get("spread") or {}
    steadies = spread.get("pairs_per_s") or [level.get("pairs_per_s")]
    walls = spread.get("wall_pairs_per_s") or [_dig(level, ("wall", "pairs_per_s"))]
    return any(bool(steady and wall) and abs(steady - wall) / wall > BURST_TOLERANCE
               for steady, wall in zip(steadies, walls))


def compare(a: dict, b: dict) -> list[dict]:
    """Per concurrency both systems reached: a's rate over b's (steady, or whole-level where either side is bursty),
    and a's P50 over b's."""
    by_c = {lv["concurrency"]: lv for lv in b.get("levels") or []}
    rows = []
    for lv in a.get("levels") or []:
        other = by_c.get(lv["concurrency"])
        if other is None:
            continue
        window = "wall" if _bursty(lv) or _bursty(other) else "steady"
        rate_a, rate_b = ((_dig(x, ("wall", "pairs_per_s")) if window == "wall" else x["pairs_per_s"])
                          for x in (lv, other))
        p50_a, p50_b = lv["latency_ms"].get("p50"), other["latency_ms"].get("p50")
        rows.append({"concurrency": lv["concurrency"], "rate_window": window, "pairs_per_s": [rate_a, rate_b],
                     "rate_ratio": round(rate_a / rate_b, 3) if rate_a and rate_b else None,
                     "p50_ms": [p50_a, p50_b], "p50_ratio": round(p50_a / p50_b, 3) if p50_a and p50_b else None,
                     "rounds": [lv.get("rounds", 1), other.get("rounds", 1)]})
    return rows
