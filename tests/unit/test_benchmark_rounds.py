"""The benchmark's alternated rounds: a level is the median of its rounds with their spread, counts add up, and a
comparison uses the whole-level rates where a system answers in bursts."""

from __future__ import annotations

from benchmarks import rounds
from benchmarks.report import comparisons, table


def level(c: int, steady: float, wall: float, p50: float, requests: int = 48, timeline: float = 10.0) -> dict:
    return {"concurrency": c, "requests": requests, "planned": 48, "errors": 0, "complete": True,
            "pairs_per_s": steady, "tokens_per_s": int(steady * 592), "wall": {"pairs_per_s": wall, "seconds": 4.0},
            "latency_ms": {"p50": p50, "p95": p50 + 5, "p99": p50 + 9},
            "triton_stats": {"timeline_ms": {"vLLM answers": timeline}, "share_pre_calibrate": 0.1,
                             "share_vllm": 0.85}}


def system(*levels: dict, status: str = "ok", startup: float = 30.0) -> dict:
    return {"status": status, "levels": list(levels), "startup_s": startup, "probe": [{"request": 0, "raw": [1.0]}]}


def test_three_rounds_give_the_median_of_every_number_and_the_spread_of_the_rates():
    merged = None
    for steady, wall, p50, t in ((600.0, 590.0, 120.0, 11.0), (700.0, 690.0, 100.0, 9.0), (650.0, 640.0, 130.0, 10.0)):
        merged = rounds.merge(merged, system(level(8, steady, wall, p50, timeline=t)))
    (lv,) = merged["levels"]
    assert (lv["pairs_per_s"], lv["wall"]["pairs_per_s"], lv["latency_ms"]["p50"]) == (650.0, 640.0, 120.0)
    assert lv["triton_stats"]["timeline_ms"]["vLLM answers"] == 10.0
    assert lv["spread"]["pairs_per_s"] == [600.0, 700.0, 650.0]
    assert lv["spread"]["p50_ms"] == [120.0, 100.0, 130.0]
    assert (lv["requests"], lv["planned"], lv["rounds"], lv["complete"]) == (144, 144, 3, True)
    assert len(merged["round_levels"]) == 3 and merged["probe"] == [{"request": 0, "raw": [1.0]}]


def test_a_level_missing_from_a_later_round_keeps_its_readings_and_a_failed_round_marks_the_system_partial():
    merged = rounds.merge(None, system(level(1, 500.0, 500.0, 100.0), level(8, 650.0, 640.0, 300.0)))
    merged = rounds.merge(merged, system(level(1, 520.0, 520.0, 90.0), status="error"))
    by_c = {lv["concurrency"]: lv for lv in merged["levels"]}
    assert by_c[1]["pairs_per_s"] == 510.0 and by_c[1]["rounds"] == 2
    assert by_c[8]["pairs_per_s"] == 650.0 and by_c[8]["rounds"] == 1
    assert merged["status"] == "partial" and merged["round_status"] == ["ok", "error"]


def test_a_comparison_uses_steady_rates_unless_either_side_is_bursty():
    triton = system(level(8, 700.0, 690.0, 300.0), level(32, 900.0, 700.0, 1200.0))
    direct = system(level(8, 720.0, 715.0, 280.0), level(32, 720.0, 710.0, 1150.0))
    c8, c32 = rounds.compare(triton, direct)
    assert (c8["rate_window"], c8["rate_ratio"], c8["p50_ratio"]) == ("steady", 0.972, 1.071)
    assert (c32["rate_window"], c32["pairs_per_s"], c32["rate_ratio"]) == ("wall", [700.0, 710.0], 0.986)


def test_a_bursty_round_hidden_by_the_median_still_makes_the_comparison_use_whole_level_rates():
    # the H100 run's Qwen3 c=8 Triton rounds: round 2's steady rate was 11% over its whole level's, the medians 6%
    triton = rounds.merge(rounds.merge(None, system(level(8, 662.8, 658.7, 767.9))), system(level(8, 774.6, 697.3, 702.6)))
    direct = rounds.merge(rounds.merge(None, system(level(8, 748.1, 708.7, 683.5))), system(level(8, 720.2, 715.1, 699.0)))
    (c8,) = rounds.compare(triton, direct)
    assert (triton["levels"][0]["pairs_per_s"], triton["levels"][0]["wall"]["pairs_per_s"]) == (718.7, 678.0)
    assert (c8["rate_window"], c8["pairs_per_s"], c8["rate_ratio"]) == ("wall", [678.0, 711.9], 0.952)


def test_the_table_names_each_ratio_against_triton_of_the_same_point():
    results = {"triton": rounds.merge(None, system(level(1, 400.0, 400.0, 150.0))),
               "async_llm": rounds.merge(None, system(level(1, 440.0, 440.0, 135.0))),
               "triton@gpu-fp8": rounds.merge(None, system(level(1, 420.0, 420.0, 140.0))),
               "async_llm@gpu-fp8": rounds.merge(None, system(level(1, 500.0, 500.0, 100.0)))}
    assert sorted(comparisons(results)) == ["triton@gpu-fp8~async_llm@gpu-fp8", "triton~async_llm"]
    text = table(results)
    assert "triton / async_llm: c=1 pairs/s 0.909 (steady), P50 1.111x" in text
    assert "triton@gpu-fp8 / async_llm@gpu-fp8: c=1 pairs/s 0.84 (steady), P50 1.4x" in text
