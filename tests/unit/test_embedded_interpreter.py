"""The embedded-interpreter benchmark's summary pairs each embedded run with the static run beside it."""

from benchmarks.embedded_interpreter import summary


def test_the_ratio_is_the_median_of_the_pairs_not_of_the_medians():
    result = summary(static=[10.0, 20.0, 40.0], embedded=[12.0, 20.0, 30.0])
    assert result == {"static_ms": 20.0, "embedded_ms": 20.0, "ratio_paired_median": 1.0}
    assert summary(static=[10.0, 40.0, 20.0], embedded=[12.0, 30.0, 26.0])["ratio_paired_median"] == 1.2
