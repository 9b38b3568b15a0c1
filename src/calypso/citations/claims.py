"""What each sentence of an answer rests on: supported, weakly supported, unsupported, or not a claim.

A reader must be able to tell which sentences nothing supports (issue 24). Every sentence of the plain
answer (``calypso.text.sentences``) gets one status from the segments that overlap it:

- ``supported``: cited, and at least one citation's quote clears the support threshold;
- ``weak``: cited, but every quote scores below the threshold;
- ``unsupported``: a claim no citation backs (an upstream model's invented sentence);
- ``not_a_claim``: too few content words to claim anything (a greeting, "Yes."), a question, one of
  the answerer's own fixed sentences ("I could not find anything about this …"), or a model's own
  "the sources do not say" (``declines``).

``coverage`` is the share of claim characters (the first three kinds) that are supported. An answer
whose claims are all supported is ``supported``; one with an unsupported or weak claim ``partial``; one
whose claims are all unsupported ``unsupported``; one with no claim ``no_claims``. Seed 000's grounding
states keep their meaning beside it: ``available`` with ``partial`` is "partly grounded". While an answer streams, ``SentenceTracker`` gives each sentence's status as soon as it is final: once
the next sentence's text has begun at a cut no later text can move (``text.sentences.settled_end``), no
marker can still cite it. The finished answer keeps the statuses the stream gave
(``GroundedAnswer.sentences``), so a streamed answer and a non-streamed one say the same;
``sentence_support`` computes them in one pass over a finished answer and gives the same statuses.
``grounded.claims_summary`` renders them for every dialect.
"""

from __future__ import annotations

from collections.abc import Collection

from calypso.citations.declines import is_decline
from calypso.citations.grounded import GroundedAnswer, Quote, Segment, SentenceStatus, SentenceSupport, utf16_len
from calypso.citations.inference import MIN_CONTENT_TERMS, QUESTION_ENDS, content_terms
from calypso.text.sentences import sentence_spans, settled_end


def sentence_support(answer: GroundedAnswer, fixed: Collection[str] = ()) -> list[SentenceSupport]:
    """The status of every sentence of ``answer``; ``fixed``: sentences the answerer writes itself."""
    text = answer.text
    segments = sorted(answer.segments, key=lambda s: s.start)
    out: list[SentenceSupport] = []
    utf16_before = 0
    last = 0
    for start, end in sentence_spans(text):
        utf16_before += utf16_len(text[last:start])
        length16 = utf16_len(text[start:end])
        out.append(_support(text, start, end, utf16_before, utf16_before + length16, segments, fixed))
        utf16_before += length16
        last = end
    return out


class SentenceTracker:
    """Each sentence's status while the answer streams: feed the plain text and the cited segments as they
    come (``text``, ``cited``); ``settled()`` returns the sentences that became final, in order."""

    def __init__(self, fixed: Collection[str] = ()) -> None:
        self.fixed = fixed
        self.sentences: list[SentenceSupport] = []  # final so far
        self._parts: list[str] = []
        self._segments: list[Segment] = []
        self._floor = 0  # where the first sentence not yet final starts
        self._floor_utf16 = 0

    def text(self, piece: str) -> None:
        self._parts.append(piece)

    def sentence_text(self, sentence: SentenceSupport) -> str:
        return "".join(self._parts)[sentence.start : sentence.end]

    def cited(self, segment: Segment) -> None:
        if not any(s is segment for s in self._segments):
            self._segments.append(segment)

    def settled(self) -> list[SentenceSupport]:
        """The sentences that became final since the last call: a later sentence has begun at a final cut."""
        text = "".join(self._parts)
        self._parts = [text]
        spans = sentence_spans(text, self._floor)
        if len(spans) < 2:
            return []
        final = settled_end(text, self._floor)
        done = [span for span, following in zip(spans, spans[1:]) if following[0] <= final]
        return self._emit(text, done, spans[len(done)][0] if done else self._floor)

    def finish(self, answer: GroundedAnswer) -> list[SentenceSupport]:
        """The sentences not yet final, now that ``answer`` is complete (its text is all the text fed)."""
        text = answer.text
        return self._emit(text, sentence_spans(text, self._floor), len(text))

    def _emit(self, text: str, spans: list[tuple[int, int]], floor: int) -> list[SentenceSupport]:
        out = []
        position, before = self._floor, self._floor_utf16
        for start, end in spans:
            before += utf16_len(text[position:start])
            length16 = utf16_len(text[start:end])
            out.append(_support(text, start, end, before, before + length16, self._segments, self.fixed))
            before += length16
            position = end
        if spans:
            self._floor, self._floor_utf16 = floor, before + utf16_len(text[position:floor])
            self._segments = [s for s in self._segments if s.end > floor]
        self.sentences += out
        return out


def _support(
    text: str, start: int, end: int, start16: int, end16: int, segments: list[Segment], fixed: Collection[str]
) -> SentenceSupport:
    quotes: list[Quote] = [
        c.quote for s in segments if s.citations and s.start < end and s.end > start for c in s.citations
    ]
    best = max((q.support for q in quotes), default=None)
    status: SentenceStatus
    if any(q.supported for q in quotes):
        status = "supported"
    elif quotes:
        status = "weak"
    elif _is_claim(text[start:end], fixed):
        status = "unsupported"
    else:
        status = "not_a_claim"
    return SentenceSupport(start, end, start16, end16, status, best)


def _is_claim(sentence: str, fixed: Collection[str]) -> bool:
    stripped = sentence.strip()
    if stripped in fixed or stripped.endswith(QUESTION_ENDS) or is_decline(stripped):
        return False
    return content_terms(stripped) >= MIN_CONTENT_TERMS
