"""Fetch one web page for ingestion, refusing what would make us an SSRF proxy."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from calypso.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType, UpstreamError, UpstreamTimeout

TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain", "text/markdown", "text/x-markdown")
_MAX_REDIRECTS = 5


@dataclass
class FetchedPage:
    url: str  # final URL after redirects
    content: bytes
    media_type: str


def _check_url(url: str, allow_private: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequest(f"Cannot crawl {url!r}: only absolute http(s) URLs are accepted.", param="url")
    if allow_private:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or 443, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InvalidRequest(f"Cannot resolve host {parts.hostname!r}: {exc}.", param="url") from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise InvalidRequest(
                f"Refusing to crawl {url!r}: {parts.hostname} resolves to the non-public address {address}. "
                "Set CALYPSO_CRAWL_ALLOW_PRIVATE=true to allow private and loopback addresses.",
                param="url",
                code="private_address",
            )


def fetch_page(url: str, *, timeout: float, max_bytes: int, allow_private: bool) -> FetchedPage:
    """GET ``url`` (following up to 5 redirects, each checked) and return its bytes if they are text."""
    with httpx.Client(timeout=timeout, follow_redirects=False, headers={"User-Agent": "calypso-crawler/0.1"}) as client:
        for _ in range(_MAX_REDIRECTS + 1):
            _check_url(url, allow_private)
            try:
                with client.stream("GET", url) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    if response.status_code >= 400:
                        raise UpstreamError(
                            f"Fetching {url} failed: the server answered HTTP {response.status_code}.",
                            param="url",
                            code=f"http_{response.status_code}",
                        )
                    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                    if media_type not in TEXT_TYPES:
                        raise UnsupportedMediaType(
                            f"{url} returned {media_type or 'no content type'}; crawling accepts only "
                            f"{', '.join(TEXT_TYPES)}. Upload other files through POST /v1/documents.",
                            param="url",
                        )
                    content = bytearray()
                    for piece in response.iter_bytes():
                        content.extend(piece)
                        if len(content) > max_bytes:
                            raise PayloadTooLarge(
                                f"{url} is larger than {max_bytes:,} bytes (setting CALYPSO_MAX_UPLOAD_BYTES).",
                                param="url",
                            )
                    return FetchedPage(str(response.url), bytes(content), media_type)
            except httpx.TimeoutException as exc:
                raise UpstreamTimeout(f"Fetching {url} timed out after {timeout:g} s.", param="url") from exc
            except httpx.HTTPError as exc:
                raise UpstreamError(f"Fetching {url} failed: {exc}.", param="url", code="fetch_failed") from exc
    raise UpstreamError(f"Fetching {url} redirected more than {_MAX_REDIRECTS} times.", param="url")
