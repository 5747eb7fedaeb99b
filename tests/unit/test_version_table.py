"""The benchmark's record of what it ran on, the table across vLLM releases built from runs of each, and the direct
engine's PoolingParams in the form the installed vLLM rebuilds token types from."""

from __future__ import annotations

import json

import pytest

from benchmarks import version_table
from benchmarks.environment import environment


def _level(c: int, p50: float, steady: float, wall: float) -> dict:
    return {"concurrency": c, "pairs_per_s": steady, "wall": {"pairs_per_s": wall}, "latency_ms": {"p50": p50}}


def _run(tmp_path, name: str, vllm: str, raw: list[float], direct_raw: list[float]) -> None:
    folder = tmp_path / name
    folder.mkdir()
    run = {"environment": {"vllm": vllm, "torch": "2.x"},
           "triton": {"probe": [{"raw": raw}], "levels": [_level(1, 120.0, 500.0, 490.0), _level(8, 700.0, 760.0, 700.0),
                                                           _level(32, 2800.0, 780.0, 770.0)]},
           "async_llm": {"probe": [{"raw": direct_raw}], "levels": [_level(1, 100.0, 600.0, 590.0),
                                                                    _level(8, 680.0, 750.0, 720.0),
                                                                    _level(32, 2700.0, 790.0, 785.0)]},
           "cross_check": {"triton~async_llm": {"max_abs_raw_diff": 0.0}}}
    (folder / "qwen3.benchmark.json").write_text(json.dumps(run))


def test_releases_side_by_side_with_whole_level_rates_and_scores_against_the_first(tmp_path):
    base = [float(i) for i in range(12)]
    _run(tmp_path, "a", "0.26.0", base, base)
    moved = base[:10] + [11.5, 10.0]  # the last two swap places: top-10 keeps 9 of 10 (score 10 -> 11.5 enters)
    _run(tmp_path, "b", "0.27.1", moved, moved)
    rows = version_table.collect([tmp_path / "a", tmp_path / "b"])
    assert [r["environment"]["vllm"] for r in rows] == ["0.26.0", "0.27.1"]
    first, second = rows[0]["shapes"]["qwen3"], rows[1]["shapes"]["qwen3"]
    assert "vs_base_max_raw_diff" not in first
    assert second["vs_base_max_raw_diff"] == pytest.approx(1.5)
    assert second["vs_base_top10_overlap_min"] == pytest.approx(1.0)
    assert (second["triton_c8_pairs_s"], second["direct_c8_pairs_s"]) == (700.0, 720.0)  # whole level, not steady
    assert (second["triton_c1_p50_ms"], second["direct_c1_p50_ms"]) == (120.0, 100.0)
    table = version_table.markdown(rows).splitlines()
    assert len(table) == 4
    assert table[2].startswith("| 0.26.0 | 2.x | Qwen3 | 120.0 | 100.0 | 700.0 / 720.0 | 770.0 / 785.0 | 0 | (baseline) |")
    assert table[3].endswith("| 1.5, 1.00 |")


def test_the_environment_names_the_installed_vllm_and_the_commit(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCH_COMMIT", "abc1234")
    monkeypatch.setenv("VLLM_CACHE_ROOT", str(tmp_path))
    (tmp_path / "torch_compile_cache" / "k").mkdir(parents=True)
    (tmp_path / "torch_compile_cache" / "k" / "graph.py").write_text("")
    env = environment()
    vllm = pytest.importorskip("vllm")
    assert env["vllm"] == vllm.__version__
    assert env["commit"] == "abc1234"
    assert env["compile_cache_files_at_start"] == 1


def test_the_direct_engine_sends_token_types_as_the_installed_vllm_reads_them():
    vllm = pytest.importorskip("vllm")
    from benchmarks.systems.async_llm import pooling_params
    from python_backends.engine.settings import check_vllm_version
    from python_backends.families.base import TOKEN_TYPE_RANGE_SINCE

    pair = pooling_params([0, 0, 0, 1, 1])
    expected = 3 if check_vllm_version(vllm.__version__) < TOKEN_TYPE_RANGE_SINCE else (3, 5)
    assert pair.extra_kwargs == {"compressed_token_type_ids": expected}
    assert pair.use_activation is False and pair.task == "classify"
    assert pooling_params(None).extra_kwargs is None
    assert pooling_params([0, 0, 0]).extra_kwargs is None
