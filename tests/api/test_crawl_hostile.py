"""Malformed crawl URLs are the client's mistake: 400 with param "url", never a 500."""

from __future__ import annotations

import httpx
import pytest


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com:99999/",
        "http://example.com:abc/",
        "http://[::1/",
        "http://[fe80::1%zz/",
        "http://" + "a" * 64 + ".example/",
        "http://" + ".".join(["abcdefghij"] * 30) + "/",
    ],
)
def test_malformed_crawl_urls_are_400(api: httpx.Client, url: str) -> None:
    response = api.post("/v1/documents/crawl", json={"url": url})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "url"
    assert "Cannot crawl" in error["message"]
