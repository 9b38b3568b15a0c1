"""Signed source links answer HEAD and Range requests, as PDF viewers use them."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from calypso.services.ingestion import Upload

PDF = "ingestion-docs/pdf/scotus-transcript-p1.pdf"


@pytest.fixture
def signed_pdf(kb, data_dir: Path, http: httpx.Client) -> tuple[str, bytes]:
    path = data_dir / PDF
    kb.ingest(Upload(path.read_bytes(), path.name))
    response = http.post("/v1/responses", json={"input": "Knowles v. Mirzayance", "include": ["inline_citations"]})
    # A citation opens the passage viewer; its "download the original" is the same access on /content.
    viewer = next(u for u in response.json()["citations"] if "&page=" in u)
    query = parse_qs(urlsplit(viewer).query)
    content = viewer.split("?")[0].removesuffix("/view") + "/content"
    return f"{content}?expires={query['expires'][0]}&signature={query['signature'][0]}", path.read_bytes()


def test_head_on_a_signed_link(signed_pdf) -> None:
    url, data = signed_pdf
    head = httpx.head(url)
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(data))
    assert head.headers["content-type"] == "application/pdf" and head.headers["accept-ranges"] == "bytes"


def test_range_requests(signed_pdf) -> None:
    url, data = signed_pdf
    first = httpx.get(url, headers={"Range": "bytes=0-1023"})
    assert first.status_code == 206 and first.content == data[:1024]
    assert first.headers["content-range"] == f"bytes 0-1023/{len(data)}"
    assert first.headers["content-length"] == "1024"
    tail = httpx.get(url, headers={"Range": "bytes=-100"})
    assert tail.status_code == 206 and tail.content == data[-100:]
    open_ended = httpx.get(url, headers={"Range": f"bytes={len(data) - 10}-"})
    assert open_ended.content == data[-10:]
    past_end = httpx.get(url, headers={"Range": f"bytes=100-{len(data) * 2}"})
    assert past_end.status_code == 206 and past_end.content == data[100:]
    assert httpx.head(url, headers={"Range": "bytes=0-9"}).headers["content-length"] == "10"
    # Several ranges: the whole file is a valid answer.
    whole = httpx.get(url, headers={"Range": "bytes=0-1,5-9"})
    assert whole.status_code == 200 and whole.content == data


def test_unsatisfiable_range(signed_pdf) -> None:
    url, data = signed_pdf
    refused = httpx.get(url, headers={"Range": f"bytes={len(data)}-"})
    assert refused.status_code == 416
    assert refused.headers["content-range"] == f"bytes */{len(data)}"
    error = refused.json()["error"]
    assert error["code"] == "range_not_satisfiable" and error["type"] == "invalid_request_error"
    assert str(f"{len(data):,}") in error["message"]


def test_head_needs_a_valid_signature(signed_pdf) -> None:
    url, _ = signed_pdf
    assert httpx.head(url.replace("signature=", "signature=0")).status_code == 403
