"""``/healthz``, ``/readyz`` and Prometheus ``/metrics`` on a real server (issue 28)."""

from __future__ import annotations

import json

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from calypso.demo import ingest_demo
from calypso.generation.fake_upstream import FakeUpstream, Script


def _samples(http: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_healthz_and_readyz_answer_without_a_key(kb, http) -> None:
    assert http.get("/healthz").json()["status"] == "ok"
    ready = http.get("/readyz")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["status"] == "ready"
    assert body["checks"]["database"] == {"ok": True, "backend": body["checks"]["database"]["backend"]}
    assert body["checks"]["ingest_workers"]["running"] == body["checks"]["ingest_workers"]["started"] >= 1
    assert body["checks"]["ocr"]["engine"].startswith("PP-OCRv6 tiny (faster-paddle")  # issue 40
    vectors = body["checks"]["vectors"]  # issue 43: which languages the vectors cover, and whether search crosses them
    if vectors["model"] == "minilm-l6-v2-int8":
        assert vectors["languages"] == ["en"] and vectors["crosses_languages"] is False
    elif vectors["model"] is not None:
        assert vectors["model"] == "multilingual-e5-small-int8" and vectors["languages"] is None
        assert vectors["crosses_languages"] is True and vectors["pending_documents"] >= 0
    else:
        assert vectors == {
            "ok": True,
            "model": None,
            "languages": [],
            "crosses_languages": False,
            "pending_documents": 0,
        }


def test_readyz_says_which_check_fails_when_the_workers_are_gone(server, http) -> None:
    server.server.config.app.state.ingest_workers.stop(5)  # as if its threads had died
    ready = http.get("/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert body["status"] == "not_ready"
    assert body["checks"]["ingest_workers"]["ok"] is False and body["checks"]["ingest_workers"]["running"] == 0
    assert body["checks"]["database"]["ok"] is True


def test_metrics_count_requests_by_route_and_report_the_knowledge_base(kb, http) -> None:
    ingest_demo(kb)
    for _ in range(3):
        assert http.post("/v1/search", json={"query": "refund within 30 days"}).status_code == 200
    http.get("/v1/files/file-does-not-exist")  # a 404 through a templated route
    samples = _samples(http)
    assert _value(samples, "calypso_http_requests_total", method="POST", route="/v1/search", status="200") == 3
    assert _value(samples, "calypso_http_requests_total", method="GET", route="/v1/files/{file_id}", status="404") == 1
    count = _value(samples, "calypso_http_request_duration_seconds_count", method="POST", route="/v1/search")
    assert count == 3
    assert _value(samples, "calypso_documents", status="completed") == 3  # the demo's three files
    assert _value(samples, "calypso_index_passages", namespace="general", kind="keyword") > 0
    assert ("calypso_ingest_jobs", (("state", "queued"),)) in samples
    assert ("calypso_ingest_lag_seconds", ()) in samples


def test_metrics_time_the_first_token_and_count_upstream_failures(kb, settings, http) -> None:
    ingest_demo(kb)
    settings.llm_model, settings.generator = "fake-model", "upstream"
    with FakeUpstream(default=Script.from_text("Refunds are possible within 30 days.")) as upstream:
        settings.llm_base_url = upstream.base_url
        body = {"model": "calypso-rag-agent", "input": "How long do refunds take?", "stream": True}
        with http.stream("POST", "/v1/responses", json=body) as response:
            assert response.status_code == 200
            events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: {")]
        assert events[-1]["type"] == "response.completed"
        upstream.script(Script(status=500, fail_times=10, error_message="model crashed"))
        failed = http.post("/v1/responses", json={**body, "stream": False})
        assert failed.status_code == 502
    samples = _samples(http)
    assert _value(samples, "calypso_time_to_first_token_seconds_count", route="/v1/responses") == 1
    assert _value(samples, "calypso_upstream_errors_total", code="upstream_500") >= 1


def test_metrics_can_require_a_token_or_be_off(settings, services) -> None:
    from calypso.api.app import create_app
    from testkit.live_server import LiveServer, free_port

    settings.metrics_token = SecretStr("scrape-me")
    with LiveServer(create_app(settings, services), free_port()) as live, httpx.Client(base_url=live.url) as http:
        refused = http.get("/metrics")
        assert refused.status_code == 401
        assert set(refused.json()["error"]) == {"message", "type", "param", "code"}
        assert http.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).status_code == 200
        settings.metrics_enabled = False
        assert http.get("/metrics", headers={"Authorization": "Bearer scrape-me"}).status_code == 404


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_probes_are_in_the_openapi_document(api, path) -> None:
    assert path in api.get("/openapi.json").json()["paths"]


def test_readyz_says_when_uploads_wait_for_a_worker_that_never_comes(settings, services) -> None:
    from calypso.api.app import create_app
    from testkit.live_server import LiveServer, free_port

    if settings.database_url:
        pytest.skip("on PostgreSQL separate `calypso worker` processes may take the job")
    settings.ingest_workers = 0
    with LiveServer(create_app(settings, services), free_port()) as live, httpx.Client(base_url=live.url) as http:
        assert http.get("/readyz").status_code == 200  # nothing waits: nothing is wrong
        files = {"file": ("note.md", b"# Note\n\nThe ferry leaves at noon.\n", "text/markdown")}
        uploaded = http.post("/v1/documents", files=files, params={"wait": "false"})
        assert uploaded.json()["status"] == "in_progress"
        # The document says why it does not move, not "0 pages parsed" forever.
        progress = http.get(f"/v1/documents/{uploaded.json()['id']}").json()["progress"]
        assert progress["state"] == "queued" and "CALYPSO_INGEST_WORKERS=0" in progress["detail"]
        ready = http.get("/readyz")
        assert ready.status_code == 503
        check = ready.json()["checks"]["ingest_workers"]
        assert check["ok"] is False and "CALYPSO_INGEST_WORKERS=0" in check["error"]
