"""The one JSON format of a calibration profile, checked by hand on load.

Why by hand: the serving path must not grow a jsonschema dependency, and a profile that loads
wrongly would silently change every score, so each problem gets an exact message naming the file.

Format (schema_version 1)::

    {
      "schema_version": 1,
      "name": "minilm-l6-v2-cosine",        # non-empty string
      "version": "2026-12-02.1",            # non-empty string; CALIBRATION output = name@version
      "model": "sentence-transformers/all-MiniLM-L6-v2",
      "score_type": "cosine",               # cosine | logit | yes_no_logit
      "method": "platt",                    # identity | sigmoid | platt | temperature | affine | isotonic
      "params": {"a": 12.3, "b": -4.5},     # exactly the method's parameters, see below
      "fitted_on": {...},                   # optional free-form object (data set, metrics, date)
      "raw_score_distribution": {           # optional: quantile bins of the fitting raw scores (drift.py)
        "edges": [...k-1 increasing], "fractions": [...k, sum 1]},
      "checkpoint": "sha256:0123456789abcdef"  # optional: the identity of the checkpoint it was made for
    }

A profile binds a model: the calibrate step refuses one whose score_type is not the served model's, or whose
checkpoint identity (python_backends.model_source.checkpoint_identity) is not the served checkpoint's.

params by method: identity {}, sigmoid {}, platt {"a" > 0, "b"}, temperature {"temperature" > 0},
affine {"logit_mean", "logit_sigma" > 0}, isotonic {"x": [...strictly increasing],
"y": [...non-decreasing, in 0..1]} with at least 2 knots. Every number must be finite.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..json_text import decode_json
from .drift import ScoreDistribution
from .profiles import CALIBRATORS, CalibrationProfile

SCHEMA_VERSION = 1
REQUIRED_FIELDS = ("schema_version", "name", "version", "model", "score_type", "method", "params")
OPTIONAL_FIELDS = ("fitted_on", "raw_score_distribution", "checkpoint")


class CalibrationProfileError(ValueError):
    """A profile that cannot be used; the message is "<file>: <problem>"."""


def profile_from_dict(data: Any, source: str = "<profile>") -> CalibrationProfile:
    """Validate a decoded profile document; ``source`` (a path) prefixes every error message."""

    def fail(problem: str) -> CalibrationProfileError:
        return CalibrationProfileError(f"{source}: {problem}")

    if not isinstance(data, dict):
        raise fail("top level must be a JSON object")
    for key in data:
        if key not in REQUIRED_FIELDS and key not in OPTIONAL_FIELDS:
            raise fail(f"unknown field '{key}'")
    for key in REQUIRED_FIELDS:
        if key not in data:
            raise fail(f"missing required field '{key}'")
    version = data["schema_version"]
    if isinstance(version, bool) or version != SCHEMA_VERSION:
        raise fail(f"unsupported schema_version {version!r} (this reader knows {SCHEMA_VERSION})")
    method = data["method"]
    if not isinstance(method, str) or method not in CALIBRATORS:
        raise fail(f"unknown method {method!r} (expected one of: {', '.join(sorted(CALIBRATORS))})")
    cls = CALIBRATORS[method]
    params = data["params"]
    if not isinstance(params, dict):
        raise fail("field 'params' must be a JSON object")
    for key in cls.PARAMS:
        if key not in params:
            raise fail(f"method '{method}' requires param '{key}'")
    for key in params:
        if key not in cls.PARAMS:
            raise fail(f"method '{method}' does not take param '{key}'")
    fitted_on = data.get("fitted_on", {})
    if not isinstance(fitted_on, dict):
        raise fail("field 'fitted_on' must be a JSON object")
    try:
        distribution = None
        if "raw_score_distribution" in data:
            distribution = ScoreDistribution.from_dict(data["raw_score_distribution"])
        calibrator = cls(**params)
        return CalibrationProfile(
            name=data["name"],
            version=data["version"],
            model=data["model"],
            score_type=data["score_type"],
            calibrator=calibrator,
            fitted_on=fitted_on,
            raw_score_distribution=distribution,
            checkpoint=data.get("checkpoint"),
        )
    except ValueError as e:
        raise fail(str(e)) from None


def profile_to_dict(profile: CalibrationProfile) -> dict[str, Any]:
    """The JSON document of ``profile``; ``profile_from_dict`` reads it back to an equal profile."""
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "name": profile.name,
        "version": profile.version,
        "model": profile.model,
        "score_type": profile.score_type,
        "method": profile.method,
        "params": profile.calibrator.params(),
    }
    if profile.fitted_on:
        doc["fitted_on"] = profile.fitted_on
    if profile.raw_score_distribution is not None:
        doc["raw_score_distribution"] = profile.raw_score_distribution.to_dict()
    if profile.checkpoint is not None:
        doc["checkpoint"] = profile.checkpoint
    return doc


def load_profile(path: str | os.PathLike[str]) -> CalibrationProfile:
    """Read and validate a profile file; every failure is a CalibrationProfileError naming it."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CalibrationProfileError(f"{p}: no such file") from None
    except UnicodeDecodeError:
        raise CalibrationProfileError(f"{p}: not valid UTF-8") from None
    except OSError as e:
        raise CalibrationProfileError(f"{p}: cannot read: {e.strerror}") from None
    try:
        data = decode_json(text)
    except ValueError as problem:
        raise CalibrationProfileError(f"{p}: {problem}") from None
    return profile_from_dict(data, source=str(p))


def dump_profile(profile: CalibrationProfile, path: str | os.PathLike[str]) -> None:
    """Write ``profile`` as JSON, atomically, so a server reloading it never reads half a file."""
    p = Path(path)
    text = json.dumps(profile_to_dict(profile), indent=2, allow_nan=False) + "\n"
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, p)
