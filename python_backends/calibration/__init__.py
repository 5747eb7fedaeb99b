"""Calibrated reranker scores: profiles (serving path, numpy only), fitting, metrics and the
``reranker-calibrate`` tool.

The ``rerank_calibrate`` model needs only::

    from python_backends.calibration import load_profile, CalibrationProfileError
    profile = load_profile(path)     # validates; raises CalibrationProfileError("<path>: <problem>")
    scores = profile.apply(raw)      # float32, same shape; ValueError on NaN
    profile.tag                      # "<name>@<version>", the CALIBRATION output

Importing this package loads numpy only; the tool's modules (report, cli, scoring) load
matplotlib / tqdm / tritonclient when they are imported themselves.
"""

from .profiles import (
    CALIBRATORS,
    SCORE_TYPES,
    AffineCalibrator,
    CalibrationProfile,
    Calibrator,
    IdentityCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    SigmoidCalibrator,
    TemperatureCalibrator,
    sigmoid,
)
from .schema import CalibrationProfileError, dump_profile, load_profile, profile_from_dict, profile_to_dict

__all__ = [
    "CALIBRATORS",
    "SCORE_TYPES",
    "AffineCalibrator",
    "CalibrationProfile",
    "CalibrationProfileError",
    "Calibrator",
    "IdentityCalibrator",
    "IsotonicCalibrator",
    "PlattCalibrator",
    "SigmoidCalibrator",
    "TemperatureCalibrator",
    "dump_profile",
    "load_profile",
    "profile_from_dict",
    "profile_to_dict",
    "sigmoid",
]
