"""The engine step's spans (python_backends.tracing): children of the span Triton hands the step, failed when the
block raises, and nothing at all when tracing is off or the request carries no context."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from python_backends.tracing import ENDPOINT_ENV, StepTracer

TRACE_ID, TRITON_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


class Request:
    """What the step reads of a Triton request: `trace().get_context()`."""

    def __init__(self, context: str | None) -> None:
        self.context = context

    def trace(self) -> "Request":
        return self

    def get_context(self) -> str | None:
        return self.context


TRACED = Request(json.dumps({"traceparent": f"00-{TRACE_ID}-{TRITON_SPAN}-01"}))


def test_a_span_is_a_child_of_the_steps_triton_span_with_its_attributes():
    exporter = InMemorySpanExporter()
    tracer = StepTracer("rerank_engine", environ={}, exporter=exporter)
    with tracer.span("vLLM", tracer.parent_of(TRACED), sequences=3) as span:
        span.add_event("handed over")
    (done,) = exporter.get_finished_spans()
    assert (done.name, format(done.context.trace_id, "032x"), format(done.parent.span_id, "016x")) == (
        "vLLM", TRACE_ID, TRITON_SPAN)
    assert (dict(done.attributes), [e.name for e in done.events]) == ({"sequences": 3}, ["handed over"])
    assert done.resource.attributes["service.name"] == "rerank_engine"


def test_a_block_that_raises_ends_its_span_failed_and_the_error_goes_on():
    exporter = InMemorySpanExporter()
    tracer = StepTracer("rerank_engine", environ={}, exporter=exporter)
    with pytest.raises(TimeoutError):
        with tracer.span("wait for in-flight room", tracer.parent_of(TRACED)):
            raise TimeoutError("deadline passed")
    (done,) = exporter.get_finished_spans()
    assert (done.status.status_code, done.status.description) == (StatusCode.ERROR, "TimeoutError: deadline passed")


def test_untraced_requests_and_tracing_off_make_no_span():
    exporter = InMemorySpanExporter()
    tracer = StepTracer("rerank_engine", environ={}, exporter=exporter)
    assert tracer.parent_of(Request(None)) is None
    with tracer.span("vLLM", None) as span:
        assert span is None
    assert exporter.get_finished_spans() == ()
    off = StepTracer("rerank_engine", environ={ENDPOINT_ENV: ""})
    assert off.parent_of(TRACED) is None
    assert StepTracer.off().parent_of(TRACED) is None
