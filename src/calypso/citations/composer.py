"""Turn a stream of raw model text into plain text, cited segments and verified quotes.

Fed token by token, the composer emits plain-text deltas (never half a
marker), and for each citation marker a ``MarkerEvent`` carrying the segment
it closes, the exact quotes and their support scores. ``finish()`` returns the
``GroundedAnswer``. Streaming and non-streaming go through the same code, so
both produce the same answer.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from calypso.citations.events import MarkerEvent, TextEvent
from calypso.citations.footnotes import is_passage_footnote
from calypso.citations.grounded import (
    GroundedAnswer,
    MarkerPlacement,
    Quote,
    Segment,
    SegmentCitation,
    Source,
    UnsupportedCitation,
    utf16_len,
)
from calypso.citations.inference import Attributor, complete_sentences, may_end_sentence
from calypso.citations.marker_prose import NounMarkers
from calypso.citations.markers import MarkerPiece, MarkerStream, TextPiece
from calypso.text.control import CONTROL
from calypso.text.sentences import last_sentence_start, settled_end

QuoteFinder = Callable[[str, Source], Quote]


class AnswerComposer:
    """``attributor`` (citations/inference.py) cites the sentences the model left uncited; None: markers only."""

    def __init__(
        self,
        sources: list[Source],
        find_quote: QuoteFinder,
        drop_unsupported: bool = False,
        attributor: Attributor | None = None,
    ) -> None:
        self.sources = sources
        self.find_quote = find_quote
        self.drop_unsupported = drop_unsupported
        self.attributor = attributor
        self.verify = attributor is not None and attributor.verify
        self.unsupported: list[UnsupportedCitation] = []
        # With an attributor, plain text is handed out only up to the first sentence end still open
        # (``_released``), so an inferred citation can follow its sentence before any later text.
        self._released = 0
        self._floor = 0  # where the next sentence to attribute starts
        self._pending: int | None = None  # the first sentence end still open (text from here is held)
        self.markers = MarkerStream()
        self.nouns = NounMarkers()
        self.plain: list[str] = []
        self.plain_len = 0
        # Where each plain piece starts, in code points and in UTF-16 units: a marker then reads only
        # the text since the previous segment, not the whole answer (linear in the answer's length).
        self._piece_starts: list[int] = []
        self._piece_utf16_starts: list[int] = []
        self._utf16_len = 0
        self.raw: list[str] = []
        self.held_space = ""
        self.segments: list[Segment] = []
        self.placements: list[MarkerPlacement] = []
        self.next_display = 1

    # -- feeding -----------------------------------------------------------
    def feed(self, delta: str) -> list[TextEvent | MarkerEvent]:
        delta = CONTROL.sub("", delta)  # never shown to a reader (a model may copy them from old passages)
        self.raw.append(delta)
        return self._handle(self.nouns.feed(self._resolved(self.markers.feed(delta))))

    def flush(self) -> list[TextEvent | MarkerEvent]:
        events = self._handle(self.nouns.feed(self._resolved(self.markers.flush())) + self.nouns.flush())
        if self.attributor is not None:
            events += self._attribute(self.plain_len, final=True)
        if self.held_space:
            events += self._emit_text(self.held_space)
            self.held_space = ""
        return events

    def _resolved(self, pieces: list[TextPiece | MarkerPiece]) -> list[TextPiece | MarkerPiece]:
        """Markers as the composer takes them: documents named resolved to their passages; a bare "Source 7"
        that names no passage, or a footnote the passage itself has, is text."""
        out: list[TextPiece | MarkerPiece] = []
        for piece in pieces:
            if isinstance(piece, MarkerPiece):
                marker = piece.marker
                if marker.names:
                    named = tuple(n for name in marker.names for n in self._named(name))
                    piece = MarkerPiece(replace(marker, numbers=tuple(dict.fromkeys(marker.numbers + named))))
                valid = any(1 <= n <= len(self.sources) for n in piece.marker.numbers)
                if (marker.bare and not valid) or self._is_footnote(marker.raw):
                    piece = TextPiece(marker.raw)  # prose, or the passage's own footnote copied: not a citation
            out.append(piece)
        return out

    def _named(self, name: str) -> list[int]:
        """Retrieval numbers of the passages of the document called ``name`` (its file name, with or without
        its extension, or its title)."""
        wanted = name.casefold().strip()
        out = []
        for source in self.sources:
            document = source.passage.document
            filename = document.filename.casefold()
            names = {filename, filename.rsplit(".", 1)[0], (document.title or "").casefold()}
            if wanted in names:
                out.append(source.retrieval_number)
        return out

    def _handle(self, pieces: list[TextPiece | MarkerPiece]) -> list[TextEvent | MarkerEvent]:
        events: list[TextEvent | MarkerEvent] = []
        for piece in pieces:
            if isinstance(piece, TextPiece):
                # Spaces before a marker are dropped from the plain text, so hold them until we know.
                # Only the new piece is scanned: re.search(r"[ \t]+$") over held + new was quadratic.
                kept = piece.text.rstrip(" \t")
                space = piece.text[len(kept) :]
                text, self.held_space = (self.held_space + kept, space) if kept else ("", self.held_space + space)
                if text:
                    events += self._emit_text(text)
            elif self.attributor is None:
                events.append(self._place_marker(piece))
            else:
                events += self._marker_with_attribution(piece)
        return events

    def _is_footnote(self, raw: str) -> bool:
        if not self.sources:
            return False
        before = self._window(max(self.plain_len - 200, 0))[2] + self.held_space
        return is_passage_footnote(raw, before, [s.passage.chunk.text for s in self.sources])

    def _emit_text(self, text: str) -> list[TextEvent | MarkerEvent]:
        self._piece_starts.append(self.plain_len)
        self._piece_utf16_starts.append(self._utf16_len)
        self.plain.append(text)
        self.plain_len += len(text)
        self._utf16_len += utf16_len(text)
        if self.attributor is None:
            self._released = self.plain_len
            return [TextEvent(text)]
        if self._pending is None and not may_end_sentence(text):
            return self._release(self.plain_len)  # the common case: nothing to decide, O(len(text))
        return self._attribute(self.plain_len, final=False)

    def _window(self, floor: int) -> tuple[int, int, str]:
        """(start, UTF-16 start, text) of the plain text from the piece holding ``floor`` to the end."""
        if not self.plain:
            return 0, 0, ""
        k = max(0, bisect.bisect_right(self._piece_starts, floor) - 1)
        return self._piece_starts[k], self._piece_utf16_starts[k], "".join(self.plain[k:])

    def _plain_text(self) -> str:
        return "".join(self.plain)

    # -- inferred attribution ----------------------------------------------
    def _release(self, upto: int) -> list[TextEvent | MarkerEvent]:
        """Hand out the plain text not yet handed out, up to ``upto``."""
        if upto <= self._released:
            return []
        base, _, window = self._window(self._released)
        text = window[self._released - base : upto - base]
        self._released = upto
        return [TextEvent(text)]

    def _attribute(self, end: int, final: bool) -> list[TextEvent | MarkerEvent]:
        """Attribute every sentence between the floor and ``end`` whose end is final; release the text."""
        if final:
            release = end
            self._pending = None
        else:
            # Sentence ends before the first open one are decided: scan on from there only.
            scan = self._pending if self._pending is not None else self._released
            base, _, window = self._window(scan)
            release = base + settled_end(window, scan - base, end - base)
            self._pending = release if release < end else None
            if not may_end_sentence(window[scan - base : release - base]):
                return self._release(release)  # no sentence end decided: no sentence can be complete
        base, _, window = self._window(self._floor)
        done = complete_sentences(window, self._floor - base, end - base, release - base, final)
        events: list[TextEvent | MarkerEvent] = []
        for start, stop in done:
            events += self._release(base + stop)
            events += self._infer(base + start, base + stop, "")
            self._floor = base + stop
        events += self._release(release)
        return events

    def _marker_with_attribution(self, piece: MarkerPiece) -> list[TextEvent | MarkerEvent]:
        """A model marker: the sentences before its own are complete; its own is attributed if it cites nothing."""
        position = self.plain_len
        base, _, window = self._window(self._floor)
        done = complete_sentences(window, self._floor - base, position - base, position - base, True)
        self._pending = None
        events: list[TextEvent | MarkerEvent] = []
        for start, stop in done[:-1]:
            events += self._release(base + stop)
            events += self._infer(base + start, base + stop, "")
            self._floor = base + stop
        events += self._release(position)
        marker = self._place_marker(piece)
        events.append(marker)
        if marker.segment is None and done:
            # The marker names no passage, or verify took out all it named: its sentence is uncited.
            start, _ = done[-1]
            events += self._infer(base + start, position, marker.placement.leading_space)
        self._floor = max(self._floor, position)
        return events

    def _infer(self, start: int, end: int, leading_space: str) -> list[TextEvent | MarkerEvent]:
        """An inferred citation for the sentence ``[start, end)`` of the plain text, if a passage supports it."""
        assert self.attributor is not None
        base, base_utf16, window = self._window(start)
        text = window[start - base : end - base]
        found = self.attributor.best(text)
        if found is None:
            return []
        source, quote = found
        newly: list[Source] = []
        if not source.cited:
            source.cited = True
            source.display_number = self.next_display
            self.next_display += 1
            newly.append(source)
        citation = SegmentCitation(source.retrieval_number, quote, source.display_number, attribution="inferred")
        segment = Segment(
            start=start,
            end=end,
            text=text,
            start_utf16=base_utf16 + utf16_len(window[: start - base]),
            end_utf16=base_utf16 + utf16_len(window[: end - base]),
            citations=[citation],
        )
        self.segments.append(segment)
        number = source.retrieval_number
        placement = MarkerPlacement(
            position=end,
            raw="",
            leading_space=leading_space,
            numbers=(number,),
            valid_numbers=(number,),
            segment_index=len(self.segments) - 1,
            inferred=True,
        )
        self.placements.append(placement)
        return [MarkerEvent(placement, segment, newly, [citation])]

    # -- markers and segments ----------------------------------------------
    def _place_marker(self, piece: MarkerPiece) -> MarkerEvent:
        marker = piece.marker
        leading, self.held_space = self.held_space, ""
        position = self.plain_len
        valid = tuple(n for n in marker.numbers if 1 <= n <= len(self.sources))
        segment_index = self._segment_for(position) if valid else None
        if marker.names and segment_index is not None and len(valid) > 1:
            # "[Source: alps_wiki.pdf]" names a document: cite the one of its passages that best supports the text.
            text = self.segments[segment_index].text
            valid = (max(valid, key=lambda n: self.find_quote(text, self.sources[n - 1]).support),)
        kept: list[int] = []
        taken_out: list[int] = []  # verify: below the threshold, reported instead of shown
        newly: list[Source] = []
        added: list[SegmentCitation] = []
        segment: Segment | None  # the segment the marker cites: None when it cites nothing
        if segment_index is not None:
            segment = self.segments[segment_index]
            for number in valid:
                if any(c.retrieval_number == number for c in segment.citations):
                    kept.append(number)
                    continue
                source = self.sources[number - 1]
                quote = self.find_quote(segment.text, source)
                if not quote.supported and (self.verify or self._supported_elsewhere(segment.text, number)):
                    # verify takes out every citation below the threshold; fill only one whose sentence another
                    # retrieved passage supports: the model named the wrong source (Qwen2.5-Coder-1.5B did in
                    # several Alps answers, issue 39), and the sentence is cited to the passage that says it.
                    taken_out.append(number)
                    self.unsupported.append(
                        UnsupportedCitation(number, marker.raw, segment.start, segment.end, segment.text, quote.support)
                    )
                    continue
                if self.drop_unsupported and not quote.supported:
                    continue
                if not source.cited:
                    source.cited = True
                    source.display_number = self.next_display
                    self.next_display += 1
                    newly.append(source)
                citation = SegmentCitation(number, quote, source.display_number)
                segment.citations.append(citation)
                added.append(citation)
                kept.append(number)
            if not segment.citations:
                self.segments.pop(segment_index)
                segment_index = None
        placement = MarkerPlacement(
            position=position,
            raw=marker.raw,
            leading_space=leading,
            numbers=valid if marker.names else marker.numbers,
            valid_numbers=tuple(kept),
            segment_index=segment_index if kept else None,
            unsupported=tuple(taken_out),
        )
        self.placements.append(placement)
        segment = self.segments[segment_index] if segment_index is not None and kept else None
        return MarkerEvent(placement, segment, newly, added)

    def _supported_elsewhere(self, text: str, number: int) -> bool:
        if self.attributor is None:
            return False
        found = self.attributor.best(text)
        return found is not None and found[0].retrieval_number != number

    def _segment_for(self, position: int) -> int | None:
        """Index of the segment a marker at ``position`` cites, creating it if needed."""
        previous = self.segments[-1] if self.segments else None
        floor = previous.end if previous is not None else 0
        base, base_utf16, window = self._window(floor)  # markers stand at the end: position == plain_len
        end = base + len(window[: position - base].rstrip())
        if previous is not None and end <= previous.end:
            # Adjacent markers ("[1][2]") or a marker with nothing new before it cite the same segment.
            return len(self.segments) - 1
        # The segment is the sentence the marker follows; only text before the marker is
        # looked at, so streamed and one-shot answers get the same segments.
        relative = last_sentence_start(window, floor - base, end - base)
        if relative is None:
            return None
        start = base + relative
        while start < end and (window[start - base].isspace() or window[start - base] in ",;:–—"):
            start += 1  # a clause after an earlier marker starts at its first word
        if start >= end:
            return None
        self.segments.append(
            Segment(
                start=start,
                end=end,
                text=window[start - base : end - base],
                start_utf16=base_utf16 + utf16_len(window[: start - base]),
                end_utf16=base_utf16 + utf16_len(window[: end - base]),
            )
        )
        return len(self.segments) - 1

    # -- result ------------------------------------------------------------
    def finish(
        self,
        *,
        generator: str = "",
        model: str | None = None,
        knowledge_base: bool = True,
        citations_enabled: bool = True,
        retrieval_ran: bool = True,
        finish_reason: str = "stop",
        tool_calls: list[dict[str, Any]] | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        attribution: str = "off",
    ) -> GroundedAnswer:
        """The grounded answer; call after ``flush()``. The keywords fill the remaining GroundedAnswer fields."""
        for source in self.sources:
            if not source.cited:
                source.display_number = self.next_display
                self.next_display += 1
        return GroundedAnswer(
            text=self._plain_text(),
            raw_text="".join(self.raw),
            sources=self.sources,
            segments=self.segments,
            markers=self.placements,
            generator=generator,
            model=model,
            knowledge_base=knowledge_base,
            citations_enabled=citations_enabled,
            retrieval_ran=retrieval_ran,
            finish_reason=finish_reason,
            tool_calls=tool_calls,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            attribution=attribution,
            unsupported=self.unsupported,
        )
