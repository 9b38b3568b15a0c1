"""`calypso ingest`'s progress display: one line per file on stderr, redrawn with ``\\r`` on a terminal.

No dependency: a bar of ``#`` for passages written out of the file's passages. When stderr is not a
terminal (a log, CI), each phase is a plain line instead, at most one a second.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TextIO

from calypso.locators import extent as document_extent

BAR_WIDTH = 24


def count(n: int, noun: str) -> str:
    """ "1 page", "3 pages": a number with its noun in the right number."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class FileProgress:
    """Progress of one file's ingestion; ``update`` is the job's ``on_progress`` callback."""

    def __init__(self, name: str, stream: TextIO) -> None:
        self.name = name if len(name) <= 40 else "…" + name[-39:]
        self.stream = stream
        self.tty = stream.isatty()
        self._drawn = False
        self._last_plain = 0.0

    def update(self, pages: int, written: int, total: int) -> None:
        done = BAR_WIDTH * written // total if total else 0
        if not total:  # still parsing: a scan's pages as OCR reads them
            line = f"{self.name}  [{'.' * BAR_WIDTH}] {count(pages, 'page')} read by OCR"
        else:
            line = f"{self.name}  [{'#' * done}{'.' * (BAR_WIDTH - done)}] {count(pages, 'page')}, {written}/{count(total, 'passage')}"
        if self.tty:
            self.stream.write("\r" + line + "\x1b[K")
            self._drawn = True
        elif (total and written in (0, total)) or time.monotonic() - self._last_plain >= 1:
            self.stream.write(line + "\n")
            self._last_plain = time.monotonic()
        self.stream.flush()

    def close(self) -> None:
        """Clear the redrawn line, so the file's result line stands alone."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


@dataclass
class IngestSummary:
    """What `calypso ingest` did, for its last line."""

    completed: int = 0
    duplicates: int = 0
    failed: int = 0
    submitted: int = 0
    pages: int = 0
    passages: int = 0
    started: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        seconds = time.monotonic() - self.started
        queued = f", {self.submitted} submitted" if self.submitted else ""
        return (
            f"{self.completed} completed, {count(self.duplicates, 'duplicate')}, {self.failed} failed{queued}; "
            f"{count(self.pages, 'page')}, {count(self.passages, 'passage')} in {seconds:.1f} s"
        )


def extent(media_type: str, pages: int, passages: int, metadata: dict[str, object] | None = None) -> str:
    """ "15 pages, 40 passages", "3 slides, 5 passages", "3 sheets, 9 passages", "4 sections, 12 passages", or
    "12 passages" for a document without parts a reader could count (``locators.extent``)."""
    size = document_extent(media_type, pages, metadata)
    return f"{size}, {count(passages, 'passage')}" if size else count(passages, "passage")
