"""A parsing child (``python -m calypso.ingest.parse_child``, started by ``isolation``): documents in on stdin,
results out.

Each request is ``(data, filename, media_type, limits, memory_bytes)``; the answer is
``(ParsedDocument, media_type)`` or the exception raised. Before the answer, a parse that starts OCR sends
``OcrStarted(seconds)``: its time budget grows by that much. The argument is the OCR engine's thread count (0: onnxruntime's default). The address-space
cap applies to each parse; stray prints from libraries go to stderr, never
into the protocol stream.
"""

from __future__ import annotations

import os
import resource
import sys

from calypso.errors import PayloadTooLarge


def _serve(threads: int) -> None:
    from calypso.ingest import ocr_threads
    from calypso.ingest.isolation import OcrStarted, on_ocr_start, receive_message, send_message
    from calypso.ingest.parsers import parse_document

    ocr_threads.set_threads(threads)

    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints lands in stderr
    sys.stdout = sys.stderr
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    on_ocr_start(lambda seconds: send_message(answers, OcrStarted(seconds)))
    while True:
        try:
            data, filename, media_type, limits, memory_bytes = receive_message(requests)
        except EOFError:
            return
        soft = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
        outcome: object
        try:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
            outcome = parse_document(data, filename, media_type, limits)
        except MemoryError:
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
