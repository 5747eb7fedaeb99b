"""The little glue every Python-backend model needs: read a tensor, answer with outputs or an error.

`pb_utils` (Triton's `triton_python_backend_utils`) exists only inside the stub process, so it is
passed in rather than imported; that keeps this package importable and testable without Triton.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from .contract import ErrorKind, ServerError
from .errors import InvalidRequest, StepError

log = logging.getLogger(__name__)


def input_array(pb_utils: Any, request: Any, name: str) -> np.ndarray | None:
    """The named input as numpy, or None when an optional input was not sent."""
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy()


def required_array(pb_utils: Any, request: Any, name: str) -> np.ndarray:
    array = input_array(pb_utils, request, name)
    if array is None:
        raise InvalidRequest(f"{name} is missing: the request has no input tensor {name}", name)
    return array


# The Triton status of each kind a step answers with; UNAVAILABLE is what Triton's own queue limits and timeouts
# answer, so a caller tells a step's overload, deadline or dead engine apart by the message's tag alone.
STATUS = {
    ErrorKind.INVALID: "INVALID_ARG",
    ErrorKind.OVERLOADED: "UNAVAILABLE",
    ErrorKind.DEADLINE: "UNAVAILABLE",
    ErrorKind.CANCELLED: "CANCELLED",
    ErrorKind.ENGINE_DEAD: "UNAVAILABLE",
    ErrorKind.UNAVAILABLE: "UNAVAILABLE",
}


def error_response(pb_utils: Any, exc: BaseException) -> Any:
    """A failed request's response: a step's error with its kind's status and tag; anything else is ours
    (INTERNAL), logged with its trace."""
    errors = pb_utils.TritonError
    if isinstance(exc, StepError):
        # CANCELLED is missing from the TritonError of older python backends
        status = getattr(errors, STATUS[exc.kind], errors.UNAVAILABLE)
        return pb_utils.InferenceResponse(error=errors(exc.server_error().message(), status))
    log.error("request failed", exc_info=exc)
    internal = ServerError(ErrorKind.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
    return pb_utils.InferenceResponse(error=errors(internal.message(), errors.INTERNAL))


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


def release_senders() -> None:
    """Collect the garbage cycles that may still hold a request and its response sender (an exception's traceback
    holding the frame that held them, say) while the stub can still take each sender's cleanup. Call it last in a
    step's `finalize`: the stub is torn down before its interpreter, whose final collection would destroy such a
    sender after that, and `~ResponseSender` then frees its cancellation state into a shared-memory pool that is
    gone: SIGSEGV in `Py_FinalizeEx` at a graceful stop (python_backend's "Segfault encountered" in the log; the
    engine step's senders carry that state once it has asked whether its request was cancelled)."""
    gc.collect()
