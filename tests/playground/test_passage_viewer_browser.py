"""Issue 24 in a real browser: a partly grounded answer is shown as such, its unsupported sentence marked,
and a citation's badge opens the passage viewer with the quote highlighted, for a PDF, a DOCX and a
Markdown file.

The fake upstream writes like a small model without markers (``Script.markerless``): it copies a sentence
of the first passage of its prompt, which Calypso cites by inference, and for the Markdown question adds a
sentence no passage supports. Each document sits in a namespace of its own, chosen in the page, so the
first passage is that document's.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests_support import REPO, WAIT, eval_data_dir

from calypso.generation.fake_upstream import FakeUpstream, Script
from testkit.live_server import LiveServer

INVENTED = "Refunds are also paid in cash at any of our stores in the mountains."
DOCUMENTS = {
    "md": (REPO / "src/calypso/demo/refund_policy_2026.md", "How many days do customers have to request a refund?"),
    "pdf": (
        Path("ingestion-docs/pdf/federal-register-2020-17221.pdf"),
        "Which airplanes does the proposed airworthiness directive apply to?",
    ),
    "docx": (
        Path("ingestion-docs/docx/doj-ust-chapter13-trustee-handbook-872p.docx"),
        "What is the standing trustee compensation?",
    ),
}


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _upload(server: LiveServer, kind: str) -> str:
    """Upload the ``kind`` document into a namespace of its own; return the namespace."""
    path, _ = DOCUMENTS[kind]
    if not path.is_absolute():
        path = eval_data_dir() / path
    namespace = f"viewer-{kind}"
    response = httpx.post(
        f"{server.url}/v1/documents",
        params=WAIT,
        data={"namespace": namespace},
        files={"file": (path.name, path.read_bytes())},
        timeout=300,
    )
    assert response.status_code in (200, 201), response.text
    assert response.json()["status"] == "completed", response.json()
    return namespace


def _ask(page: Any, namespace: str, question: str) -> None:
    page.fill("#namespace", namespace)
    page.dispatch_event("#namespace", "change")
    field = page.get_by_label("Question")
    field.fill(question)
    field.press("Enter")
    page.wait_for_selector(
        "#answer-card[aria-busy='false'] #state-badge[data-tone]:not([data-tone='busy'])", timeout=60_000
    )


def _open_first_citation(page: Any) -> Any:
    """Enter on the first badge: the viewer opens in a new tab; return it, loaded."""
    badge = page.locator("#answer-text [data-citation]").first
    badge.focus()
    with page.context.expect_page() as opened:
        page.keyboard.press("Enter")
    viewer = opened.value
    viewer.wait_for_load_state()
    assert "/view?" in viewer.url and "quote_start=" in viewer.url
    return viewer


def _console_errors(page: Any) -> list[str]:
    """Errors of the playground and of every viewer tab it opens (a CSP violation is one)."""
    errors: list[str] = []
    page.context.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


@pytest.fixture
def page(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield context.new_page()
    context.close()


def test_partial_answer_marked_and_viewer_opened_for_md_pdf_and_docx(
    page: Any, playground: LiveServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    tmp_path = Path(os.environ.get("CALYPSO_SCREENSHOTS", tmp_path))
    errors = _console_errors(page)
    namespaces = {kind: _upload(playground, kind) for kind in DOCUMENTS}
    page.goto(playground.url + "/")
    page.wait_for_selector("#bot-select option[value='calypso-rag-agent']", state="attached")

    # Markdown, with an invented sentence: partly grounded, the sentence marked in the answer and evidence.
    upstream.script(Script.markerless(quote=(1,), unsupported=INVENTED))
    _ask(page, namespaces["md"], DOCUMENTS["md"][1])
    badge = page.locator("#state-badge")
    assert badge.inner_text() == "Partly grounded" and badge.get_attribute("data-tone") == "partial"
    assert "1 of 2 claims is not supported by any source" in page.locator("#state-hint").inner_text()
    marked = page.locator("#answer-text .claim.unsupported")
    assert marked.count() == 1 and _flat(marked.inner_text()) == INVENTED
    assert "Unsupported" in marked.get_attribute("title")
    assert page.locator("#answer-text .claim-tag.unsupported").inner_text() == "unsupported"
    supported = _flat(page.locator("#answer-text").inner_text().split(INVENTED)[0])
    assert page.locator("#answer-text .claim").count() == 1  # the supported sentence is not marked
    page.screenshot(path=str(tmp_path / "partial.png"), full_page=True)
    page.get_by_role("button", name="Evidence").click()
    assert _flat(page.locator("#evidence-text .segment.unsupported").inner_text()) == INVENTED
    listed = page.get_by_role("region", name="Unsupported sentences")
    assert "Not supported by any source (1)" in listed.inner_text() and INVENTED in listed.inner_text()
    page.get_by_role("button", name="Answer").click()

    viewer = _open_first_citation(page)
    quote = _flat(viewer.locator("mark#quote").inner_text())
    assert quote and quote in supported  # the quote the badge cites, highlighted in its passage
    assert "Refund Policy 2026 › Eligibility" in viewer.locator(".breadcrumb").inner_text()
    assert viewer.get_by_role("link", name="Download the original").is_visible()
    viewer.screenshot(path=str(tmp_path / "viewer-md.png"), full_page=True)
    viewer.close()

    # Streamed: an invented first sentence is marked as soon as its status arrives, before the answer ends.
    slow = f"{INVENTED} Customers may request a full refund within 30 days of purchase, as the policy says."
    upstream.script(Script.from_text(slow, token_size=3, token_delay=0.04))
    field = page.get_by_label("Question")
    field.fill(DOCUMENTS["md"][1])
    field.press("Enter")
    page.wait_for_selector("#answer-card[aria-busy='true'] #answer-text .claim.unsupported", timeout=30_000)
    page.wait_for_selector("#answer-card[aria-busy='false']", timeout=60_000)
    assert _flat(page.locator("#answer-text .claim.unsupported").inner_text()) == INVENTED

    # Only invented: the documents do not answer it (issue 39). The text stays, marked; no sources are shown.
    upstream.script(Script.from_text(INVENTED, token_size=4))
    _ask(page, namespaces["md"], DOCUMENTS["md"][1])
    assert badge.inner_text() == "Not in the documents" and badge.get_attribute("data-tone") == "warn"
    assert "shown as the model wrote it" in page.locator("#state-hint").inner_text()
    assert _flat(page.locator("#answer-text .claim.unsupported").inner_text()) == INVENTED
    assert not page.get_by_role("region", name="Sources").is_visible()
    page.screenshot(path=str(tmp_path / "not-in-documents.png"), full_page=True)

    # A PDF: its page rendered with the quote boxed, and the quote marked in the passage text.
    upstream.script(Script.markerless(quote=(1,)))
    _ask(page, namespaces["pdf"], DOCUMENTS["pdf"][1])
    assert page.locator("#state-badge").inner_text() == "Grounded"
    viewer = _open_first_citation(page)
    assert viewer.locator("mark#quote").inner_text().strip()
    assert viewer.get_by_role("img", name=re.compile(r"p\. \d+ with the quote marked")).is_visible()
    assert viewer.locator("svg .quote-box").count() >= 2  # the page and the close-up
    box = viewer.locator("svg.close-up").bounding_box()
    assert box and box["width"] > 300 and box["height"] > 20  # the close-up is legible, not a sliver
    viewer.screenshot(path=str(tmp_path / "viewer-pdf.png"), full_page=True)
    viewer.close()

    # A DOCX: the passage under its heading path, the quote marked, no page image.
    upstream.script(Script.markerless(quote=(1,)))
    _ask(page, namespaces["docx"], DOCUMENTS["docx"][1])
    viewer = _open_first_citation(page)
    assert viewer.locator("mark#quote").inner_text().strip()
    assert " › " in viewer.locator(".breadcrumb").inner_text()
    assert viewer.locator("svg").count() == 0
    viewer.screenshot(path=str(tmp_path / "viewer-docx.png"), full_page=True)
    viewer.close()
    assert errors == []
