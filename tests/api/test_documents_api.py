"""Documents, search and crawl over real HTTP on loopback."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests_support import WAIT, wait_for_document

from testkit.live_server import LiveServer, free_port


def _upload(http: httpx.Client, path: Path, namespace: str | None = None, **extra) -> httpx.Response:
    data = {"namespace": namespace} if namespace else {}
    data.update(extra)
    return http.post("/v1/documents", files={"file": (path.name, path.read_bytes())}, data=data, params=WAIT)


def _assert_error(response: httpx.Response, status: int, param: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    if param is not None:
        assert body["error"]["param"] == param
    return body["error"]


def _document_count(http: httpx.Client) -> int:
    return len(http.get("/v1/documents", params={"limit": 100}).json()["data"])


def test_upload_pdf_with_page_labels_and_search(api: httpx.Client, data_dir: Path) -> None:
    pdf = data_dir / "ingestion-docs/pdf/GeoTopo-komprimiert.pdf"
    response = _upload(api, pdf, "math", metadata='{"course": "geotopo"}')
    assert response.status_code == 201, response.text
    doc = response.json()
    assert doc["object"] == "document" and doc["namespace"] == "math"
    assert doc["media_type"] == "application/pdf" and doc["page_count"] > 10
    assert doc["metadata"]["course"] == "geotopo"

    chunks = api.get(f"/v1/documents/{doc['id']}/chunks", params={"limit": 100}).json()["data"]
    assert [c["chunk_index"] for c in chunks] == list(range(len(chunks)))
    labels = [label for c in chunks for label in c["page_labels"]]
    assert "i" in labels or "ii" in labels  # roman front matter from /PageLabels
    assert "1" in labels

    hits = api.post("/v1/search", json={"query": "Fundamentalgruppe", "namespace": "math"}).json()["data"]
    assert hits and hits[0]["attributes"]["document_id"] == doc["id"]
    attributes = hits[0]["attributes"]
    assert attributes["locator_label"].startswith("p")
    assert attributes["label"].startswith("GeoTopo-komprimiert.pdf (p")
    assert api.post("/v1/search", json={"query": "Fundamentalgruppe", "namespace": "general"}).json()["data"] == []


def test_duplicate_upload_returns_existing_document(api: httpx.Client, data_dir: Path) -> None:
    md = data_dir / "ingestion-docs/md/github-terms-of-service.md"
    first = _upload(api, md)
    second = _upload(api, md)
    assert first.status_code == 201 and second.status_code == 200
    assert first.json()["id"] == second.json()["id"]
    assert _upload(api, md, "other").json()["id"] != first.json()["id"]
    assert _document_count(api) == 2


def test_delete_removes_from_retrieval_at_once(api: httpx.Client, data_dir: Path) -> None:
    doc = _upload(api, data_dir / "ingestion-docs/md/github-general-privacy-statement.md").json()
    query = {"query": "personal data privacy statement"}
    assert api.post("/v1/search", json=query).json()["data"]
    deleted = api.delete(f"/v1/documents/{doc['id']}")
    assert deleted.json() == {"id": doc["id"], "object": "document.deleted", "deleted": True}
    assert api.post("/v1/search", json=query).json()["data"] == []
    _assert_error(api.get(f"/v1/documents/{doc['id']}"), 404)
    _assert_error(api.delete(f"/v1/documents/{doc['id']}"), 404)
    _assert_error(api.get(f"/v1/documents/{doc['id']}/chunks"), 404)


def test_search_filters_by_document_ids(api: httpx.Client, data_dir: Path) -> None:
    tos = _upload(api, data_dir / "ingestion-docs/md/github-terms-of-service.md").json()
    privacy = _upload(api, data_dir / "ingestion-docs/md/github-general-privacy-statement.md").json()
    body = {"query": "GitHub account", "max_num_results": 20}
    both = {h["attributes"]["document_id"] for h in api.post("/v1/search", json=body).json()["data"]}
    assert both == {tos["id"], privacy["id"]}
    only = api.post("/v1/search", json={**body, "document_ids": [privacy["id"]]}).json()["data"]
    assert only and {h["attributes"]["document_id"] for h in only} == {privacy["id"]}
    assert len(api.post("/v1/search", json={**body, "max_num_results": 3}).json()["data"]) == 3


def test_list_documents_paginates_and_filters(api: httpx.Client, data_dir: Path) -> None:
    for path in sorted((data_dir / "ingestion-docs/md").iterdir()):
        _upload(api, path, "a")
    _upload(api, data_dir / "ingestion-docs/docx/docx-tables.docx", "b")
    page = api.get("/v1/documents", params={"namespace": "a", "limit": 1}).json()
    assert page["object"] == "list" and len(page["data"]) == 1 and page["has_more"]
    rest = api.get("/v1/documents", params={"namespace": "a", "after": page["last_id"]}).json()
    assert len(rest["data"]) == 1 and not rest["has_more"]
    assert {d["namespace"] for d in api.get("/v1/documents").json()["data"]} == {"a", "b"}


def test_openapi_spec_lists_the_routes(api: httpx.Client) -> None:
    paths = api.get("/openapi.json").json()["paths"]
    for path in (
        "/v1/documents",
        "/v1/documents/crawl",
        "/v1/documents/{document_id}/chunks",
        "/v1/files",
        "/v1/search",
    ):
        assert path in paths


# -- bad input: each gets an OpenAI-shaped error and leaves the knowledge base unchanged --------


def test_empty_upload(api: httpx.Client) -> None:
    error = _assert_error(api.post("/v1/documents", files={"file": ("empty.txt", b"")}), 400, "file")
    assert error["code"] == "empty_file"
    assert _document_count(api) == 0


def test_whitespace_only_upload(api: httpx.Client) -> None:
    _assert_error(api.post("/v1/documents", files={"file": ("blank.md", b"  \n\n \t ")}, params=WAIT), 400, "file")
    assert _document_count(api) == 0


def test_missing_file_field(api: httpx.Client) -> None:
    _assert_error(api.post("/v1/documents", data={"namespace": "general"}), 400, "file")


def test_truncated_pdf(api: httpx.Client, data_dir: Path) -> None:
    data = (data_dir / "ingestion-docs/pdf/ALCE-paper-2305.14627v1.pdf").read_bytes()
    response = api.post("/v1/documents", files={"file": ("cut.pdf", data[: len(data) // 3])}, params=WAIT)
    assert response.status_code in (400, 422)
    _assert_error(response, response.status_code, "file")
    assert _document_count(api) == 0


def test_unsupported_type_lists_supported_ones(api: httpx.Client) -> None:
    error = _assert_error(
        api.post("/v1/documents", files={"file": ("tool.exe", b"MZ\x90\x00\x03\x00\x00\x00" * 50)}), 415, "file"
    )
    assert "pdf" in error["message"].lower() and "docx" in error["message"].lower()
    assert _document_count(api) == 0


def test_file_over_size_limit(api: httpx.Client, kb) -> None:
    kb.settings.max_upload_bytes = 1000
    error = _assert_error(api.post("/v1/documents", files={"file": ("big.txt", b"word " * 400)}), 413, "file")
    assert error["code"] == "file_too_large"
    assert _document_count(api) == 0


@pytest.mark.parametrize("namespace", ["bad name", "../etc", "x" * 65, "ünïcode", "-leading"])
def test_illegal_namespace(api: httpx.Client, namespace: str) -> None:
    response = api.post("/v1/documents", files={"file": ("a.txt", b"Some text.")}, data={"namespace": namespace})
    _assert_error(response, 400, "namespace")
    _assert_error(api.post("/v1/search", json={"query": "x", "namespace": namespace}), 400, "namespace")
    assert _document_count(api) == 0


def test_bad_metadata_json(api: httpx.Client) -> None:
    response = api.post("/v1/documents", files={"file": ("a.txt", b"Some text.")}, data={"metadata": "{nope"})
    _assert_error(response, 400, "metadata")
    assert _document_count(api) == 0


def test_search_validation(api: httpx.Client) -> None:
    _assert_error(api.post("/v1/search", json={"query": ""}), 400, "query")
    _assert_error(api.post("/v1/search", json={"query": "x", "max_num_results": 0}), 400, "max_num_results")
    _assert_error(api.post("/v1/search", json={"query": "x", "bogus": 1}), 400, "bogus")
    _assert_error(api.post("/v1/search", content=b"not json", headers={"content-type": "application/json"}), 400)


def test_unknown_route_and_method(api: httpx.Client) -> None:
    _assert_error(api.get("/v1/nowhere"), 404)
    _assert_error(api.put("/v1/search"), 405)


# -- ingestion jobs: uploads answer at once --------------------------------------------------------


@pytest.fixture
def idle_http(settings, services) -> Iterator[httpx.Client]:
    """A server without ingestion workers: its uploads stay in_progress until a test moves them."""
    from calypso.api.app import create_app

    quiet = settings.model_copy(update={"ingest_workers": 0})
    with LiveServer(create_app(quiet, services), free_port()) as live, httpx.Client(base_url=live.url) as client:
        yield client


TIDE = b"High tide in the harbour is at 06:14. The harbour master posts changes on the noticeboard."


def test_upload_answers_in_progress_then_completes_and_is_searchable(api: httpx.Client) -> None:
    response = api.post("/v1/documents", files={"file": ("tide.txt", TIDE)}, data={"namespace": "tides"})
    assert response.status_code == 201, response.text
    queued = response.json()
    assert queued["status"] == "in_progress" and queued["last_error"] is None
    assert set(queued["progress"]) == {"state", "pages_parsed", "passages_written"}
    done = wait_for_document(api, queued["id"])
    assert done["status"] == "completed" and done["progress"] is None and done["last_error"] is None
    assert done["chunk_count"] == 1 and done["page_count"] == 1
    hits = api.post("/v1/search", json={"query": "harbour master", "namespace": "tides"}).json()["data"]
    assert [h["attributes"]["document_id"] for h in hits] == [queued["id"]]
    again = api.post("/v1/documents", files={"file": ("tide.txt", TIDE)}, data={"namespace": "tides"})
    assert again.status_code == 200 and again.json()["id"] == queued["id"]  # the same bytes: the same document


def test_a_corrupt_upload_ends_failed_listed_and_deletable(api: httpx.Client, data_dir: Path) -> None:
    data = (data_dir / "ingestion-docs/pdf/ALCE-paper-2305.14627v1.pdf").read_bytes()[:5000]
    queued = api.post("/v1/documents", files={"file": ("cut.pdf", data)}).json()
    assert queued["status"] == "in_progress"
    failed = wait_for_document(api, queued["id"])
    assert failed["status"] == "failed" and failed["progress"] is None
    assert failed["last_error"]["code"] == "invalid_file" and "cut.pdf" in failed["last_error"]["message"]
    assert set(failed["last_error"]) == {"code", "message"}
    assert api.get(f"/v1/documents/{queued['id']}/chunks").json()["data"] == []
    listed = api.get("/v1/documents").json()["data"]
    assert [(d["id"], d["status"]) for d in listed] == [(queued["id"], "failed")]
    assert api.delete(f"/v1/documents/{queued['id']}").json()["deleted"] is True
    assert api.get("/v1/documents").json()["data"] == []
    empty = api.post("/v1/documents", files={"file": ("blank.md", b"   \n")}).json()
    assert wait_for_document(api, empty["id"])["last_error"]["code"] == "invalid_file"


def test_an_unknown_type_is_refused_at_once_without_wait(api: httpx.Client) -> None:
    # Detectable from the bytes and name alone, so no job is made for it.
    response = api.post("/v1/documents", files={"file": ("tool.exe", b"MZ\x90\x00\x03\x00\x00\x00" * 50)})
    _assert_error(response, 415, "file")
    assert _document_count(api) == 0


def test_cancel_and_delete_in_progress_documents(idle_http: httpx.Client, services) -> None:
    queued = idle_http.post("/v1/documents", files={"file": ("tide.txt", TIDE)}).json()
    assert queued["progress"] == {"state": "queued", "pages_parsed": 0, "passages_written": 0}
    # Progress as a worker reports it.
    key = services.storage.documents.document_key("default", queued["id"])
    assert services.storage.jobs.claim("test-worker", 30) is not None
    assert services.storage.jobs.report_progress(key, "test-worker", 3, 7)
    seen = idle_http.get(f"/v1/documents/{queued['id']}").json()
    progress = {"state": "parsing", "pages_parsed": 3, "passages_written": 7}
    assert seen["status"] == "in_progress" and seen["progress"] == progress
    assert idle_http.get("/v1/documents").json()["data"][0]["progress"] == seen["progress"]

    cancelled = idle_http.post(f"/v1/documents/{queued['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["progress"] is None
    error = _assert_error(idle_http.post(f"/v1/documents/{queued['id']}/cancel"), 409, "document_id")
    assert error["code"] == "document_not_in_progress" and "cancelled" in error["message"]
    _assert_error(idle_http.post("/v1/documents/nope/cancel"), 404, "document_id")
    # A later upload of the same bytes replaces the cancelled copy.
    fresh = idle_http.post("/v1/documents", files={"file": ("tide.txt", TIDE)})
    assert fresh.status_code == 201 and fresh.json()["id"] != queued["id"]
    assert idle_http.get(f"/v1/documents/{queued['id']}").status_code == 404
    assert idle_http.delete(f"/v1/documents/{fresh.json()['id']}").json()["deleted"] is True
    assert _document_count(idle_http) == 0


# -- crawl ---------------------------------------------------------------------------------------


class _Site(http.server.BaseHTTPRequestHandler):
    pages = {
        "/article": (
            "text/html; charset=utf-8",
            b"<html><head><title>Tide tables</title></head><body>"
            b"<nav><a href='/'>Home</a> | <a href='/about'>About</a></nav><main><h1>Tide tables</h1>"
            + b"<p>High tide in the harbour is at 06:14 and again at 18:40 on weekdays. "
            b"The harbour master posts changes on the noticeboard.</p>" * 5 + b"</main></body></html>",
        ),
        "/image": ("image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100),
        "/plain": ("text/plain", b"Plain page about lighthouse keepers and their logbooks."),
    }

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/slow":
            time.sleep(3)
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/article")
            self.end_headers()
            return
        if self.path not in self.pages:
            self.send_response(404)
            self.end_headers()
            return
        content_type, body = self.pages[self.path]
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_crawl_stores_page_with_url_as_filename(api: httpx.Client, site: str) -> None:
    response = api.post("/v1/documents/crawl", json={"url": f"{site}/redirect", "namespace": "web"}, params=WAIT)
    assert response.status_code == 201, response.text
    doc = response.json()
    assert doc["filename"] == f"{site}/article" and doc["source_url"] == f"{site}/article"
    hits = api.post("/v1/search", json={"query": "when is high tide", "namespace": "web"}).json()["data"]
    assert hits and hits[0]["filename"] == f"{site}/article"
    assert "Home | About" not in hits[0]["content"][0]["text"]
    plain = api.post("/v1/documents/crawl", json={"url": f"{site}/plain"}, params=WAIT).json()
    assert plain["media_type"] == "text/plain"


def test_crawl_errors_leave_kb_unchanged(api: httpx.Client, site: str, kb) -> None:
    _assert_error(api.post("/v1/documents/crawl", json={"url": f"{site}/missing"}), 502, "url")
    _assert_error(api.post("/v1/documents/crawl", json={"url": f"{site}/image"}), 415, "url")
    _assert_error(api.post("/v1/documents/crawl", json={"url": "ftp://example.com/x"}), 400, "url")
    _assert_error(api.post("/v1/documents/crawl", json={"url": "not a url"}), 400, "url")
    kb.settings.crawl_timeout_seconds = 0.5
    _assert_error(api.post("/v1/documents/crawl", json={"url": f"{site}/slow"}), 504, "url")
    assert _document_count(api) == 0


def test_crawl_refuses_loopback_unless_allowed(api: httpx.Client, site: str, kb) -> None:
    kb.settings.crawl_allow_private = False
    error = _assert_error(api.post("/v1/documents/crawl", json={"url": f"{site}/article"}), 400, "url")
    assert "CALYPSO_CRAWL_ALLOW_PRIVATE" in error["message"]
    assert _document_count(api) == 0
