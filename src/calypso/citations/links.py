"""Links a client can open to see a cited source, signed so no API key travels with them.

A link is ``{base}/v1/files/{file_id}/content?expires=E&signature=S`` plus
``#page=N`` for PDFs, where S is an HMAC-SHA256 over the file id, its
workspace and E under the server's secret. It works without an API key until
E; a tampered or expired link answers 403.

A crawled page links to its original URL instead, and a web page (crawled or
uploaded HTML) carries a text fragment (``#:~:text=``, the URL Fragment Text
Directives spec) for the quote, so a browser scrolls to it and highlights it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from pathlib import Path
from urllib.parse import quote as percent_encode

from calypso.locators import PDF_MEDIA_TYPE
from calypso.models import Passage
from calypso.text.cjk import has_cjk

_ROUND_SECONDS = 3600  # expiry rounded up to the hour, so one answer's links are stable
_WEB_TYPES = {"text/html", "application/xhtml+xml"}
# A quote longer than this is given as textStart,textEnd: browsers match each end, and a long exact
# text breaks on any difference between our extracted text and the rendered page.
_EXACT_WORDS = 8
_EDGE_WORDS = 4
_EXACT_CJK_CHARS = 24  # about eight words of Chinese
_EDGE_CJK_CHARS = 8
_MARKUP_ONLY = set("#*|>_-=`~+")  # markdown our HTML extraction adds; a browser's rendered text has none


def _encode_term(text: str) -> str:
    """Percent-encode one text-directive term: the spec reserves "-", "&" and "," besides URL syntax."""
    return percent_encode(text, safe="").replace("-", "%2D")


def text_fragment(quote: str) -> str:
    """``:~:text=`` for ``quote``: the exact words when short, ``textStart,textEnd`` when long; "" when empty."""
    words = [w.strip("*_`") for w in quote.split() if not set(w) <= _MARKUP_ONLY]
    words = [w for w in words if w]
    if not words:
        return ""
    joined = " ".join(words)
    if has_cjk(joined) and len(joined) > _EXACT_CJK_CHARS:
        # Chinese and Japanese have no spaces to count words by: a long quote is one "word". Its ends
        # are a few characters each, cut before a comma or stop would be (browsers match them as text).
        start, end = joined[:_EDGE_CJK_CHARS], joined[-_EDGE_CJK_CHARS:]
        return f":~:text={_encode_term(start)},{_encode_term(end)}"
    if len(words) <= _EXACT_WORDS:
        return ":~:text=" + _encode_term(" ".join(words))
    start, end = " ".join(words[:_EDGE_WORDS]), " ".join(words[-_EDGE_WORDS:])
    return f":~:text={_encode_term(start)},{_encode_term(end)}"


def _fragment(passage: Passage, page: int | None, quote: str | None) -> str:
    """What follows ``#`` for this passage: the page of a PDF, the quote's text fragment on a web page."""
    media_type = passage.document.media_type
    if media_type == PDF_MEDIA_TYPE:
        return f"page={page or passage.chunk.page_start}"
    if media_type in _WEB_TYPES or passage.document.source_url:
        return text_fragment(quote if quote is not None else passage.chunk.text)
    return ""


def _with_fragment(url: str, fragment: str) -> str:
    return f"{url}#{fragment}" if fragment else url


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

    def url(self, passage: Passage, page: int | None = None, quote: str | None = None) -> str:
        document = passage.document
        expires = self.expires()
        sig = signature(self.secret, document.file_id, document.workspace, expires)
        url = f"{self.base_url}/v1/files/{document.file_id}/content?expires={expires}&signature={sig}"
        return _with_fragment(url, _fragment(passage, page, quote))


def source_url(passage: Passage, links: LinkSigner | None, page: int | None = None, quote: str | None = None) -> str:
    """Where a reader sees the passage (``quote``, when given, highlighted on web pages).

    A crawled page: its original URL. Otherwise a signed link when a signer is given, else the bare
    content path (tests, offline rendering).
    """
    original = passage.document.source_url
    if original and original.startswith(("http://", "https://")):
        return _with_fragment(original.split("#", 1)[0], _fragment(passage, page, quote))
    if links is not None:
        return links.url(passage, page, quote)
    url = f"/v1/files/{passage.document.file_id}/content"
    return _with_fragment(url, _fragment(passage, page, quote))
