"""The answer text with its markers in one style, and the "Sources:" appendix.

``ContentBuilder`` is the one place that turns answer events into text with
markers (``[n]``, ``[Source N]``, or none): the Chat Completions content, the
Responses ``display_text`` and the CLI's answer all come from it, streamed
event by event or replayed from a finished answer (``numbered_text``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from calypso.citations.events import MarkerEvent, SentenceEvent, TextEvent, answer_events
from calypso.citations.grounded import GroundedAnswer, MarkerPlacement, Source, utf16_len
from calypso.citations.offsets import OffsetMap
from calypso.dialects.styles import HIDDEN, NUMERIC, PLAIN, SOURCE, RenderStyle


def sources_appendix(answer: GroundedAnswer) -> str:
    """``"\\n\\nSources:\\n[1] label…"``: the cited sources by display number; "" when nothing is cited.

    Each label names where the source's quotes stand (``GroundedAnswer.source_label``), not the passage's start.
    """
    cited = answer.cited_sources
    if not cited:
        return ""
    return "\n\nSources:\n" + "\n".join(f"[{s.display_number}] {answer.source_label(s)}" for s in cited)


@dataclass
class ContentBuilder:
    """Turns plain-text deltas and marker placements into content deltas in one style.

    ``offsets`` records where markers were inserted into the plain answer, so
    segment spans (offsets into the plain text) can be mapped onto the content.
    ``citing`` is False where citations cannot exist (no knowledge base, or
    citations disabled): numeric markers are then removed.
    """

    sources: list[Source]
    style: RenderStyle = NUMERIC
    citing: bool = True
    plain_len: int = 0
    content_len: int = 0
    offsets: OffsetMap = field(default_factory=OffsetMap)
    _carry: str = ""  # the space of a removed marker, given to a valid marker right after it

    def text(self, delta: str) -> str:
        self._carry = ""
        self.plain_len += len(delta)
        self.content_len += len(delta)
        return delta

    def marker(self, placement: MarkerPlacement) -> str:
        out = self._marker_text(placement)
        self.offsets.insert(placement.position, len(out))
        self.content_len += len(out)
        return out

    def _marker_text(self, placement: MarkerPlacement) -> str:
        if placement.unsupported and not placement.valid_numbers:
            # verify took out every passage it named: reported as unsupported, not shown as evidence.
            self._carry = self._carry or placement.leading_space
            return ""
        if self.style == SOURCE:
            if placement.valid_numbers:
                # Every number as written, so render() keeps seeing (and dropping) the invalid ones too.
                shown = (n for n in placement.numbers if n not in placement.unsupported)
                return placement.leading_space + "".join(f"[Source {n}]" for n in shown)
            return placement.leading_space + placement.raw  # seed 004: markers stay in place
        if self.style in (HIDDEN, PLAIN) or not self.citing or not placement.valid_numbers:
            # Removed; "days [Source 9][Source 1]" keeps its space for the "[1]" that follows.
            self._carry = self._carry or placement.leading_space
            return ""
        space, self._carry = placement.leading_space or self._carry, ""
        return space + "".join(f"[{self.sources[n - 1].display_number}]" for n in placement.valid_numbers)

    def appendix(self, answer: GroundedAnswer) -> str:
        """The numeric style's "Sources:" list of cited sources; empty in other cases."""
        if self.style != NUMERIC or answer.citations_are_null:
            return ""
        out = sources_appendix(answer)
        self.content_len += len(out)
        return out

    def feed(self, event: TextEvent | MarkerEvent) -> str:
        return self.text(event.text) if isinstance(event, TextEvent) else self.marker(event.placement)


def finished_content(answer: GroundedAnswer, builder: ContentBuilder) -> str:
    """The content of a finished answer with its appendix, built exactly as the streaming path builds it."""
    body = "".join(builder.feed(event) for event in answer_events(answer))
    return body + builder.appendix(answer)


def numbered_text(answer: GroundedAnswer) -> str:
    """The plain answer with ``[n]`` display numbers where the model cited (no appendix)."""
    builder = ContentBuilder(answer.sources, NUMERIC, citing=True)
    return "".join(builder.feed(event) for event in answer_events(answer))


def sentence_status(event: SentenceEvent, offsets: OffsetMap, text: str) -> dict[str, Any]:
    """A streamed sentence's status with its span on ``text`` as the client has it so far (markers or links
    inserted), code points and UTF-16; the fields of ``_aicore.claims.unsupported_spans`` plus its index."""
    sentence = event.sentence
    start, end = offsets.start(sentence.start), offsets.end(sentence.end)
    return {
        "index": event.index,
        "status": sentence.status,
        "support_score": sentence.support,
        "text": event.text,
        "start_index": start,
        "end_index": end,
        "start_index_utf16": utf16_len(text[:start]),
        "end_index_utf16": utf16_len(text[:end]),
    }


def place_claims(status: dict[str, Any], offsets: OffsetMap, text: str) -> dict[str, Any]:
    """The status block with its ``claims`` spans moved from the plain answer onto ``text`` as the client gets it
    (markers or links inserted), code points and UTF-16 alike; returns ``status``."""
    for span in status.get("claims", {}).get("unsupported_spans", []):
        start, end = offsets.start(span["start_index"]), offsets.end(span["end_index"])
        span.update(
            start_index=start,
            end_index=end,
            start_index_utf16=utf16_len(text[:start]),
            end_index_utf16=utf16_len(text[:end]),
        )
    return status
