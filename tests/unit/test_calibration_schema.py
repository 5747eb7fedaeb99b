"""The profile JSON format: round trips and the exact message of every loader error."""

import json

import numpy as np
import pytest

from python_backends.calibrate.profile_schema import CalibrationProfileError, dump_profile, load_profile
from python_backends.calibrate.profiles import CALIBRATORS, CalibrationProfile

PARAMS = {
    "identity": {},
    "sigmoid": {},
    "platt": {"a": 12.3, "b": -4.5},
    "temperature": {"temperature": 1.7},
    "affine": {"logit_mean": 0.37, "logit_sigma": 0.081},
    "isotonic": {"x": [-0.1, 0.2, 0.5, 0.9], "y": [0.0, 0.05, 0.6, 1.0]},
}


def _doc(**overrides):
    doc = {
        "schema_version": 1,
        "name": "minilm-l6-v2-cosine",
        "version": "2026-12-02.1",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "score_type": "cosine",
        "method": "platt",
        "params": {"a": 12.3, "b": -4.5},
        "fitted_on": {"pairs": 240},
    }
    doc.update(overrides)
    return doc


def _write(tmp_path, content):
    path = tmp_path / "profile.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def test_every_method_has_a_round_trip_case():
    assert set(PARAMS) == set(CALIBRATORS)


@pytest.mark.parametrize("method", sorted(PARAMS))
def test_dump_then_load_gives_the_same_profile(tmp_path, method):
    path = _write(tmp_path, _doc(method=method, params=PARAMS[method]))
    profile = load_profile(path)
    assert profile.method == method
    assert profile.calibrator.params() == PARAMS[method]
    again = tmp_path / "again.json"
    dump_profile(profile, again)
    assert json.loads(again.read_text()) == _doc(method=method, params=PARAMS[method])
    raw = np.linspace(-2, 2, 9)
    np.testing.assert_array_equal(load_profile(again).apply(raw), profile.apply(raw))
    assert not (tmp_path / "again.json.tmp").exists()


def test_fitted_on_is_optional_and_not_written_when_empty(tmp_path):
    doc = _doc()
    del doc["fitted_on"]
    profile = load_profile(_write(tmp_path, doc))
    assert profile.fitted_on == {}
    out = tmp_path / "out.json"
    dump_profile(profile, out)
    assert "fitted_on" not in json.loads(out.read_text())


def test_dump_refuses_an_unserialisable_profile(tmp_path):
    profile = CalibrationProfile("n", "v", "m", "logit", CALIBRATORS["sigmoid"](), {"when": object()})
    with pytest.raises(TypeError):
        dump_profile(profile, tmp_path / "p.json")


def test_missing_file(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(CalibrationProfileError) as e:
        load_profile(path)
    assert str(e.value) == f"{path}: no such file"


@pytest.mark.parametrize(
    "content, problem",
    [
        ('{"a": 1,', "not valid JSON: Expecting property name enclosed in double quotes (line 1, column 9)"),
        ("", "not valid JSON: Expecting value (line 1, column 1)"),
        ([1, 2], "top level must be a JSON object"),
        (_doc(extra=1), "unknown field 'extra'"),
        ({k: v for k, v in _doc().items() if k != "params"}, "missing required field 'params'"),
        ({k: v for k, v in _doc().items() if k != "score_type"}, "missing required field 'score_type'"),
        (_doc(schema_version=2), "unsupported schema_version 2 (this reader knows 1)"),
        (_doc(schema_version=True), "unsupported schema_version True (this reader knows 1)"),
        (
            _doc(method="sigmoidal"),
            "unknown method 'sigmoidal' (expected one of: affine, identity, isotonic, platt, sigmoid, temperature)",
        ),
        (
            _doc(method=None),
            "unknown method None (expected one of: affine, identity, isotonic, platt, sigmoid, temperature)",
        ),
        (_doc(params=[12.3, -4.5]), "field 'params' must be a JSON object"),
        (_doc(params={"a": 1.0}), "method 'platt' requires param 'b'"),
        (_doc(params={"a": 1.0, "b": 0.0, "c": 2.0}), "method 'platt' does not take param 'c'"),
        (_doc(method="sigmoid"), "method 'sigmoid' does not take param 'a'"),
        (_doc(params={"a": "12", "b": 0.0}), "param 'a' must be a number, got str"),
        (_doc(params={"a": True, "b": 0.0}), "param 'a' must be a number, got bool"),
        (
            '{"schema_version": 1, "name": "n", "version": "v", "model": "m", "score_type": "logit", '
            '"method": "platt", "params": {"a": NaN, "b": 0}}',
            "param 'a' must be a finite number, got nan",
        ),
        (
            '{"schema_version": 1, "name": "n", "version": "v", "model": "m", "score_type": "logit", '
            '"method": "platt", "params": {"a": 1, "b": -Infinity}}',
            "param 'b' must be a finite number, got -inf",
        ),
        (
            _doc(params={"a": 0.0, "b": 1.0}),
            "param 'a' must be > 0 (a calibration must not reverse the ranking), got 0.0",
        ),
        (
            _doc(params={"a": -2, "b": 1.0}),
            "param 'a' must be > 0 (a calibration must not reverse the ranking), got -2.0",
        ),
        (_doc(method="temperature", params={"temperature": 0}), "param 'temperature' must be > 0, got 0.0"),
        (
            _doc(method="affine", params={"logit_mean": 0.0, "logit_sigma": -1.0}),
            "param 'logit_sigma' must be > 0, got -1.0",
        ),
        (
            _doc(method="affine", params={"logit_mean": 0.0, "logit_sigma": 0}),
            "param 'logit_sigma' must be > 0, got 0.0",
        ),
        (_doc(method="isotonic", params={"x": [0.0], "y": [0.5]}), "param 'x' must be a list of at least 2 numbers"),
        (_doc(method="isotonic", params={"x": 1.0, "y": [0.5, 0.6]}), "param 'x' must be a list of at least 2 numbers"),
        (
            _doc(method="isotonic", params={"x": [0.0, 1.0, 2.0], "y": [0.1, 0.2]}),
            "params 'x' and 'y' must have the same length (3 != 2)",
        ),
        (
            _doc(method="isotonic", params={"x": [0.0, 0.5, 0.5], "y": [0.1, 0.2, 0.3]}),
            "isotonic knots x must be strictly increasing (x[2]=0.5 <= x[1]=0.5)",
        ),
        (
            _doc(method="isotonic", params={"x": [0.0, 1.0, 2.0], "y": [0.1, 0.2, 1.2]}),
            "isotonic knots y must lie in [0, 1] (y[2]=1.2)",
        ),
        (
            _doc(method="isotonic", params={"x": [0.0, 1.0, 2.0], "y": [-0.1, 0.2, 0.3]}),
            "isotonic knots y must lie in [0, 1] (y[0]=-0.1)",
        ),
        (
            _doc(method="isotonic", params={"x": [0.0, 1.0, 2.0], "y": [0.1, 0.4, 0.3]}),
            "isotonic knots y must be non-decreasing (y[2]=0.3 < y[1]=0.4)",
        ),
        (_doc(method="isotonic", params={"x": [0.0, "1"], "y": [0.1, 0.4]}), "param 'x[1]' must be a number, got str"),
        (_doc(name=""), "field 'name' must be a non-empty string"),
        (_doc(version=3), "field 'version' must be a non-empty string"),
        (
            _doc(score_type="probability"),
            "unknown score_type 'probability' (expected one of: cosine, logit, yes_no_logit)",
        ),
        (_doc(fitted_on="yesterday"), "field 'fitted_on' must be a JSON object"),
    ],
)
def test_loader_error_messages(tmp_path, content, problem):
    path = _write(tmp_path, content)
    with pytest.raises(CalibrationProfileError) as e:
        load_profile(path)
    assert str(e.value) == f"{path}: {problem}"


def test_not_utf8(tmp_path):
    path = tmp_path / "profile.json"
    path.write_bytes(b'{"name": "\xff"}')
    with pytest.raises(CalibrationProfileError) as e:
        load_profile(path)
    assert str(e.value) == f"{path}: not valid UTF-8"


def test_a_directory_is_not_a_profile(tmp_path):
    with pytest.raises(CalibrationProfileError) as e:
        load_profile(tmp_path)
    assert str(e.value).startswith(f"{tmp_path}: cannot read: ")
