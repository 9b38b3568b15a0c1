"""HTTP ``Range`` requests on file content (RFC 9110 §14): PDF viewers fetch the pages they show.

One range per request (``bytes=a-b``, ``bytes=a-``, ``bytes=-n``); a request for several ranges
gets the whole file (200), which the RFC allows. A range past the end answers 416.
"""

from __future__ import annotations

import re

from calypso.errors import RangeNotSatisfiable

_SINGLE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.I)


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(start, end exclusive) of the bytes a ``Range`` header asks for; None: send the whole file."""
    if not header:
        return None
    match = _SINGLE.match(header)
    if match is None:
        return None  # several ranges, or a unit we do not serve: the whole file is a valid answer
    first, last = match.groups()
    if not first and not last:
        return None  # "bytes=-": malformed, ignored as RFC 9110 says
    if not first:  # the last N bytes
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise _unsatisfiable(header, size)
        return max(size - suffix, 0), size
    start = int(first)
    end = min(int(last) + 1, size) if last else size
    if last and int(last) < start:
        return None  # an invalid range is ignored, not refused
    if start >= size:
        raise _unsatisfiable(header, size)
    return start, end


def _unsatisfiable(header: str, size: int) -> RangeNotSatisfiable:
    return RangeNotSatisfiable(
        f"The range {header.strip()!r} selects no byte of this file, which is {size:,} bytes long; "
        "ask for a range within it, or leave out the Range header to get the whole file.",
        size=size,
    )
