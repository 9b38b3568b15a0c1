"""Links a client can open to see a cited source, signed so no API key travels with them.

A link is ``{base}/v1/files/{file_id}/content?expires=E&signature=S`` plus
``#page=N`` for PDFs, where S is an HMAC-SHA256 over the file id, its
workspace and E under the server's secret. It works without an API key until
E; a tampered or expired link answers 403.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from pathlib import Path

from calypso.models import Passage

_ROUND_SECONDS = 3600  # expiry rounded up to the hour, so one answer's links are stable


def load_secret(configured: str | None, home: Path) -> bytes:
    """The configured secret, or a random one created once and kept in the data directory."""
    if configured:
        return configured.encode()
    path = home / "signing.key"
    if not path.exists():
        home.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip().encode()


def signature(secret: bytes, file_id: str, workspace: str, expires: int) -> str:
    message = f"{file_id}\n{workspace}\n{expires}".encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def verify(secret: bytes, file_id: str, workspace: str, expires: int, given: str, now: float | None = None) -> bool:
    if expires < (now if now is not None else time.time()) or not given.isascii():
        return False  # a signature is hex: anything else is tampered (and compare_digest refuses non-ASCII str)
    return hmac.compare_digest(signature(secret, file_id, workspace, expires), given)


class LinkSigner:
    """Builds signed source links for one request (its public base URL)."""

    def __init__(self, secret: bytes, base_url: str, ttl_seconds: int) -> None:
        self.secret = secret
        self.base_url = base_url.rstrip("/")
        self.ttl_seconds = ttl_seconds

    def expires(self, now: float | None = None) -> int:
        at = int(now if now is not None else time.time()) + self.ttl_seconds
        return -(-at // _ROUND_SECONDS) * _ROUND_SECONDS

    def url(self, passage: Passage, page: int | None = None) -> str:
        document = passage.document
        expires = self.expires()
        sig = signature(self.secret, document.file_id, document.workspace, expires)
        url = f"{self.base_url}/v1/files/{document.file_id}/content?expires={expires}&signature={sig}"
        if document.media_type == "application/pdf":
            url += f"#page={page or passage.chunk.page_start}"
        return url


def source_url(passage: Passage, links: LinkSigner | None, page: int | None = None) -> str:
    """A signed link when a signer is given; else the bare content path (tests, offline rendering)."""
    if links is not None:
        return links.url(passage, page)
    url = f"/v1/files/{passage.document.file_id}/content"
    if passage.document.media_type == "application/pdf":
        url += f"#page={page or passage.chunk.page_start}"
    return url
