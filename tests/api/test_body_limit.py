"""Oversized request bodies are refused with 413 in OpenAI's shape, before they are read whole."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from calypso.api.app import create_app
from calypso.config import Settings
from testkit.live_server import LiveServer, free_port


@pytest.fixture
def small_limits(tmp_path: Path) -> Iterator[str]:
    settings = Settings(home=tmp_path / "home", max_request_bytes=64 * 1024, max_upload_bytes=256 * 1024)
    with LiveServer(create_app(settings), free_port()) as live:
        yield live.url


def _assert_413(response: httpx.Response, setting: str) -> None:
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "request_too_large"
    assert setting in error["message"]


def test_oversized_json_body_is_413(small_limits: str) -> None:
    big = {"model": "calypso-rag-agent", "input": "x" * 200_000}
    _assert_413(httpx.post(f"{small_limits}/v1/responses", json=big), "CALYPSO_MAX_REQUEST_BYTES")
    # Chunked (no Content-Length): counted as it arrives.
    body = b'{"input": "' + b"y" * 200_000 + b'"}'
    response = httpx.post(
        f"{small_limits}/v1/chat/completions", content=iter([body[i : i + 8192] for i in range(0, len(body), 8192)])
    )
    _assert_413(response, "CALYPSO_MAX_REQUEST_BYTES")
    # The server still answers, and nothing was stored.
    assert httpx.get(f"{small_limits}/health").status_code == 200


def test_uploads_have_their_own_limit(small_limits: str) -> None:
    ok = httpx.post(f"{small_limits}/v1/documents", files={"file": ("a.txt", b"Harbour cranes. " * 8000)})
    assert ok.status_code == 201, ok.text  # 128 KB: over the JSON limit, under the upload limit
    too_big = httpx.post(f"{small_limits}/v1/documents", files={"file": ("b.txt", b"z" * 600_000)})
    _assert_413(too_big, "CALYPSO_MAX_UPLOAD_BYTES")
