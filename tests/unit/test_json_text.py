"""JSON text in a model parameter and in a data file line: what is wrong, named by where it is."""

from __future__ import annotations

import pytest

from python_backends.triton_params import ConfigError, ModelParameters
from reranker_calibrate.pair_scoring import DataError, read_pairs


@pytest.mark.parametrize(
    "value, problem",
    [
        ('{"runner": ', "is not valid JSON: Expecting value (line 1, column 11)"),
        ('["pooling"]', "is not a JSON object"),
    ],
)
def test_a_json_parameter_that_is_no_object_names_the_model_and_parameter(value, problem):
    params = ModelParameters("rerank_engine", {"engine_args": value})
    with pytest.raises(ConfigError) as e:
        params.json_object("engine_args")
    assert str(e.value) == f"model 'rerank_engine': parameter 'engine_args' {problem}"


def test_an_empty_json_parameter_is_an_empty_object():
    assert ModelParameters("rerank_engine", {"vllm_env": "  "}).json_object("vllm_env") == {}


def test_a_data_line_that_is_no_object_names_the_file_and_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"query": "q", "document": "d", "label": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        read_pairs(path)
    assert str(e.value) == f"{path}:2: not a JSON object"
