"""One trace per call: with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, each HTTP call is a span (OpenTelemetry's FastAPI
instrumentation) and each request it sends to Triton a child span whose context travels as the gRPC `traceparent`
(its grpc.aio client instrumentation). Triton's OpenTelemetry mode continues that trace with its spans of the
ensemble and each step, and the engine step adds its own (python_backends/tracing.py): one trace from the caller to
vLLM, exported by OTLP/HTTP. Unset: nothing is instrumented or imported."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI

SERVICE_NAME = "reranker-gateway"
UNTRACED_PATHS = "health,metrics"  # probes and scrapes: no trace of their own


def instrument(app: FastAPI, endpoint: str | None) -> Any | None:
    """Trace `app`'s calls and every grpc.aio channel made from here on; the provider to shut down, or None."""
    if not endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE_NAME}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    FastAPIInstrumentor.instrument_app(app, tracer_provider=provider, excluded_urls=UNTRACED_PATHS)
    GrpcAioInstrumentorClient().instrument(tracer_provider=provider)  # before the lifespan makes the channels
    return provider


@contextmanager
def untraced(provider: Any | None) -> Iterator[None]:
    """The block's calls to Triton make no span and send no traceparent (the readiness probe's pair: a trace every
    few seconds of every pod would bury the calls')."""
    if provider is None:
        yield
        return
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    with suppress_instrumentation():
        yield
