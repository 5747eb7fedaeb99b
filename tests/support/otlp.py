"""An OTLP/HTTP trace receiver on a local port, built on opentelemetry-proto: what a collector would be given. It
takes both encodings of OTLP/HTTP, protobuf (OpenTelemetry's Python exporter) and JSON (Triton's C++ exporter, ids in
hex), and keeps every span it was sent."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse,
)

PATH = "/v1/traces"


@dataclass(frozen=True)
class Span:
    service: str
    name: str
    trace_id: str  # hex, as traceparent spells it
    span_id: str
    parent_id: str  # "" for a root
    attributes: dict[str, Any] = field(default_factory=dict)
    events: tuple[str, ...] = ()


def _value(value: dict) -> Any:
    """An OTLP/JSON AnyValue as Python (the kinds spans carry here)."""
    for kind in ("stringValue", "boolValue", "doubleValue"):
        if kind in value:
            return value[kind]
    return int(value["intValue"]) if "intValue" in value else value


def spans_of_json(document: dict) -> list[Span]:
    spans = []
    for resource in document.get("resourceSpans", []):
        attributes = {a["key"]: _value(a["value"]) for a in resource.get("resource", {}).get("attributes", [])}
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                spans.append(Span(
                    attributes.get("service.name", ""), span["name"], span["traceId"], span["spanId"],
                    span.get("parentSpanId", ""), {a["key"]: _value(a["value"]) for a in span.get("attributes", [])},
                    tuple(event["name"] for event in span.get("events", []))))
    return spans


def spans_of_protobuf(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource in request.resource_spans:
        service = next((a.value.string_value for a in resource.resource.attributes if a.key == "service.name"), "")
        for scope in resource.scope_spans:
            for span in scope.spans:
                attributes = {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}
                spans.append(Span(service, span.name, span.trace_id.hex(), span.span_id.hex(),
                                  span.parent_span_id.hex(), attributes, tuple(e.name for e in span.events)))
    return spans


class OtlpReceiver:
    """`start()` listens on 127.0.0.1:`port`; `spans` holds what arrived, `wait_for` waits until a condition holds."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}{PATH}"
        self.spans: list[Span] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> "OtlpReceiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                json_body = "json" in self.headers.get("Content-Type", "")
                spans = spans_of_json(json.loads(body)) if json_body else spans_of_protobuf(body)
                with receiver._lock:
                    receiver.spans.extend(spans)
                answer = b"{}" if json_body else ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/json" if json_body else "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def wait_for_any(self, name: str, timeout_s: float) -> list[Span]:
        """The spans of that name, once one has arrived (or none within `timeout_s`)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                named = [span for span in self.spans if span.name == name]
            if named or time.monotonic() > deadline:
                return named
            time.sleep(0.1)

    def trace(self, trace_id: str) -> list[Span]:
        with self._lock:
            return [span for span in self.spans if span.trace_id == trace_id]

    def wait_for(self, trace_id: str, names: set[str], timeout_s: float) -> list[Span]:
        """The trace's spans once one of each name in `names` has arrived, or what arrived within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            spans = self.trace(trace_id)
            if names <= {span.name for span in spans} or time.monotonic() > deadline:
                return spans
            time.sleep(0.1)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
