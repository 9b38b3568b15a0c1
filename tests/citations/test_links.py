"""Where a citation's link leads: the passage viewer for uploaded files, the original URL for crawled pages."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from calypso.citations.links import LinkSigner, source_url, verify
from calypso.models import Chunk, Document, Passage

SECRET = b"test-secret"


def _passage(media_type: str, pages: int = 1, source: str | None = None) -> Passage:
    document = Document("doc-1", "file-1", "acme", "general", "f", media_type, 10, "", 0, pages, 3, source_url=source)
    chunk = Chunk(2, "Alpha beta gamma delta.", 100, 123, 4, 4, ("iv",))
    return Passage(document, chunk, 0.5)


def test_an_uploaded_pdf_links_to_the_viewer_at_the_quote_and_its_page() -> None:
    signer = LinkSigner(SECRET, "https://kb.example/", 3600)
    url = signer.url(_passage("application/pdf", pages=9), page=5, span=(6, 10))
    parts = urlsplit(url)
    assert (parts.netloc, parts.path, parts.fragment) == ("kb.example", "/v1/files/file-1/view", "")
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert (query["chunk"], query["quote_start"], query["quote_end"], query["page"]) == ("2", "6", "10", "5")
    # The signature opens this file of this workspace until expires, whatever the view parameters say.
    assert verify(SECRET, "file-1", "acme", int(query["expires"]), query["signature"])
    assert not verify(SECRET, "file-2", "acme", int(query["expires"]), query["signature"])


def test_a_document_without_pages_has_no_page_parameter() -> None:
    assert source_url(_passage("text/markdown"), None, quote="beta", span=(6, 10)) == (
        "/v1/files/file-1/view?chunk=2&quote_start=6&quote_end=10"
    )
    assert source_url(_passage("text/markdown"), None) == "/v1/files/file-1/view?chunk=2"


def test_a_crawled_page_keeps_its_url_and_the_quote_as_a_text_fragment() -> None:
    passage = _passage("text/html", source="https://example.org/ducks#top")
    url = source_url(passage, LinkSigner(SECRET, "https://kb.example", 3600), quote="beta gamma", span=(6, 16))
    assert url == "https://example.org/ducks#:~:text=beta%20gamma"
    pdf = _passage("application/pdf", pages=9, source="https://example.org/a.pdf")
    assert source_url(pdf, None, page=7) == "https://example.org/a.pdf#page=7"
