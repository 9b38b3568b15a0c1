"""Markdown: keep the markdown text (it is what users see quoted), lift YAML front matter
into metadata and record ATX headings.

Page convention: one page (number 1, label "1") spanning the whole text.
``Heading.start`` is the offset of the heading line (its first "#").
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

import yaml

from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits
from calypso.ingest.parsers.text import decode_text
from calypso.models import Heading, Page, ParsedDocument

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _atx(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of an ATX heading line, else None; the title may be empty.

    Plain string code, not a regular expression: the pattern this replaced backtracked over runs of
    spaces (a 40 KB heading line took seconds, 1 MB hours, holding the GIL). It reads up to three
    spaces, 1-6 "#", then a space or tab (or the end); the title drops surrounding spaces and tabs
    and a closing run of "#" that follows a space or tab.
    """
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return None
    level = len(stripped) - len(stripped.lstrip("#"))
    if not 1 <= level <= 6:
        return None
    rest = stripped[level:]
    if rest and rest[0] not in " \t":
        return None  # "#hashtag", "####### seven"
    title = rest.strip(" \t")
    unclosed = title.rstrip("#")
    if unclosed != title and unclosed[-1:] in (" ", "\t"):
        title = unclosed.rstrip(" \t")
    return level, title


def atx_headings(text: str) -> list[Heading]:
    """ATX headings (``#`` .. ``######``) outside fenced code blocks, with line offsets."""
    headings: list[Heading] = []
    fence: str | None = None
    pos = 0
    for line in text.split("\n"):
        fence_match = _FENCE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
        elif fence is None and line.lstrip(" ").startswith("#"):
            atx = _atx(line)
            title = atx[1].strip() if atx else ""
            if atx and title:
                headings.append(Heading(level=atx[0], title=title, start=pos))
        pos += len(line) + 1
    return headings


def _json_safe(value: object) -> object:
    # Metadata is stored as JSON; YAML gives dates and other types JSON cannot hold.
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    return str(value)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """``(metadata, body)``; a missing, non-mapping or invalid YAML block leaves the text untouched."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    try:
        data = yaml.safe_load(match.group(1) or "")
    except yaml.YAMLError:
        return {}, text
    if not isinstance(data, dict):
        return {}, text
    return _json_safe(data), text[match.end() :]  # type: ignore[return-value]


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    # Text size is bounded by the upload size; parse_document checks max_document_chars.
    metadata, body = split_front_matter(decode_text(data, filename))
    text = body.strip("\n")
    headings = atx_headings(text)
    title = metadata.get("title") if isinstance(metadata.get("title"), str) else None
    if not title:
        title = next((h.title for h in headings if h.level == 1), None)
    return ParsedDocument(
        text=text,
        pages=[Page(number=1, label="1", start=0, end=len(text))],
        headings=headings,
        title=title,
        metadata=metadata,
    )
