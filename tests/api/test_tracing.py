"""OpenTelemetry: with CALYPSO_OTLP_ENDPOINT set, each request is a span sent to the collector over OTLP/HTTP.

The collector is a real HTTP server on loopback that keeps what it is sent; the spans are decoded with
OpenTelemetry's own protobuf messages.
"""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from calypso.api.app import create_app
from testkit.live_server import LiveServer, free_port

try:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
except ImportError:  # the otel extra: `make install` installs it, so CI must run this
    if os.environ.get("CI"):
        raise
    pytest.skip("the otel extra is not installed", allow_module_level=True)


class Collector:
    def __init__(self) -> None:
        self.spans: list[Any] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            collector.spans += [(resource.resource, span) for span in scope.spans]
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_requests_are_traced_to_the_configured_collector(kb, settings, services) -> None:
    collector = Collector()
    settings.otlp_endpoint = collector.url
    try:
        with LiveServer(create_app(settings, services), free_port()) as live:
            assert httpx.post(f"{live.url}/v1/search", json={"query": "refund window"}).status_code == 200
            assert httpx.get(f"{live.url}/healthz").status_code == 200  # probes are not traced
        # Leaving the server shut the app down, which sends the spans still batched.
        names = [span.name for _, span in collector.spans]
        assert any("/v1/search" in name for name in names), names
        assert not any("healthz" in name for name in names)
        resource = collector.spans[0][0]
        service = {a.key: a.value.string_value for a in resource.attributes}["service.name"]
        assert service == "calypso"
    finally:
        collector.server.shutdown()


def test_without_an_endpoint_nothing_is_traced(api) -> None:
    assert api.app.state.tracer_provider is None
