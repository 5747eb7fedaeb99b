"""The little glue every Python-backend model needs: read a tensor, answer with outputs or an error.

`pb_utils` (Triton's `triton_python_backend_utils`) exists only inside the stub process, so it is
passed in rather than imported; that keeps this package importable and testable without Triton.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import InvalidRequest, Overloaded

log = logging.getLogger(__name__)


def input_array(pb_utils: Any, request: Any, name: str) -> np.ndarray | None:
    """The named input as numpy, or None when an optional input was not sent."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy()


def required_array(pb_utils: Any, request: Any, name: str) -> np.ndarray:
    array = input_array(pb_utils, request, name)
    if array is None:
        raise InvalidRequest(f"input tensor {name} is missing")
    return array


def error_response(pb_utils: Any, exc: Exception) -> Any:
    """Bad input is the client's to fix (INVALID_ARG); a spent work budget is a retry-later (UNAVAILABLE, what
    Triton's own queue limits answer); anything else is ours (INTERNAL), logged with its trace."""
    if isinstance(exc, InvalidRequest):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc), pb_utils.TritonError.INVALID_ARG))
    if isinstance(exc, Overloaded):
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc), pb_utils.TritonError.UNAVAILABLE))
    log.exception("request failed")
    return pb_utils.InferenceResponse(
        error=pb_utils.TritonError(f"internal error: {type(exc).__name__}: {exc}", pb_utils.TritonError.INTERNAL)
    )


def respond(pb_utils: Any, handler: Callable[[Any], dict[str, np.ndarray]], request: Any,
            refused: Callable[[Exception], None] = lambda exc: None) -> Any:
    """Run `handler(request) -> {output name: array}`; any exception becomes this request's error only, reported
    to `refused` (the step's prometheus.Refusals.count)."""
    try:
        outputs = handler(request)
    except Exception as exc:  # noqa: BLE001 - one request's failure must not take the batch down
        refused(exc)
        return error_response(pb_utils, exc)
    return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(name, array) for name, array in outputs.items()])
