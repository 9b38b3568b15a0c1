"""Links a client can open to see a cited source, signed so no API key travels with them.

A citation of an uploaded file links to the passage viewer (``api/routes/viewer.py``)::

    {base}/v1/files/{file_id}/view?expires=E&signature=S&chunk=N[&quote_start=a&quote_end=b][&page=P]

where S is an HMAC-SHA256 over the file id, its workspace and E under the server's secret. The viewer
shows passage N with the quote (code-point offsets a..b into the passage) marked, on page P of a PDF;
its "download the original" link is the same E and S on ``/v1/files/{file_id}/content``. Both work
without an API key until E; a tampered or expired link answers 403.

The signature covers what grants access (which file, whose, until when), not what to show: the same
E and S already open the whole file, so ``chunk``, ``quote_*`` and ``page`` may be changed by a client
(the playground moves ``page`` to the quote's page) without opening anything more.

A crawled page links to its original URL instead, with a text fragment (``#:~:text=``, the URL Fragment
Text Directives spec) for the quote, so a browser scrolls to it and highlights it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from pathlib import Path
from urllib.parse import quote as percent_encode

from calypso.citations.grounded import Quote
from calypso.ingest.formats import PDF
from calypso.models import Passage
from calypso.text.cjk import has_cjk

_ROUND_SECONDS = 3600  # expiry rounded up to the hour, so one answer's links are stable
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


def _original_fragment(passage: Passage, page: int | None, quote: str | None) -> str:
    """What follows ``#`` on a crawled document's original URL: its page if a PDF, else the quote's text."""
    if passage.document.media_type == PDF:
        return f"page={page or passage.chunk.page_start}"
    return text_fragment(quote if quote is not None else passage.chunk.text)


def _with_fragment(url: str, fragment: str) -> str:
    return f"{url}#{fragment}" if fragment else url


def view_query(passage: Passage, page: int | None = None, span: tuple[int, int] | None = None) -> str:
    """The viewer's own parameters: the passage, the quote's offsets in it, and the page of a paged document."""
    query = f"chunk={passage.chunk.chunk_index}"
    if span is not None:
        query += f"&quote_start={span[0]}&quote_end={span[1]}"
    if passage.has_pages:
        query += f"&page={page or passage.chunk.page_start}"
    return query


def view_path(file_id: str) -> str:
    return f"/v1/files/{file_id}/view"


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

    def access(self, file_id: str, workspace: str) -> str:
        """``expires=E&signature=S`` for one file: what opens its viewer and its content without a key."""
        expires = self.expires()
        return f"expires={expires}&signature={signature(self.secret, file_id, workspace, expires)}"

    def url(self, passage: Passage, page: int | None = None, span: tuple[int, int] | None = None) -> str:
        """The signed viewer link of ``passage``, its quote at ``span`` (offsets into the passage) marked."""
        document = passage.document
        access = self.access(document.file_id, document.workspace)
        return f"{self.base_url}{view_path(document.file_id)}?{access}&{view_query(passage, page, span)}"


def source_url(
    passage: Passage,
    links: LinkSigner | None,
    page: int | None = None,
    quote: str | None = None,
    span: tuple[int, int] | None = None,
) -> str:
    """Where a reader sees the passage, its quote (``quote`` the text, ``span`` its offsets) highlighted.

    A crawled page: its original URL with the quote's text fragment. Otherwise the passage viewer: a
    signed link when a signer is given, else the bare viewer path (tests, offline rendering).
    """
    original = passage.document.source_url
    if original and original.startswith(("http://", "https://")):
        return _with_fragment(original.split("#", 1)[0], _original_fragment(passage, page, quote))
    if links is not None:
        return links.url(passage, page, span)
    return f"{view_path(passage.document.file_id)}?{view_query(passage, page, span)}"


def quote_url(passage: Passage, links: LinkSigner | None, quote: Quote) -> str:
    """``source_url`` of one citation: its quote marked, on the quote's page."""
    return source_url(passage, links, quote.page_number, quote.text, (quote.passage_start, quote.passage_end))
