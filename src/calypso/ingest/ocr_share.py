"""A document's OCR as its parse child tells the server about it, and shares it with the other parse children.

A parse child (``parse_child.py``) talks to the server over its pipes while it parses; these are the
messages, all answered at once by ``isolation.ParserPool``:

- ``OcrStarted(seconds, pages)``: OCR begins for ``pages`` pages; the parse's time budget grows by ``seconds``.
- ``PageRecognised()``: one more page read (the document's ``progress``).
- ``ShareRequest(pages)`` → ``Share(mine)``: the PDF pages to recognise; the server hands the others to idle
  children (``OcrPagesRequest``, the same PDF, a share of the pages each) and answers with this child's share.
- ``CollectRequest()`` → ``Collected(pages, error)``: the other children's pages, once they are read.

Without a link (parsing in the server itself, ``CALYPSO_PARSE_PROCESSES=0``) a document keeps all its pages,
and progress goes to the callback ``local_progress`` set. Apart from ``ocr.py`` so that the child can set the
link at start without importing numpy and the engine (its address space is capped).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OcrStarted:
    """Sent as a document's OCR starts: its time budget grows by ``seconds`` (CALYPSO_OCR_TIMEOUT_SECONDS), so
    a text document keeps the short budget and a scan gets a longer one; ``pages`` pages are to be read."""

    seconds: float
    pages: int = 0


@dataclass(frozen=True)
class PageRecognised:
    """One more page of the document read."""


@dataclass(frozen=True)
class ShareRequest:
    pages: tuple[int, ...]


@dataclass(frozen=True)
class Share:
    mine: tuple[int, ...]


@dataclass(frozen=True)
class CollectRequest:
    pass


@dataclass(frozen=True)
class Collected:
    pages: dict[int, Any] = field(default_factory=dict)  # page index -> OcrPage
    error: BaseException | None = None


@dataclass(frozen=True)
class OcrPagesRequest:
    """To a helper child: recognise ``pages`` (indexes) of the PDF ``data``; answered with {index: OcrPage}."""

    data: bytes
    filename: str
    pages: tuple[int, ...]
    limits: Any
    memory_bytes: int


class ParentLink:
    """The child's end: ``send`` a message to the server, ``receive`` its reply."""

    def __init__(self, send: Callable[[Any], None], receive: Callable[[], Any]) -> None:
        self.send, self.receive = send, receive
        self.sharing = True  # False while serving an OcrPagesRequest: a helper does not share again

    def ask(self, message: Any) -> Any:
        self.send(message)
        return self.receive()


_link: ParentLink | None = None
_local = threading.local()  # ``progress``: the in-process parse's page callback (done, total)


def set_link(link: ParentLink | None) -> None:
    global _link
    _link = link


@contextmanager
def local_progress(callback: Callable[[int, int], None] | None) -> Iterator[None]:
    """While parsing in this process: ``callback(pages read, pages to read)`` after each page."""
    _local.progress, _local.done, _local.total = callback, 0, 0
    try:
        yield
    finally:
        _local.progress = None


def announce_ocr(seconds: float, pages: int) -> None:
    """Called as a document's OCR starts (``ocr_budget.py``)."""
    if _link is not None:
        _link.send(OcrStarted(seconds, pages))
    elif getattr(_local, "progress", None) is not None:
        _local.total += pages
        _local.progress(_local.done, _local.total)


def page_recognised() -> None:
    if _link is not None:
        _link.send(PageRecognised())
    elif getattr(_local, "progress", None) is not None:
        _local.done += 1
        _local.progress(_local.done, _local.total)


def share_pages(pages: list[int]) -> list[int]:
    """The pages of ``pages`` this process recognises itself (all of them without a link or idle children)."""
    if _link is None or not _link.sharing or len(pages) < 2:
        return pages
    answer = _link.ask(ShareRequest(tuple(pages)))
    return list(answer.mine) if isinstance(answer, Share) else pages


def collect_pages(mine: list[int], pages: list[int]) -> dict[int, Any]:
    """The other children's pages (``pages`` less ``mine``); raises the error one of them ended with."""
    if _link is None or len(mine) == len(pages):
        return {}
    answer = _link.ask(CollectRequest())
    if not isinstance(answer, Collected):
        raise RuntimeError(f"unexpected answer from the server: {answer!r}")
    if answer.error is not None:
        raise answer.error
    return answer.pages
