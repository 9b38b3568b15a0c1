"""Split a parsed document into sentence-aligned, overlapping chunks.

Every chunk records its character offsets into the document text, the pages
it covers and its heading path. Chunks are packed from whole sentences;
together they cover every non-whitespace character of the document. Sizes are
in content units (the server's own chunking: characters, a Han or kana character
counting three and a Hangul syllable two, ``calypso.text.cjk``, so a Chinese passage
says about as much as an English one of the same size) or in tokens (OpenAI's static
strategy, counted by ``ingest/tokens.py``). English text has as many units as characters.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from itertools import accumulate
from typing import Literal

from calypso.ingest.table_headers import TableHeaders
from calypso.ingest.tokens import count_tokens, token_cuts
from calypso.models import Chunk, Heading, Page, ParsedDocument, Section
from calypso.text.cjk import CJK_BREAKS, content_length, has_cjk, prefix_end
from calypso.text.sentences import sentence_spans

Measure = Literal["chars", "tokens"]


def _split_long(start: int, end: int, text: str, size: int) -> Iterator[tuple[int, int]]:
    """Cut an over-long sentence into pieces of at most ``size`` characters, at whitespace where possible."""
    if has_cjk(text, start, end):
        yield from _split_long_cjk(start, end, text, size)
        return
    while end - start > size:
        cut = start + size
        space = text.rfind(" ", start + size // 2, cut)
        if space > start:
            cut = space + 1
        yield _strip(text, start, cut)
        start = cut
        while start < end and text[start].isspace():
            start += 1
    yield start, end


def _split_long_cjk(start: int, end: int, text: str, size: int) -> Iterator[tuple[int, int]]:
    """Cut an over-long sentence with CJK in it into pieces of at most ``size`` content units: after
    the last comma, semicolon, colon, closing quote or space of the piece's second half, else between
    two characters (a Chinese line without punctuation has nowhere better). Linear in its length."""
    remaining = content_length(text, start, end)
    while remaining > size:
        limit = prefix_end(text, start, end, size)
        cut = limit
        for pos in range(limit - 1, start + (limit - start) // 2, -1):
            if text[pos] in CJK_BREAKS or text[pos].isspace():
                cut = pos + 1
                break
        remaining -= content_length(text, start, cut)
        yield _strip(text, start, cut)
        start = cut
        while start < end and text[start].isspace():
            remaining -= 1
            start += 1
    yield start, end


def _split_tokens(start: int, end: int, text: str, size: int) -> Iterator[tuple[int, int]]:
    """Cut a sentence into pieces of at most ``size`` tokens, before a word where possible."""
    for cut in token_cuts(text, start, end, size):
        yield _strip(text, start, cut)
        start = cut
    yield _strip(text, start, end)


# A Markdown table row on a line of its own ("| Zone NA | 12,553 | 2,713 |"): one unit, never cut between sentences.
_TABLE_ROW = re.compile(r"^[ \t]*\|[^\n]*\|[ \t]*$", re.M)


def _rows_whole(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` with the sentences of each table row joined into one span of the whole row.

    A full stop inside a cell ("Dr. Smith | 3.5 ml. Total") would otherwise let a chunk end mid-row,
    parting a number from its row. Linear: rows and spans are both in text order.
    """
    if "|" not in text:
        return spans
    joined: list[tuple[int, int]] = []
    index = 0
    for row in _TABLE_ROW.finditer(text):
        row_start, row_end = _strip(text, row.start(), row.end())
        while index < len(spans) and spans[index][1] <= row_start:
            joined.append(spans[index])
            index += 1
        start, end = row_start, row_end
        while index < len(spans) and spans[index][0] < row_end:
            start, end = min(start, spans[index][0]), max(end, spans[index][1])
            index += 1
        joined.append((start, end))
    joined.extend(spans[index:])
    return joined


def _units(text: str, size: int, measure: Measure = "chars") -> list[tuple[int, int]]:
    """The sentences of ``text`` (whitespace-stripped spans; a table row is one), over-long ones cut to at
    most ``size``."""
    split = _split_tokens if measure == "tokens" else _split_long
    units: list[tuple[int, int]] = []
    for start, end in _rows_whole(text, sentence_spans(text)):
        units.extend(unit for unit in split(start, end, text, size) if unit[1] > unit[0])
    return units


class _Lengths:
    """The length of units ``i..j-1`` as one chunk: content units (characters; CJK weighs more) from
    the first's start to the last's end, or tokens of that text. Counts add up across units and the
    gaps between them (a gap is whitespace, or a line break token or nothing), so prefix sums give
    any span's count exactly, counted once. Text without CJK is measured by its offsets alone."""

    def __init__(self, text: str, units: list[tuple[int, int]], measure: Measure) -> None:
        self.units = units
        self.summed = measure == "tokens" or has_cjk(text)
        if self.summed:
            count = count_tokens if measure == "tokens" else content_length
            gaps = [0] + [count(text[a[1] : b[0]]) for a, b in zip(units, units[1:])]
            own = [count(text[start:end]) for start, end in units]
            self.gaps = gaps
            self.prefix = [0, *accumulate(c + g for c, g in zip(own, gaps))]

    def span(self, i: int, j: int) -> int:
        if self.summed:
            return self.prefix[j] - self.prefix[i] - self.gaps[i]
        return self.units[j - 1][1] - self.units[i][0]


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


class _PageLocator:
    def __init__(self, pages: list[Page]) -> None:
        self.pages = pages
        self.starts = [page.start for page in pages]

    def index(self, offset: int) -> int:
        """The index of the page ``offset`` is on."""
        return max(bisect.bisect_right(self.starts, offset) - 1, 0)

    def span(self, start: int, end: int) -> list[Page]:
        first = max(bisect.bisect_right(self.starts, start) - 1, 0)
        last = max(bisect.bisect_right(self.starts, max(end - 1, start)) - 1, first)
        return self.pages[first : last + 1]


class _HeadingLocator:
    """Heading paths and heading starts by bisection over the heading offsets.

    Each heading's path is built once, in document order, so a lookup is O(log n): scanning every
    earlier heading per chunk cost 78 s of CPU for 250,000 headings.
    """

    def __init__(self, headings: list[Heading], text: str) -> None:
        self.text = text
        self.headings = sorted(headings, key=lambda h: h.start)
        self.starts = [h.start for h in self.headings]
        self.paths: list[tuple[str, ...]] = []
        # lead_ins[i]: where the whitespace before heading i begins (not before the previous heading),
        # so "only whitespace between an offset and the next heading" is one comparison.
        self.lead_ins: list[int] = []
        stack: list[Heading] = []
        previous = 0
        for heading in self.headings:
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
            self.paths.append(tuple(h.title for h in stack))
            lead_in = heading.start
            while lead_in > previous and text[lead_in - 1].isspace():
                lead_in -= 1
            self.lead_ins.append(lead_in)
            previous = heading.start

    def path(self, offset: int) -> tuple[str, ...]:
        index = bisect.bisect_right(self.starts, offset) - 1
        return self.paths[index] if index >= 0 else ()

    def opening_path(self, start: int, end: int) -> tuple[str, ...]:
        """The heading path in force where ``text[start:end]`` starts: the section its first words are in.

        Headings that open it ("# Guide", "## Refunds", then the body) count as in force, since its first
        words of body stand under them; a heading further in does not (a passage that starts in the middle
        of one section and runs into the next belongs to the first). Once the midpoint decided, and a
        passage was located by the heading where it ends.
        """
        index = bisect.bisect_right(self.starts, start) - 1
        pos = self._line_end(index) if index >= 0 and self.starts[index] == start else start
        while index + 1 < len(self.starts) and self.starts[index + 1] < end and self.lead_ins[index + 1] <= pos:
            index += 1
            pos = self._line_end(index)
        return self.paths[index] if index >= 0 else ()

    def _line_end(self, index: int) -> int:
        """Where the line of heading ``index`` ends."""
        end = self.text.find("\n", self.starts[index])
        return len(self.text) if end < 0 else end

    def sections(self, start: int, end: int) -> tuple[Section, ...]:
        """The heading paths of ``text[start:end]`` with where each begins in it; () when there is one."""
        first = bisect.bisect_right(self.starts, start)
        last = bisect.bisect_left(self.starts, end)
        if first >= last:
            return ()
        sections = [Section(0, self.path(start))]
        for index in range(first, last):
            sections.append(Section(self.starts[index] - start, self.paths[index]))
        return tuple(sections)

    def starts_heading(self, offset: int) -> bool:
        """Whether only whitespace lies between ``offset`` and the start of a heading."""
        index = bisect.bisect_left(self.starts, offset)
        return index < len(self.starts) and self.lead_ins[index] <= offset


def chunk_document(
    doc: ParsedDocument, size: int = 1000, overlap: int = 150, measure: Measure = "chars"
) -> list[Chunk]:
    """Pack sentences into chunks of at most ``size`` content units (or tokens) with up to ``overlap`` of carry-over.

    A chunk exceeds ``size`` only when measured in characters and one unbreakable piece is longer.
    """
    text = doc.text
    units = _units(text, size, measure)
    lengths = _Lengths(text, units, measure)
    pages = _PageLocator(doc.pages or [Page(1, "1", 0, len(text))])
    headings = _HeadingLocator(doc.headings, text)
    tables = TableHeaders(text)

    # With ``break_at_pages`` a chunk ends where a page ends, and the next one carries nothing over from it.
    page_of = [pages.index(start) for start, _ in units] if doc.break_at_pages else None

    chunks: list[Chunk] = []
    i = 0
    while i < len(units):
        j = i + 1
        while j < len(units):
            if page_of is not None and page_of[j] != page_of[i]:
                break
            length = lengths.span(i, j)
            # A heading starts a new chunk once this one has some body.
            starts_heading = headings.starts_heading(units[j][0])
            if lengths.span(i, j + 1) > size or (starts_heading and length >= size // 3):
                break
            j += 1
        start, end = units[i][0], units[j - 1][1]
        covered = pages.span(start, end)
        chunks.append(
            Chunk(
                chunk_index=len(chunks),
                text=text[start:end],
                start=start,
                end=end,
                page_start=covered[0].number,
                page_end=covered[-1].number,
                page_labels=tuple(p.label for p in covered),
                heading_path=headings.opening_path(start, end),
                sections=headings.sections(start, end),
                modality="ocr" if any(page.modality == "ocr" for page in covered) else "text",
                confidence=_ocr_confidence(covered, start, end),
                table_header=tables.above(start),
            )
        )
        if j >= len(units):
            break
        new_page = page_of is not None and page_of[j] != page_of[j - 1]
        i = j if new_page else _overlap_start(lengths, i, j, overlap)  # nothing carried over into a new page
    return chunks


def _ocr_confidence(covered: Sequence[Page], start: int, end: int) -> float | None:
    """The recognised pages' confidences, weighted by how much of each lies in ``[start, end)``."""
    weighted = [
        (page.confidence, min(end, page.end) - max(start, page.start))
        for page in covered
        if page.modality == "ocr" and page.confidence is not None
    ]
    total = sum(length for _, length in weighted)
    if not weighted or total <= 0:
        return None
    return round(sum(confidence * length for confidence, length in weighted) / total, 4)


def _overlap_start(lengths: _Lengths, i: int, j: int, overlap: int) -> int:
    """First unit of the next chunk: step back from ``j`` while the carried-over text fits in ``overlap``."""
    k = j
    while k - 1 > i and lengths.span(k - 1, j) <= overlap:
        k -= 1
    return k
