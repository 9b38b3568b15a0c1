"""The playground keeps up (issue 28): other tabs' changes, upload rows, wrong types, a dying server, the popover.

Small Markdown files keep these fast; the server is the real app with the fake upstream behind it.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import struct
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests_support import REPO, WAIT

from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.ingest.formats import extensions
from testkit.live_server import LiveServer, free_port

FORMATS_JS = REPO / "src/calypso/playground/static/js/formats.js"
NOTE = "# Refund policy\n\nRefunds are paid within fourteen days of the request, to the card that paid.\n"
RED = "rgb(179, 38, 30)"  # --danger
BLUE = "rgb(39, 84, 197)"  # --accent


@pytest.fixture
def context(browser: Any) -> Any:
    opened = browser.new_context(viewport={"width": 1280, "height": 900})
    yield opened
    opened.close()


def _unexpected(message: Any) -> bool:
    """A console error, other than the browser's own line for an API error the test asked for."""
    return message.type == "error" and not message.text.startswith("Failed to load resource: the server responded")


def _console_errors(page: Any) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if _unexpected(message) else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return errors


def _open(context: Any, server: LiveServer) -> Any:
    page = context.new_page()
    page.goto(server.url + "/")
    page.locator("#document-list li").first.wait_for()  # the first listing is in
    return page


def _picture(target: Any, name: str) -> None:
    """docs/<name>.png, when asked to refresh the pictures (CALYPSO_UPDATE_SCREENSHOT=1)."""
    if os.environ.get("CALYPSO_UPDATE_SCREENSHOT"):
        target.screenshot(path=str(REPO / "docs" / f"{name}.png"))


def _note(tmp_path: Path, name: str = "refunds.md", text: str = NOTE) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_second_tab_sees_uploads_and_deletes(context: Any, playground: LiveServer, tmp_path: Path) -> None:
    first, second = _open(context, playground), _open(context, playground)
    errors = _console_errors(second)
    assert "No documents" in second.locator("#document-list").inner_text()

    first.set_input_files("input[type=file]", str(_note(tmp_path)))
    first.locator(".upload[data-state='done']").wait_for(timeout=30_000)
    second.evaluate("() => window.dispatchEvent(new Event('focus'))")  # the user comes back to the other tab
    row = second.locator("#document-list .document").filter(has_text="refunds.md")
    row.wait_for(timeout=5_000)

    # A refresh that finds nothing new keeps the rows as they are: same nodes, focus where it was.
    first.set_input_files(
        "input[type=file]", str(_note(tmp_path, "other.md", "# Shipping\n\nParcels leave the warehouse on weekdays.\n"))
    )
    first.locator(".upload[data-state='done']").filter(has_text="other.md").wait_for(timeout=30_000)
    second.evaluate("() => { document.querySelector('#document-list .document').dataset.seen = 'yes'; }")
    second.get_by_role("button", name="Delete refunds.md").focus()
    second.evaluate("() => document.dispatchEvent(new Event('visibilitychange'))")
    second.locator("#document-list .document").filter(has_text="other.md").wait_for(timeout=5_000)
    kept = second.evaluate(
        """() => [document.querySelector('#document-list .document:not([data-seen])').textContent.includes('other.md'),
                 document.querySelector('#document-list [data-seen]').textContent.includes('refunds.md'),
                 document.activeElement.getAttribute('aria-label')]"""
    )
    assert kept == [True, True, "Delete refunds.md"]

    # A delete in the first tab leaves the second tab's list at its next look.
    first.get_by_role("button", name="Delete other.md").click()
    first.locator("#document-list").filter(has_text="other.md").wait_for(state="detached")
    second.evaluate("() => window.dispatchEvent(new Event('focus'))")
    second.locator("#document-list .document").filter(has_text="other.md").wait_for(state="detached", timeout=5_000)
    assert errors == []


POLL = """async () => {
  const { keepFresh } = await import("/playground/static/js/freshness.js");
  let calls = 0;
  const stop = keepFresh(() => { calls += 1; }, { everyMs: 100 });
  await new Promise((resolve) => setTimeout(resolve, 550));
  stop();
  const polled = calls;
  await new Promise((resolve) => setTimeout(resolve, 250));
  return [polled, calls];
}"""


def test_the_list_polls_while_visible(context: Any, playground: LiveServer) -> None:
    page = _open(context, playground)
    polled, after_stop = page.evaluate(POLL)
    assert polled >= 4 and after_stop == polled


def test_upload_rows_tell_success_failure_and_can_be_dismissed(
    context: Any, playground: LiveServer, tmp_path: Path
) -> None:
    page = _open(context, playground)
    errors = _console_errors(page)
    page.set_input_files("input[type=file]", [str(_note(tmp_path)), str(_note(tmp_path, "empty.txt", ""))])
    done = page.locator(".upload[data-state='done']")
    failed = page.locator(".upload[data-state='failed']")
    done.wait_for(timeout=30_000)
    failed.wait_for(timeout=30_000)
    # Success: a full blue bar, plurals right. Failure: a red bar and the API's reason, in one line.
    # A Markdown file is counted in sections, never "1 page" (issue 40).
    assert done.locator(".upload-status").inner_text() == "ready · 1 section, 1 passage"
    assert done.locator("progress").evaluate("(bar) => [bar.value, getComputedStyle(bar).accentColor]") == [1, BLUE]
    assert failed.locator("progress").evaluate("(bar) => getComputedStyle(bar).accentColor") == RED
    reason = failed.locator(".upload-status").inner_text()
    assert reason == "failed: empty.txt is empty (0 bytes); upload a file with content."
    page.screenshot(path=str(tmp_path / "uploads.png"))
    exe = tmp_path / "setup.exe"
    exe.write_bytes(b"MZ")
    page.set_input_files("input[type=file]", str(exe))
    page.locator(".upload[data-state='failed']").filter(has_text="setup.exe").wait_for()
    _picture(page.locator("#documents-card"), "playground-uploads")
    page.get_by_role("button", name="Dismiss setup.exe").click()

    # Dismissed by keyboard: the row leaves, focus goes back to the file input (not the top of the page).
    page.get_by_role("button", name="Dismiss empty.txt").focus()
    page.keyboard.press("Enter")
    failed.wait_for(state="detached")
    assert page.evaluate("() => document.activeElement.type") == "file"
    page.get_by_role("button", name="Dismiss refunds.md").focus()
    page.keyboard.press("Space")
    assert page.locator(".upload").count() == 0
    assert errors == []


FINISHED_ROWS_CLEAR = """async () => {
  const { UploadRow } = await import("/playground/static/js/uploads.js");
  const list = document.body.appendChild(document.createElement("ul"));
  const done = new UploadRow(list, { name: "a.md", size: 10 }, { doneKeepMs: 150, failedKeepMs: 400 });
  const failed = new UploadRow(list, { name: "b.md", size: 10 }, { doneKeepMs: 150, failedKeepMs: 400 });
  const working = new UploadRow(list, { name: "c.md", size: 10 }, { doneKeepMs: 150 });
  done.done("ready");
  failed.failed("no");
  working.processing("processing");
  const wait = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  await wait(250);
  const soon = list.children.length;
  await wait(300);
  return [soon, list.children.length, list.textContent.includes("c.md")];
}"""

DESCRIBED = """async () => {
  const { describeDocument } = await import("/playground/static/js/uploads.js");
  const ready = { status: "completed", page_count: 1, chunk_count: 84 };
  return [
    describeDocument({ status: "in_progress", progress: { pages_parsed: 1, passages_written: 2 } }),
    describeDocument({ ...ready, embeddings: { status: "in_progress", passages_embedded: 0, passages: 84 } }),
    describeDocument({ ...ready, embeddings: { status: "in_progress", passages_embedded: 12, passages: 84 } }),
    describeDocument({ ...ready, page_count: 2, chunk_count: 1, embeddings: { status: "completed" } }),
    describeDocument({ ...ready, page_count: 12, extent: "12 slides" }),
    describeDocument({ ...ready, page_count: 7, extent: "3 sheets" }),
    describeDocument({ ...ready, extent: "" }),
    describeDocument({ status: "in_progress", progress: { pages_parsed: 3, passages_written: 0 } }),
  ];
}"""


def test_finished_rows_clear_themselves_and_statuses_read_right(context: Any, playground: LiveServer) -> None:
    page = _open(context, playground)
    assert page.evaluate(FINISHED_ROWS_CLEAR) == [2, 1, True]  # done first, failed later, a working row stays
    assert page.evaluate(DESCRIBED) == [
        "processing · 1 page, 2 passages",
        "ready · 1 page, 84 passages · embedding queued",
        "ready · 1 page, 84 passages · embedding 12/84",
        "ready · 2 pages, 1 passage",  # a server without ``extent``
        "ready · 12 slides, 84 passages",
        "ready · 3 sheets, 84 passages",
        "ready · 84 passages",  # nothing a reader could count: no invented "1 page"
        "processing · 3 pages read",  # a scan's pages, one by one, as OCR reads them
    ]


def test_a_wrong_file_type_is_filtered_and_refused_in_one_line(
    context: Any, playground: LiveServer, tmp_path: Path
) -> None:
    page = _open(context, playground)
    errors = _console_errors(page)
    accept = page.locator("input[type=file]").get_attribute("accept").split(",")
    assert {".pdf", ".docx", ".pptx", ".xlsx", ".csv", ".tsv", ".epub", ".eml", ".msg", ".html", ".md", ".txt"} <= set(
        accept
    )
    assert ".exe" not in accept
    assert "PDF, images, DOCX, PPTX" in page.locator("#drop-zone").inner_text()

    exe = tmp_path / "setup.exe"
    exe.write_bytes(b"MZ\x90\x00 not a document")
    page.set_input_files("input[type=file]", str(exe))  # a drop, or "All files" in the chooser
    status = page.locator(".upload[data-state='failed'] .upload-status")
    status.wait_for()
    text = status.inner_text()
    assert text.startswith("Files of type .exe are not supported; supported: PDF, images, DOCX")
    assert "\n" not in text and "application/" not in text and len(text) < 130  # one line of the sidebar, cut with "…"
    assert status.evaluate("(line) => line.offsetHeight < 1.5 * parseFloat(getComputedStyle(line).lineHeight)")
    assert "No documents" in page.locator("#document-list").inner_text()  # nothing was sent
    # Were it sent, the server's 415 (a list of every media type) would be cut to its first sentence.
    first = page.evaluate(
        """async () => {
            const { oneLine } = await import("/playground/static/js/uploads.js");
            const form = new FormData();
            form.append("file", new Blob(["MZ"], { type: "application/x-msdownload" }), "setup.exe");
            form.append("namespace", "general");
            const body = await (await fetch("/v1/documents", { method: "POST", body: form })).json();
            return [body.error.message.length, oneLine(body.error.message)];
        }"""
    )
    assert first[0] > 300 and first[1] == "Unsupported file type (application/x-msdownload) for 'setup.exe'."
    assert errors == []


def test_the_accepted_types_are_the_servers() -> None:
    """formats.js lists exactly the server's extensions: a format added on one side only fails here."""
    rows = re.findall(r"extensions: \[([^\]]*)\]", FORMATS_JS.read_text())
    listed = set(re.findall(r'"(\.[a-z0-9]+)"', " ".join(rows)))
    assert listed == extensions(), "update src/calypso/playground/static/js/formats.js to calypso.ingest.formats"


class CuttableProxy:
    """A TCP proxy in front of the server that can go down like a killed server: every open connection
    reset, new ones refused; and come back up on the same port."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.open: list[socket.socket] = []
        self.listener: socket.socket | None = None

    def up(self) -> None:
        if self.listener:
            return
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        if self.listener:
            with contextlib.suppress(OSError):
                self.listener.shutdown(socket.SHUT_RDWR)  # stops listening now, waking accept()
            self.listener.close()
            self.listener = None
        self.reset()

    def reset(self) -> None:
        """Every open connection reset (the server stays)."""
        sockets, self.open = self.open, []  # a connection accepted meanwhile is not reset
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
                sock.shutdown(socket.SHUT_RDWR)  # wakes the pipe thread blocked in recv (close alone would not)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed: down
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self.open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


SLOW_ANSWER = "Refunds are paid within fourteen days of the request, to the card that paid. [Source 1] " * 3


def _upload_note(server: LiveServer, tmp_path: Path) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        files = {"file": ("refunds.md", NOTE.encode(), "text/markdown")}
        doc = http.post("/v1/documents", files=files, data={"namespace": "general"}, params=WAIT).json()
        assert doc["status"] == "completed", doc


@pytest.mark.parametrize(("cut", "header"), [("down", "Server unreachable"), ("reset", "Connection lost")])
def test_a_server_dying_mid_answer_keeps_the_half_answer_and_offers_retry(
    context: Any, playground: LiveServer, upstream: FakeUpstream, tmp_path: Path, cut: str, header: str
) -> None:
    _upload_note(playground, tmp_path)
    proxy = CuttableProxy(playground.port)
    proxy.up()
    try:
        page = context.new_page()
        errors = _console_errors(page)
        page.goto(proxy.url + "/")
        page.wait_for_selector("#bot-select option[value='calypso-rag-agent']", state="attached")
        upstream.script(Script.from_text(SLOW_ANSWER, token_size=6, token_delay=0.15))
        page.get_by_label("Question").fill("How soon are refunds paid?")
        page.get_by_label("Question").press("Enter")
        page.locator("#answer-text").filter(has_text="fourteen days").wait_for(timeout=30_000)
        getattr(proxy, cut)()  # the server dies mid-answer (down), or only the connection breaks (reset)

        page.wait_for_selector("#answer-card[aria-busy='false']", timeout=10_000)
        assert page.locator("#state-badge").inner_text() == header
        assert "cut off" in page.locator("#state-hint").inner_text()
        text = page.locator("#answer-text").inner_text()
        assert "Refunds are paid" in text and text.rstrip().endswith("cut off")  # the half answer, marked
        assert len(text) < len(SLOW_ANSWER)
        assert page.get_by_role("button", name="Ask").is_visible()  # not "Stop" forever
        assert not page.get_by_role("alert").is_visible()  # no bare "network error" either
        page.screenshot(path=str(tmp_path / f"{cut}.png"))
        if cut == "down":
            _picture(page.locator("#answer-card"), "playground-cut-off")

        # The server is back: Retry asks the same question again, and this time the answer completes.
        proxy.up()
        upstream.script(Script.from_text(SLOW_ANSWER, token_size=40))
        retry = page.get_by_role("button", name="Retry")
        retry.focus()
        page.keyboard.press("Enter")
        page.wait_for_selector("#answer-card[aria-busy='false'] #state-badge[data-tone='ok']", timeout=30_000)
        assert page.locator("#state-badge").inner_text() == "Grounded"
        assert page.locator("#answer-text .cut-off").count() == 0 and not retry.is_visible()
        assert page.evaluate("() => document.activeElement.id") == "question"
        assert upstream.requests[-1]["messages"][-1]["content"].count("How soon are refunds paid?") >= 1
        assert [e for e in errors if "net::ERR" not in e] == []  # the browser's own line for the cut request
    finally:
        proxy.down()


def test_an_upstream_that_breaks_off_ends_the_answer_with_its_reason(
    context: Any, playground: LiveServer, upstream: FakeUpstream, tmp_path: Path
) -> None:
    _upload_note(playground, tmp_path)
    page = context.new_page()
    page.goto(playground.url + "/")
    page.wait_for_selector("#bot-select option[value='calypso-rag-agent']", state="attached")
    upstream.script(Script.from_text(SLOW_ANSWER, token_size=6, disconnect_after=6))
    page.get_by_label("Question").fill("How soon are refunds paid?")
    page.get_by_label("Question").press("Enter")
    page.wait_for_selector("#answer-card[aria-busy='false'] #state-badge:not([data-tone='busy'])", timeout=30_000)
    assert page.locator("#state-badge").inner_text() == "Answer failed"
    assert page.get_by_role("button", name="Retry").is_visible()
    assert page.locator("#answer-text .cut-off").count() == 1
    page.locator("#answer-card").screenshot(path=str(tmp_path / "failed.png"))


POPOVER_GEOMETRY = """(badge) => {
  // The text a badge's popover must not cover: at 1280 px the whole answer, narrower the cited sentence
  // (the text nodes since the previous badge group) and the badge itself.
  const box = (r) => ({ left: r.left, top: r.top, right: r.right, bottom: r.bottom });
  const answer = document.querySelector("#answer-text");
  const group = badge.closest(".badges");
  const groups = [...answer.querySelectorAll(".badges")];
  const previous = groups[groups.indexOf(group) - 1] || null;
  const walker = document.createTreeWalker(answer, NodeFilter.SHOW_TEXT);
  const sentence = [box(badge.getBoundingClientRect())];
  let on = previous === null;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (previous && previous.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_FOLLOWING) on = true;
    if (group.contains(node) || group.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_FOLLOWING) break;
    if (!on || !node.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    sentence.push(...[...range.getClientRects()].map(box));
  }
  const popover = document.querySelector("[role=tooltip]");
  return {
    popover: box(popover.getBoundingClientRect()),
    answer: box(answer.getBoundingClientRect()),
    sentence,
    viewport: { width: document.documentElement.clientWidth, height: window.innerHeight },
    side: popover.dataset.side,
  };
}"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def _inside(box: dict[str, float], viewport: dict[str, float]) -> bool:
    return (
        box["left"] >= 0
        and box["top"] >= 0
        and box["right"] <= viewport["width"]
        and box["bottom"] <= viewport["height"]
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_the_citation_popover_never_covers_its_text(
    browser: Any, playground: LiveServer, upstream: FakeUpstream, tmp_path: Path, width: int
) -> None:
    _upload_note(playground, tmp_path)
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 400 else 844})
    try:
        page = context.new_page()
        page.goto(playground.url + "/")
        page.wait_for_selector("#bot-select option[value='calypso-rag-agent']", state="attached")
        upstream.script(Script.from_text(SLOW_ANSWER, token_size=40))
        page.get_by_label("Question").fill("How soon are refunds paid?")
        page.get_by_label("Question").press("Enter")
        page.wait_for_selector("#answer-card[aria-busy='false'] #state-badge[data-tone='ok']", timeout=30_000)
        badges = page.locator("#answer-text [data-citation]")
        assert badges.count() == 3
        popover = page.get_by_role("tooltip")
        for i in range(3):
            badges.nth(i).hover()
            popover.wait_for(state="visible")
            got = badges.nth(i).evaluate(POPOVER_GEOMETRY)
            assert _inside(got["popover"], got["viewport"]), got
            covered = [got["answer"]] if width >= 1280 else got["sentence"]
            assert not any(_overlap(got["popover"], box) for box in covered), got
            if i == 0:
                page.screenshot(path=str(tmp_path / f"popover-{width}.png"))
                if width < 400:
                    _picture(page, "playground-narrow")
        if width < 400:
            # A badge at the bottom of the viewport: the popover flips above its sentence.
            last = badges.nth(2)
            page.mouse.move(1, 1)
            last.evaluate("(badge) => { badge.scrollIntoView({ block: 'end' }); window.scrollBy(0, 4); }")
            last.evaluate("(badge) => badge.focus({ preventScroll: true })")
            popover.wait_for(state="visible")
            got = last.evaluate(POPOVER_GEOMETRY)
            assert got["side"] == "above" and _inside(got["popover"], got["viewport"]), got
            assert not any(_overlap(got["popover"], box) for box in got["sentence"]), got
            page.screenshot(path=str(tmp_path / "popover-390-above.png"))
    finally:
        context.close()


def test_the_bar_is_not_full_before_the_document_is_ready(context: Any, playground: LiveServer, tmp_path: Path) -> None:
    """While the server parses, the bar is indeterminate; while vectors are queued, it is empty and says so."""
    page = _open(context, playground)
    seen: list[str] = []

    def slow_ingestion(route: Any) -> None:
        if route.request.method != "GET":
            route.continue_()
            return
        doc = route.fetch().json()
        seen.append(doc["status"])
        if len(seen) <= 4:  # the job is still running, then ready with its 84 vectors queued
            doc |= {"status": "in_progress", "progress": {"pages_parsed": 1, "passages_written": 0}}
        elif len(seen) <= 8:
            doc["embeddings"] = {"status": "in_progress", "passages_embedded": 0, "passages": 84}
        route.fulfill(json=doc)

    page.route("**/v1/documents/*", slow_ingestion)
    page.set_input_files("input[type=file]", str(_note(tmp_path)))
    row = page.locator(".upload")
    page.locator(".upload[data-state='working']").wait_for(timeout=10_000)
    assert row.locator("progress").evaluate("(bar) => bar.position") == -1  # indeterminate, not full
    row.filter(has_text="processing · 1 page read").wait_for(timeout=10_000)
    page.locator(".upload[data-state='embedding']").wait_for(timeout=10_000)
    assert row.locator(".upload-status").inner_text() == "ready · 1 section, 1 passage · embedding queued"
    assert row.locator("progress").evaluate("(bar) => bar.value") == 0
    page.locator(".upload[data-state='done']").wait_for(timeout=10_000)
    assert row.locator(".upload-status").inner_text() == "ready · 1 section, 1 passage"
