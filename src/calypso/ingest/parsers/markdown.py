"""Markdown: keep the markdown text (it is what users see quoted), lift YAML front matter
into metadata and record ATX headings.

Page convention: one page (number 1, label "1") spanning the whole text.
``Heading.start`` is the offset of the heading line (its first "#").
"""

from __future__ import annotations

import datetime as _dt
import re

import yaml

from calypso.ingest.parsers.text import decode_text
from calypso.models import Heading, Page, ParsedDocument

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


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
            match = _ATX.match(line)
            title = (match.group(2) or "").strip() if match else ""
            if match and title:
                headings.append(Heading(level=len(match.group(1)), title=title, start=pos))
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


def split_front_matter(text: str) -> tuple[dict, str]:
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


def parse(data: bytes, filename: str) -> ParsedDocument:
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
