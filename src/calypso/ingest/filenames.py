"""The name a document is shown under: a file name a client sent, made safe to print.

A multipart upload, a gRPC upload or a path on the command line may name a file
``../../etc/\\x1b[31mevil\\x07.txt``. That name is shown in listings, citations,
``Content-Disposition`` headers, the CLI's progress lines and the logs, where a
path would mislead and terminal escapes would recolour or retitle a terminal. So
the stored name is its last path component without control or bidirectional
formatting characters; the name as sent survives only escaped (``%r`` in the log
line that records the change).
"""

from __future__ import annotations

import re
import unicodedata

from calypso.errors import InvalidRequest

MAX_FILENAME_CHARS = 255  # what common file systems allow in one name
FALLBACK = "upload"

# An ANSI escape sequence (CSI ... final byte, or OSC ... BEL/ST), dropped whole so no "[31m" remains.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
# Bidirectional embeddings, overrides and isolates: they reorder what a reader sees ("txt.exe" as "exe.txt").
_BIDI = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _printable(text: str) -> str:
    text = _ANSI.sub("", text)
    return "".join(c for c in text if c not in _BIDI and unicodedata.category(c) != "Cc")


def display_filename(raw: str | None) -> str:
    """The last path component of ``raw`` without control characters; ``upload`` when nothing is left."""
    name = _printable((raw or "").replace("\\", "/")).rstrip("/ ")
    name = name.rsplit("/", 1)[-1].strip()
    return name if name and name not in (".", "..") else FALLBACK


def display_url(url: str) -> str:
    """A crawled page's name is its URL: kept whole (its slashes are its meaning), controls dropped."""
    return _printable(url).strip() or FALLBACK


def check_filename(name: str, param: str = "file") -> str:
    """A 400 for a file name too long to store or show (after ``display_filename``)."""
    if len(name) > MAX_FILENAME_CHARS:
        raise InvalidRequest(
            f"The file name is {len(name):,} characters; at most {MAX_FILENAME_CHARS} are accepted. "
            "Rename the file and upload it again.",
            param=param,
            code="string_above_max_length",
        )
    return name
