"""OpenTelemetry tracing of HTTP requests, when an OTLP endpoint is configured (the ``otel`` extra).

``CALYPSO_OTLP_ENDPOINT=http://collector:4318`` sends a span per request (FastAPI's instrumentation:
route, method, status, duration) over OTLP/HTTP to ``{endpoint}/v1/traces``, with the service name
``calypso``. Unset (the default), nothing is imported and nothing is sent.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI

log = logging.getLogger("calypso.tracing")
INSTALL_HINT = "pip install 'calypso[otel]'"


def install(app: FastAPI, endpoint: str) -> Any | None:
    """Trace ``app``'s requests to ``endpoint``; the tracer provider (flush it at shutdown), or None when
    the ``otel`` extra is not installed (said once in the log)."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning("CALYPSO_OTLP_ENDPOINT is set but tracing is not installed (%s): run `%s`.", exc, INSTALL_HINT)
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": "calypso"}))
    traces = f"{endpoint.rstrip('/')}/v1/traces"
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces)))
    # The app's own provider, not the process-global one: tests build many apps in one process.
    FastAPIInstrumentor.instrument_app(app, tracer_provider=provider, excluded_urls="healthz,readyz,metrics")
    log.info("tracing requests to %s", traces)
    return provider
