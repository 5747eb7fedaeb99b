"""The errors a step answers a request with; `triton_io.error_response` maps each to its Triton status."""


class InvalidRequest(ValueError):
    """The request breaks the tensor contract or a configured limit: the client's to fix (INVALID_ARG)."""

    reason = "invalid"  # its label in reranker_rejected_requests_total (python_backends/prometheus.py)


class Overloaded(RuntimeError):
    """The request is valid but the step's work budget is spent: the client should retry later (UNAVAILABLE)."""

    reason = "work_budget"
