"""A server's error, as tritonclient raises it, read the one way (python_backends.contract.server_error)."""

from __future__ import annotations

from tritonclient.utils import InferenceServerException

from python_backends.contract import ServerError, server_error


def read_error(error: InferenceServerException) -> ServerError:
    """The kind, the input and the text of a failed call's error."""
    return server_error(str(error.status()), error.message() or str(error))


def with_error(error: InferenceServerException, read: ServerError) -> InferenceServerException:
    """`error` with its message replaced by `read`'s wire form (its status and details kept)."""
    return InferenceServerException(msg=read.message(), status=error.status(), debug_details=error.debug_details())
