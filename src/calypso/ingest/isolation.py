"""Parse untrusted files in child processes, each with a time budget and a memory cap: the one isolation.

A parser bug or a hostile file (a decompression bomb, a pathological layout)
must not stall or exhaust the server: in a child process it costs at most
``timeout`` seconds and ``memory_bytes`` of address space (``RLIMIT_AS``, one
setting for every format: ``CALYPSO_PARSE_MEMORY_BYTES``), and then the child is
killed and replaced. Capping the server's own memory would be no answer: PDFium
calls abort() when an allocation fails (measured), which would take the whole
server down; a child that aborts dies alone (422 ``parse_memory``), and the next
parse starts a new one.

One kind of upload skips the child (``parses_in_place``): UTF-8 plain text or Markdown without front
matter, up to ``IN_PLACE_BYTES``. Its parse is a UTF-8 decode and linear scans of text that the chunker
and the analyzer then read in the server anyway, so a child would bound nothing they do not; the round
trip (pickles both ways, a pipe, a context switch) cost six times the parse of a one-page abstract.
Charset detection (other encodings) and YAML (front matter, whose aliases can expand exponentially)
stay in a child, as does every other format.

Children are plain ``python -m calypso.ingest.parse_child`` processes speaking
length-prefixed pickles over stdin/stdout, not multiprocessing (whose spawn
re-imports the caller's ``__main__`` script in the child, which breaks any script
that calls Calypso without an ``if __name__ == "__main__"`` guard): no copy of the
server's threads or locks, started on first use and reused one document at a time,
so one hostile upload never takes down a parse running beside it.

A scan's OCR is the one parse spread over several children (``ocr_share.py``): its child asks for help as
OCR starts, and the children idle at that moment each read a share of its pages from their own copy of the
PDF, under their own cap and time budget (``_Sharing``). A helper is never waited for: with no child idle, a
document reads all its pages itself.
"""

from __future__ import annotations

import atexit
import codecs
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from calypso.errors import CalypsoError, UnprocessableDocument
from calypso.ingest.formats import MARKDOWN, format_of
from calypso.ingest.limits import ParseLimits
from calypso.ingest.ocr_share import (
    Collected,
    CollectRequest,
    OcrPagesRequest,
    OcrStarted,
    PageRecognised,
    Share,
    ShareRequest,
)
from calypso.ingest.parsers import parse_document
from calypso.models import ParsedDocument

HEADER = struct.Struct("<Q")  # length prefix of each pickled message


def send_message(stream: IO[bytes], value: Any) -> None:
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(payload)) + payload)
    stream.flush()


def receive_message(stream: IO[bytes]) -> Any:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError("the parent process closed the pipe")
    (size,) = HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        raise EOFError("the parent process closed the pipe mid-request")
    return pickle.loads(payload)


class _Child:
    """One parsing child process; ``parse`` sends one document and waits at most ``timeout`` for the answer."""

    def __init__(self, ocr_threads: int) -> None:
        self.ocr_threads = ocr_threads
        self.process = subprocess.Popen(
            [sys.executable, "-m", "calypso.ingest.parse_child", str(ocr_threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )

    def _read_exactly(self, size: int, deadline: float) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        chunks: list[bytes] = []
        while size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise TimeoutError
            chunk = os.read(fd, min(size, 1 << 20))
            if not chunk:
                raise EOFError("the parser process ended")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def parse(self, request: Any, timeout: float, handle: Callable[[Any], Any] | None = None) -> Any:
        """Send ``request``; its answer, within ``timeout`` (grown by each ``OcrStarted``). The messages the child
        sends meanwhile (``ocr_share.py``) go to ``handle``; those that ask (share, collect) get its return value."""
        assert self.process.stdin is not None
        send_message(self.process.stdin, request)
        deadline = time.monotonic() + timeout
        while True:
            (size,) = HEADER.unpack(self._read_exactly(HEADER.size, deadline))
            message = pickle.loads(self._read_exactly(size, deadline))
            if isinstance(message, OcrStarted):
                deadline += message.seconds
            elif not isinstance(message, (PageRecognised, ShareRequest, CollectRequest)):
                return message
            reply = handle(message) if handle is not None else None
            if isinstance(message, ShareRequest):
                send_message(self.process.stdin, reply or Share(message.pages))
            elif isinstance(message, CollectRequest):
                send_message(self.process.stdin, reply or Collected())

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


class ParserPool:
    """At most ``processes`` children; a child that overruns or dies is killed and replaced."""

    def __init__(self, processes: int) -> None:
        self._size = processes
        # The children share the cores: each one's OCR threads a share of them (two children each running
        # onnxruntime on every core lost 12% of OCR throughput on 2 cores to contention).
        self._ocr_threads = max(1, (os.cpu_count() or 1) // processes)
        self._idle: queue.Queue[_Child] = queue.Queue()
        self._created = 0
        self._lock = threading.Lock()

    def _take(self) -> _Child:
        with self._lock:
            if self._idle.empty() and self._created < self._size:
                self._created += 1
                return _Child(self._ocr_threads)
        return self._idle.get()

    def _take_idle(self) -> _Child | None:
        """A child free right now (started if the pool is not full), or None: helpers never wait."""
        with self._lock:
            try:
                return self._idle.get_nowait()
            except queue.Empty:
                if self._created < self._size:
                    self._created += 1
                    return _Child(self._ocr_threads)
        return None

    def _run(
        self,
        request: Any,
        filename: str,
        timeout: float,
        memory_bytes: int,
        handle: Callable[[Any], Any] | None,
        child: _Child | None = None,
    ) -> Any:
        """``request`` on ``child`` or one taken from the pool (given back, or replaced when killed); its answer."""
        child = child or self._take()  # waiting for a free child does not count against the budget
        try:
            return child.parse(request, timeout, handle)
        except TimeoutError:
            child.kill()
            child = _Child(self._ocr_threads)
            raise UnprocessableDocument(
                f"Parsing {filename!r} took longer than {timeout:g} s (setting CALYPSO_PARSE_TIMEOUT_SECONDS, "
                "plus CALYPSO_OCR_TIMEOUT_SECONDS for a document that needs OCR); "
                "the file may be malformed or built to be slow. Split it, or raise the limit if it is genuine.",
                param="file",
                code="parse_timeout",
            ) from None
        except (EOFError, OSError, pickle.UnpicklingError):
            # Died mid-parse: PDFium aborts when an allocation fails under the cap; or a parser crashed.
            child.kill()
            child = _Child(self._ocr_threads)
            raise UnprocessableDocument(
                f"Reading {filename!r} needed more than {memory_bytes:,} bytes of memory (setting "
                "CALYPSO_PARSE_MEMORY_BYTES), or crashed its parser: it may be a decompression bomb or damaged. "
                "Re-export or repair the file and upload it again.",
                param="file",
                code="parse_memory",
            ) from None
        finally:
            self._idle.put(child)

    def parse(
        self,
        data: bytes,
        filename: str,
        media_type: str,
        limits: ParseLimits | None = None,
        *,
        timeout: float,
        memory_bytes: int,
        on_pages: Callable[[int, int], None] | None = None,
    ) -> tuple[ParsedDocument, str]:
        """Parse in a child; a scanned PDF's pages are shared with the children idle when its OCR starts.
        ``on_pages(read, to read)`` follows its OCR page by page."""
        sharing = _Sharing(self, data, filename, limits, timeout, memory_bytes, on_pages)
        outcome = self._run(
            (data, filename, media_type, limits, memory_bytes), filename, timeout, memory_bytes, sharing
        )
        sharing.join()  # helpers still running when the parse failed early
        if isinstance(outcome, CalypsoError):
            raise outcome
        if isinstance(outcome, BaseException):
            raise CalypsoError(f"Parsing {filename!r} failed unexpectedly: {outcome!r}") from outcome
        parsed: tuple[ParsedDocument, str] = outcome
        return parsed

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get().kill()


class _Sharing:
    """One document's OCR across the pool (``ocr_share.py``): its pages counted, shared with idle children."""

    def __init__(
        self,
        pool: ParserPool,
        data: bytes,
        filename: str,
        limits: ParseLimits | None,
        timeout: float,
        memory_bytes: int,
        on_pages: Callable[[int, int], None] | None,
    ) -> None:
        self.pool, self.data, self.filename, self.limits = pool, data, filename, limits
        self.timeout, self.memory_bytes, self.on_pages = timeout, memory_bytes, on_pages
        self.read = self.total = 0
        self.lock = threading.Lock()
        self.helpers: list[threading.Thread] = []
        self.results: list[Any] = []

    def __call__(self, message: Any) -> Any:
        if isinstance(message, OcrStarted) and message.pages:
            self._count(total=message.pages)
        elif isinstance(message, PageRecognised):
            self._count(read=1)
        elif isinstance(message, ShareRequest):
            return self._share(message.pages)
        elif isinstance(message, CollectRequest):
            return self._collect()
        return None

    def _count(self, read: int = 0, total: int = 0) -> None:
        with self.lock:
            self.read += read
            self.total = max(self.total, total)
            if self.on_pages is not None:
                self.on_pages(self.read, self.total)

    def _share(self, pages: tuple[int, ...]) -> Share:
        """Pages dealt in turn to this child and to each idle one (at most one page each less than the first)."""
        children: list[_Child] = []
        while len(children) + 1 < min(self.pool._size, len(pages)):
            child = self.pool._take_idle()
            if child is None:
                break
            children.append(child)
        parts = [pages[i :: len(children) + 1] for i in range(len(children) + 1)]
        for child, part in zip(children, parts[1:], strict=True):
            thread = threading.Thread(target=self._help, args=(child, part), daemon=True, name="ocr-helper")
            thread.start()
            self.helpers.append(thread)
        return Share(parts[0])

    def _help(self, child: _Child, pages: tuple[int, ...]) -> None:
        request = OcrPagesRequest(self.data, self.filename, pages, self.limits, self.memory_bytes)
        try:
            outcome = self.pool._run(request, self.filename, self.timeout, self.memory_bytes, self, child)
        except Exception as exc:  # noqa: BLE001 - given to the document's own child, which raises it
            outcome = exc
        self.results.append(outcome)

    def join(self) -> None:
        for thread in self.helpers:
            thread.join()

    def _collect(self) -> Collected:
        self.join()
        pages: dict[int, Any] = {}
        for outcome in self.results:
            if isinstance(outcome, BaseException):
                return Collected(error=outcome)
            pages.update(outcome)
        return Collected(pages)


_shared: dict[int, ParserPool] = {}
_shared_lock = threading.Lock()


def shared_pool(processes: int) -> ParserPool:
    """One pool per process (and size), started lazily, its children killed at exit."""
    with _shared_lock:
        pool = _shared.get(processes)
        if pool is None:
            pool = _shared[processes] = ParserPool(processes)
            atexit.register(pool.close)
        return pool


IN_PLACE_BYTES = 1 << 20  # largest text parsed without a child: well under a time budget at any machine speed


def parses_in_place(data: bytes, filename: str, media_type: str) -> bool:
    """Whether this upload, of the detected ``media_type``, may be parsed in this process (see the module
    docstring); False when in doubt. ``filename`` is not read: it stays for the callers' sake."""
    if len(data) > IN_PLACE_BYTES or not data.strip():
        return False  # an empty upload: the child's parse_document refuses it, as it does every format's
    fmt = format_of(media_type)
    if fmt is None or not fmt.in_place:
        return False  # a type not in the table: the child refuses it, with the same error
    if media_type == MARKDOWN and data.removeprefix(codecs.BOM_UTF8).startswith(b"---"):
        return False  # front matter: YAML
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:  # charset detection
        return False
    return True


def parse_isolated(
    data: bytes,
    filename: str,
    media_type: str,
    limits: ParseLimits | None = None,
    *,
    timeout: float,
    memory_bytes: int,
    processes: int,
    on_pages: Callable[[int, int], None] | None = None,
) -> tuple[ParsedDocument, str]:
    """``parse_document`` of the detected ``media_type`` in a child process, within ``timeout`` seconds and ``memory_bytes``; small UTF-8 text
    and Markdown in this one (``parses_in_place``). ``on_pages(read, to read)`` follows OCR page by page."""
    if parses_in_place(data, filename, media_type):
        return parse_document(data, filename, media_type, limits)
    pool = shared_pool(processes)
    return pool.parse(data, filename, media_type, limits, timeout=timeout, memory_bytes=memory_bytes, on_pages=on_pages)
