"""How many threads the OCR engine may run on in this process: a parse child's share of the cores.

Apart from ``ocr.py`` so that a parse child can set it at start without importing numpy and the engine (a
child's address space is capped; what it imports before a parse counts against the cap).
"""

from __future__ import annotations

threads = 0  # onnxruntime's threads per model; 0: its default (every core)


def set_threads(count: int) -> None:
    """The threads the engine will run on; before its first use."""
    global threads
    threads = count
