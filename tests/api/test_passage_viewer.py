"""The passage viewer (``/v1/files/{id}/view``): what a citation's signed link opens (issue 24, item 5).

Citations of uploaded files link to it; it shows the passage with the quote marked (on its rendered page
for a PDF), answers 403 in OpenAI's error shape on a tampered or expired link and 404 on an unknown file,
escapes everything, and leaves the raw file at ``/content`` with HEAD and Range as before.
"""

from __future__ import annotations

import html
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from calypso.citations.links import signature
from calypso.models import Chunk, Document, Page, WordBox
from calypso.services.ingestion import IngestionService, Upload
from calypso.viewer.passage import build_view

HOSTILE = b"""# Security notes

## Reporting

Reports about <script>alert("owned")</script> injection go to the security team within two days.

## Rewards

Bounties are paid for every confirmed report of a critical flaw.
"""
HOSTILE_QUESTION = "Where do reports about script injection go?"


def _citations(api: httpx.Client, question: str) -> list[dict[str, Any]]:
    """The quote-level links of a Responses answer (url_citation annotations with inline citations)."""
    response = api.post("/v1/responses", json={"input": question, "include": ["inline_citations"]})
    assert response.status_code == 200, response.text
    annotations = response.json()["output"][-1]["content"][0]["annotations"]
    assert annotations, response.json()["output"][-1]["content"][0]["text"]
    return annotations


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def _mark(page: str) -> str:
    found = re.search(r'<mark id="quote">(.*?)</mark>', page, re.S)
    assert found, page[:2000]
    return html.unescape(found.group(1))


def test_a_markdown_citation_opens_the_passage_with_its_quote_marked_and_escaped(api, kb: IngestionService) -> None:
    kb.ingest(Upload(HOSTILE, "security.md"))
    annotation = _citations(api, HOSTILE_QUESTION)[0]
    url = annotation["url"]
    assert "/view?" in url and "#" not in url
    query = _query(url)
    core = annotation["_aicore"]
    assert (int(query["chunk"]), int(query["quote_start"]), int(query["quote_end"])) == (
        core["chunk_index"],
        core["quote_start"],
        core["quote_end"],
    )
    assert "page" not in query  # a Markdown file has no pages a reader could find

    page = api.get(url)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "'unsafe-inline'" not in csp
    assert page.headers["referrer-policy"] == "no-referrer" and page.headers["x-content-type-options"] == "nosniff"
    body = page.text
    assert "<script" not in body.lower()  # the page runs nothing, and the file's markup is text
    assert "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;" in body
    assert "<script>alert" in _mark(body)  # the quote, unescaped, is the hostile sentence itself
    assert "Security notes › Reporting" in body  # the heading path above the quote
    # "Download the original": the same access on /content, which serves the bytes.
    download = re.search(r'href="(content\?[^"]+)"', body)
    assert download
    content = api.get(f"{urlsplit(url).path.rsplit('/', 1)[0]}/{html.unescape(download.group(1))}")
    assert content.status_code == 200 and content.content == HOSTILE


def test_head_on_a_citation_link_answers_as_get_does_without_the_page(api, kb: IngestionService) -> None:
    """Link checkers and chat unfurlers send HEAD before GET (issue 44): 200 with GET's headers, not 405."""
    kb.ingest(Upload(HOSTILE, "security.md"))
    url = _citations(api, HOSTILE_QUESTION)[0]["url"]
    head, get = api.head(url), api.get(url)
    assert head.status_code == 200 and head.content == b""
    for name in ("content-type", "content-security-policy", "cache-control", "referrer-policy"):
        assert head.headers[name] == get.headers[name]
    assert api.head(url.replace("signature=", "signature=0")).status_code == 403


def test_tampered_expired_and_unknown_links(api, kb: IngestionService, services) -> None:
    result = kb.ingest(Upload(HOSTILE, "security.md"))
    url = _citations(api, HOSTILE_QUESTION)[0]["url"]
    parts = urlsplit(url)
    query = _query(url)
    expires, sig = int(query["expires"]), query["signature"]
    view = parts.path
    tampered = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    for params in (
        {"expires": expires, "signature": tampered},
        {"expires": expires + 3600, "signature": sig},
        {"expires": expires},
        {"signature": sig},
    ):
        refused = api.get(view, params={**params, "chunk": 0})
        assert refused.status_code == 403, params
        assert refused.json()["error"]["type"] == "permission_error"
        assert set(refused.json()["error"]) == {"message", "type", "param", "code"}
    past = int(time.time()) - 10
    expired = signature(services.signing_secret, result.document.file_id, result.document.workspace, past)
    assert api.get(view, params={"expires": past, "signature": expired}).status_code == 403
    unknown = api.get("/v1/files/file-doesnotexist/view", params={"expires": expires, "signature": sig})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    # A passage or quote the file does not have: 404 and 400, not a broken page.
    missing = api.get(view, params={"expires": expires, "signature": sig, "chunk": 999})
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "chunk"
    reversed_quote = api.get(view, params={"expires": expires, "signature": sig, "quote_start": 9, "quote_end": 3})
    assert reversed_quote.status_code == 400 and reversed_quote.json()["error"]["param"] == "quote_start"
    # The viewer's parameters are not signed: another passage of the same file opens with the same access.
    assert api.get(view, params={"expires": expires, "signature": sig, "chunk": 0}).status_code == 200
    # With the API key (auth is off here, so none needed) and no signature, the page opens too.
    assert api.get(view).status_code == 200


def test_the_raw_file_keeps_head_and_range(api, kb: IngestionService) -> None:
    kb.ingest(Upload(HOSTILE, "security.md"))
    url = _citations(api, HOSTILE_QUESTION)[0]["url"]
    query = _query(url)
    content = urlsplit(url).path.replace("/view", "/content")
    access = {"expires": query["expires"], "signature": query["signature"]}
    head = api.head(content, params=access)
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == str(len(HOSTILE))
    ranged = api.get(content, params=access, headers={"Range": "bytes=0-9"})
    assert ranged.status_code == 206 and ranged.content == HOSTILE[:10]


def test_a_pdf_citation_opens_its_page_rendered_with_the_quote_boxed(
    api, kb: IngestionService, services, data_dir: Path
) -> None:
    pdf = data_dir / "ingestion-docs/pdf/federal-register-2020-17221.pdf"
    kb.ingest(Upload(pdf.read_bytes(), pdf.name))
    annotation = _citations(api, "What does the Federal Register rule amend?")[0]
    query = _query(annotation["url"])
    assert int(query["page"]) == annotation["_aicore"]["page_number"]
    started = time.perf_counter()
    page = api.get(annotation["url"])
    elapsed = time.perf_counter() - started
    assert page.status_code == 200, page.text
    body = page.text
    assert 'href="data:image/png;base64,' in body
    assert body.count('class="quote-box"') >= 2  # on the page and in the close-up
    assert "The quote is marked on the page." in body
    assert f'href="content?expires={query["expires"]}&amp;signature={query["signature"]}#page={query["page"]}"' in body
    assert elapsed < 5, elapsed
    # Another page of the same PDF ("#page=N" semantics): rendered, the quote not on it.
    elsewhere = (
        "1" if query["page"] != "1" else str(len(services.documents.pages(annotation["_aicore"]["document_id"])))
    )
    other = api.get(annotation["url"].replace(f"page={query['page']}", f"page={elsewhere}"))
    assert other.status_code == 200 and "The quote is not on this page" in other.text
    beyond = api.get(annotation["url"].replace(f"page={query['page']}", "page=999"))
    assert beyond.status_code == 400 and beyond.json()["error"]["param"] == "page"


def test_a_docx_citation_shows_the_heading_path_above_its_quote(api, kb: IngestionService, data_dir: Path) -> None:
    docx = data_dir / "ingestion-docs/docx/doj-ust-chapter13-trustee-handbook-872p.docx"
    kb.ingest(Upload(docx.read_bytes(), docx.name))
    annotation = _citations(api, "What is the standing trustee compensation?")[0]
    body = api.get(annotation["url"]).text
    assert html.escape(annotation["_aicore"]["locator_label"], quote=True) in body
    core = annotation["_aicore"]
    assert len(_mark(body)) == core["quote_end"] - core["quote_start"] > 20
    assert "data:image" not in body  # a DOCX has no page image


class _Documents:
    """The two calls ``build_view`` makes of the documents service, for a hand-made OCR'd image."""

    def __init__(self, chunk: Chunk, pages: list[Page], content: bytes) -> None:
        self.chunk, self.page_list, self.bytes = chunk, pages, content

    def chunks(self, document_id: str, limit: int, after: int | None, workspace: str) -> Any:
        from calypso.models import Listing, StoredChunk

        return Listing([StoredChunk(1, document_id, self.chunk)], False)

    def pages(self, document_id: str, workspace: str) -> list[Page]:
        return self.page_list

    def content(self, document: Document) -> bytes:
        return self.bytes


def test_ocr_word_boxes_mark_the_quote_on_an_image_page() -> None:
    text = "Invoice total due 42 EUR by March"
    words = []
    at = 0
    for i, word in enumerate(text.split()):
        start = text.index(word, at)
        at = start + len(word)
        words.append(WordBox(start, at, 0.1 + 0.1 * i, 0.5, 0.18 + 0.1 * i, 0.55))
    page = Page(1, "1", 0, len(text), modality="ocr", confidence=0.9, words=tuple(words))
    chunk = Chunk(0, text, 0, len(text), 1, 1, ("1",), modality="ocr")
    png = (
        b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (800).to_bytes(4, "big") + (600).to_bytes(4, "big") + b"\x00" * 9
    )
    document = Document(
        "doc-1", "file-1", "default", "general", "scan.png", "image/png", len(png), "", 0, 1, 1, status="completed"
    )
    quote = (text.index("42"), text.index(" by"))  # "42 EUR"
    view = build_view(_Documents(chunk, [page], png), document, 0, *quote)  # type: ignore[arg-type]
    assert view.page is not None and (view.page.width, view.page.height) == (800, 600)
    assert view.page.image_uri and view.page.image_uri.startswith("data:image/png;base64,")
    (box,) = view.page.boxes  # the two words of the quote, merged into one band
    assert (round(box.x0, 2), round(box.x1, 2)) == (0.4, 0.58)


CHINESE = "# 退款政策\n\n## 资格\n\n客户可以在购买后三十天内申请全额退款。礼品卡一律不予退款。\n".encode()


def test_a_chinese_quote_is_marked_as_written(api, kb: IngestionService) -> None:
    kb.ingest(Upload(CHINESE, "退款.md"))
    annotation = _citations(api, "客户可以在多少天内申请全额退款？")[0]
    page = api.get(annotation["url"])
    assert page.headers["content-type"] == "text/html; charset=utf-8" and '<meta charset="utf-8">' in page.text
    assert "退款" in _mark(page.text)
    assert "退款政策 › 资格" in page.text
    # UTF-16 offsets are the playground's; the viewer's are code points, as the annotation's quote_* are.
    core = annotation["_aicore"]
    assert len(_mark(page.text)) == core["quote_end"] - core["quote_start"]


def test_a_slide_passage_is_located_by_its_slide_without_an_image() -> None:
    from calypso.viewer.html_page import render

    text = "Quarterly results\nRevenue grew by twelve percent in the third quarter.\n\nOutlook\nHiring continues."
    split = text.index("Outlook")
    pages = [Page(1, "1", 0, split), Page(2, "2", split, len(text))]
    chunk = Chunk(0, text, 0, len(text), 1, 2, ("1", "2"))
    pptx = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    document = Document("doc-2", "file-2", "default", "general", "deck.pptx", pptx, 10, "", 0, 2, 1)
    quote = (split, split + len("Outlook\nHiring continues."))
    view = build_view(_Documents(chunk, pages, b""), document, 0, *quote)  # type: ignore[arg-type]
    assert view.page is not None and view.page.locator == "slide 2" and view.page.image_uri is None
    page = render(view, "expires=1&signature=ab")
    assert '<p class="where">slide 2</p>' in page and "<svg" not in page
    assert _mark(page) == "Outlook\nHiring continues."
