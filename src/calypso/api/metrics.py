"""Prometheus metrics at ``/metrics`` (prometheus-client): what an operator graphs and alerts on.

Per request: a count and a latency histogram per endpoint (the route's path template, so ids do not make a
series each), method and status. Answers: time to first token of streamed replies, and upstream failures
by kind. Read at scrape time from the store and the indexes: the ingestion queue (waiting, running, the
oldest job's age), the embedding queue, documents by status and each loaded namespace's index size.

Each app has its own registry: tests build many apps in one process, and a process's metrics are its own
(several API processes over PostgreSQL are scraped one by one; the store-wide gauges agree).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calypso.generation.upstream import FAILURES
from calypso.services import Services

# A streamed chunk with answer text: Responses' output_text.delta, a chat chunk with non-empty content.
_ANSWER_TEXT = re.compile(rb'"(?:delta|content)": ?"[^"]')
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ServiceCollector(Collector):
    """Gauges read from the services when Prometheus scrapes (a few cheap COUNT queries)."""

    def __init__(self, services: Services) -> None:
        self.services = services

    def collect(self) -> Iterator[Metric]:
        services = self.services
        queue = services.ingestion.queue_stats()
        depth = GaugeMetricFamily("calypso_ingest_jobs", "Ingestion jobs by state.", labels=["state"])
        depth.add_metric(["queued"], queue.queued)
        depth.add_metric(["running"], queue.running)
        yield depth
        lag = queue.oldest_created_at
        yield GaugeMetricFamily(
            "calypso_ingest_lag_seconds",
            "Age of the oldest ingestion job not finished (0 when the queue is empty).",
            value=max(0.0, time.time() - lag) if lag is not None else 0.0,
        )
        yield GaugeMetricFamily(
            "calypso_embed_jobs_pending", "Documents whose passages wait for vectors.", value=services.vectors.pending()
        )
        statuses = GaugeMetricFamily("calypso_documents", "Documents by status.", labels=["status"])
        for status, count in sorted(services.documents.status_counts().items()):
            statuses.add_metric([status], count)
        yield statuses
        passages = GaugeMetricFamily(
            "calypso_index_passages", "Passages in this process's loaded indexes.", labels=["namespace", "kind"]
        )
        for (workspace, namespace), (keyword, vectors) in sorted(self.services.search.index_sizes().items()):
            name = namespace if workspace == "default" else f"{workspace}/{namespace}"
            passages.add_metric([name, "keyword"], keyword)
            passages.add_metric([name, "vector"], vectors)
        yield passages
        failures = CounterMetricFamily(
            "calypso_upstream_errors",
            "Failures of the upstream model server in this process, by code.",
            labels=["code"],
        )
        for code, count in sorted(FAILURES.items()):
            failures.add_metric([code], count)
        yield failures


class Metrics:
    """One app's registry and instruments."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "calypso_http_requests", "HTTP requests.", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "calypso_http_request_duration_seconds",
            "HTTP request time to the last byte, by route.",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.first_token = Histogram(
            "calypso_time_to_first_token_seconds",
            "Streamed answers: from the request to the first answer text sent.",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._collector: ServiceCollector | None = None

    def watch(self, services: Services) -> None:
        """Report the services' queues and indexes (once the app has its services)."""
        if self._collector is None:
            self._collector = ServiceCollector(services)
            self.registry.register(self._collector)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def route_of(scope: Scope) -> str:
    """The matched route's path template ("/v1/responses/{response_id}"); unmatched paths are one series."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class MetricsMiddleware:
    """Counts and times every HTTP request; marks the first body chunk of a stream for time to first token."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state: dict[str, Any] = {"status": 500, "stream": False, "first": None}

        async def observe(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                headers = dict(message.get("headers") or [])
                state["stream"] = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            elif (
                message["type"] == "http.response.body"
                and state["stream"]
                and state["first"] is None
                and _ANSWER_TEXT.search(message.get("body", b""))  # not the role chunk or response.created
            ):
                state["first"] = time.perf_counter() - started
            await send(message)

        try:
            await self.app(scope, receive, observe)
        finally:
            route = route_of(scope)
            if route != "/metrics":
                method = scope.get("method", "")
                self.metrics.requests.labels(method, route, str(state["status"])).inc()
                self.metrics.latency.labels(method, route).observe(time.perf_counter() - started)
                if state["first"] is not None:
                    self.metrics.first_token.labels(route).observe(state["first"])
