"""A parsing child (``python -m calypso.ingest.parse_child``, started by ``isolation``): documents in on stdin,
results out.

Each request is ``(data, filename, media_type, limits, memory_bytes)``, ``media_type`` as detected at submit; the
answer is ``(ParsedDocument, media_type)`` or the exception raised. Before the answer, a parse that OCRs talks to the
server (``ocr_share.py``: its budget grows, its pages are counted and shared with idle children). A request
``OcrPagesRequest`` asks for some pages of another child's PDF; the answer is ``{index: OcrPage}``. The
argument is the OCR engine's thread count (0: every core). The address-space cap applies to each request;
stray prints from libraries go to stderr, never into the protocol stream.
"""

from __future__ import annotations

import os
import resource
import sys
from typing import Any

from calypso.errors import PayloadTooLarge


def _handle(request: Any, link: Any) -> object:
    """The answer to one request (raises what the parse raises)."""
    from calypso.ingest.limits import DEFAULT_LIMITS
    from calypso.ingest.ocr_share import OcrPagesRequest
    from calypso.ingest.parsers import parse_document

    if isinstance(request, OcrPagesRequest):
        from calypso.ingest.parsers.pdf import recognise_pages

        link.sharing = False  # a helper reads its share; it does not share it again
        try:
            return recognise_pages(request.data, request.filename, request.pages, request.limits or DEFAULT_LIMITS)
        finally:
            link.sharing = True
    data, filename, media_type, limits, _ = request
    return parse_document(data, filename, media_type, limits)


def _out_of_memory(exc: ImportError) -> bool:
    message = str(exc).lower()
    return "failed to map segment" in message or "cannot allocate memory" in message


def _serve(threads: int) -> None:
    from calypso.ingest import ocr_share, ocr_threads
    from calypso.ingest import parsers as _parsers  # noqa: F401 - imported before the cap, not under it
    from calypso.ingest.isolation import receive_message, send_message

    ocr_threads.set_threads(threads)

    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints lands in stderr
    sys.stdout = sys.stderr
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    link = ocr_share.ParentLink(lambda message: send_message(answers, message), lambda: receive_message(requests))
    ocr_share.set_link(link)
    while True:
        try:
            request = receive_message(requests)
        except EOFError:
            return
        if isinstance(request, ocr_share.OcrPagesRequest):
            filename, memory_bytes = request.filename, request.memory_bytes
        else:
            filename, memory_bytes = request[1], request[4]
        soft = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
        outcome: object
        try:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            outcome = _handle(request, link)
        except (MemoryError, ImportError) as exc:
            if isinstance(exc, ImportError) and not _out_of_memory(exc):
                outcome = exc
            else:  # a library loaded under the cap (numpy, the OCR engine) could not map its code: memory too
                outcome = PayloadTooLarge(
                    f"Parsing {filename!r} needs more than {memory_bytes:,} bytes of memory (setting "
                    "CALYPSO_PARSE_MEMORY_BYTES); split the file or raise the limit.",
                    param="file",
                    code="document_too_large",
                )
        except Exception as exc:  # noqa: BLE001 - sent back to the server, which decides
            outcome = exc
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        try:
            send_message(answers, outcome)
        except Exception as exc:  # noqa: BLE001 - an exception that cannot be pickled
            send_message(answers, RuntimeError(repr(exc)))


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
