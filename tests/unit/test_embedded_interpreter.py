"""The embedded-interpreter benchmark: each embedded run paired with the static one beside it; a failed side says why"""

import sys

import pytest

from benchmarks.embedded_interpreter import WORKLOADS, run_pair, summary
from tests.support.tiny_models import session_models


def test_the_ratio_is_the_median_of_the_pairs_not_of_the_medians():
    result = summary(static=[10.0, 20.0, 40.0], embedded=[12.0, 20.0, 30.0])
    assert result == {"static_ms": 20.0, "embedded_ms": 20.0, "ratio_paired_median": 1.0}
    assert summary(static=[10.0, 40.0, 20.0], embedded=[12.0, 30.0, 26.0])["ratio_paired_median"] == 1.2


def test_a_failed_side_is_reported_with_the_end_of_its_error_output():
    ok = [sys.executable, "-c", 'print(\'{"ms": [1.0]}\')']
    broken = [sys.executable, "-c",
              "import sys; print('first line', file=sys.stderr); sys.exit('no module named vllm')"]
    with pytest.raises(SystemExit) as failure:
        run_pair([ok, broken], [0, 0], "unused")
    assert str(failure.value) == f"{sys.executable} failed (1):\nfirst line\nno module named vllm\n"
    assert run_pair([ok, ok], [0, 0], "unused") == [1.0, 1.0]


def test_the_preprocess_workload_times_the_encoder_of_the_model_it_is_given(tmp_path, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WORKLOAD_REQUESTS", "2")
    workload = tmp_path / "workload.py"
    workload.write_text(WORKLOADS["preprocess"])
    medians = run_pair([[sys.executable, str(workload)]] * 2, [0, 0], str(session_models(tmp_path_factory)["xlmr"]))
    assert len(medians) == 2 and all(ms > 0 for ms in medians)
