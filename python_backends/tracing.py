"""A step's own spans inside the trace Triton makes of a request (OpenTelemetry, exported by OTLP/HTTP).

Triton's OpenTelemetry mode traces a request that arrives with a W3C `traceparent` (scripts/start_server.sh turns it
on with `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, the server's one tracing setting) and hands each Python step the
context of its own span (`request.trace().get_context()`: `{"traceparent": "00-<trace>-<span>-01"}`). `StepTracer`
opens the step's spans as children of that span and exports them to the same collector, so one request is one trace
from the caller's span through Triton's ensemble and step spans to what happens inside the step.

Off (the variable unset, or a request without a context) every call is a no-op and OpenTelemetry is not imported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"  # OpenTelemetry's own name: http://collector:4318/v1/traces


class StepTracer:
    """Spans of one step (`service`: the OpenTelemetry service name), or nothing when tracing is off."""

    def __init__(self, service: str, environ: Mapping[str, str] = os.environ, exporter: Any = None) -> None:
        """`exporter` (an OpenTelemetry SpanExporter) replaces the OTLP exporter of the endpoint; tests pass one."""
        endpoint = environ.get(ENDPOINT_ENV, "")
        self._provider = _provider(service, endpoint, exporter) if endpoint or exporter is not None else None
        self._tracer = self._provider.get_tracer(__name__) if self._provider is not None else None

    @classmethod
    def off(cls) -> "StepTracer":
        return cls("", environ={})

    def parent_of(self, request: Any) -> Any | None:
        """The context of the request's span in the step (a Triton request's `trace().get_context()`), or None: not
        traced, or tracing off."""
        if self._tracer is None:
            return None
        carried = request.trace().get_context()
        if not carried:
            return None
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        context = TraceContextTextMapPropagator().extract(json.loads(carried))
        return context or None

    @contextmanager
    def span(self, name: str, parent: Any | None, **attributes: Any) -> Iterator[Any | None]:
        """A span under `parent` for the block (None when not traced); an exception out of it marks it failed."""
        if parent is None or self._tracer is None:
            yield None
            return
        from opentelemetry.trace import Status, StatusCode

        span = self._tracer.start_span(name, context=parent, attributes=attributes)
        try:
            yield span
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            span.end()

    def close(self) -> None:
        """Export what is still batched."""
        if self._provider is not None:
            self._provider.shutdown()


def _provider(service: str, endpoint: str, exporter: Any) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider
