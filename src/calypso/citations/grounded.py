"""The canonical grounded answer that every API dialect renders.

Two numberings (GUIDE): ``retrieval_number`` is the N of ``[Source N]`` in
the prompt (retrieval order); ``display_number`` is 1..m in order of first
citation in the answer, then the uncited passages m+1..k in retrieval order.
Offsets are Python string indices (code points), end exclusive; ``*_utf16``
fields give the same positions in UTF-16 code units for JavaScript clients.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from calypso.models import Passage


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (astral characters count twice)."""
    # C-speed paths: a per-character generator here made each cited segment cost a Python loop over the
    # whole answer so far (20,000 markers: 236 s on the event loop). Lone surrogates count once, as before.
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass
class Source:
    """One retrieved passage as the answer knows it."""

    retrieval_number: int
    passage: Passage
    display_number: int = 0
    cited: bool = False


@dataclass
class Quote:
    """The exact sentence(s) of a passage that best support a segment."""

    text: str  # == passage text[passage_start:passage_end]
    passage_start: int
    passage_end: int
    document_start: int  # offsets into the document's extracted text
    document_end: int
    page_number: int
    page_label: str
    support: float  # 0..1, from calypso.citations.support
    supported: bool  # support >= the configured threshold


def quote_locator(quote: Quote, passage: Passage) -> tuple[int | None, str | None, str]:
    """(page number, page label, locator label) of a quote: its page where the document has pages,
    else no page at all and the heading path above the quote (never an invented "p. 1")."""
    locator = passage.quote_locator_label(quote.passage_start, quote.page_label)
    if passage.has_pages:
        return quote.page_number, quote.page_label, locator
    return None, None, locator


@dataclass
class SegmentCitation:
    retrieval_number: int
    quote: Quote
    display_number: int = 0
    attribution: str = "model"  # "model": the model's marker; "inferred": found by calypso.citations.inference


@dataclass
class Segment:
    """A span of the plain answer text backed by one or more sources."""

    start: int
    end: int
    text: str
    start_utf16: int
    end_utf16: int
    citations: list[SegmentCitation] = field(default_factory=list)


@dataclass
class MarkerPlacement:
    """Where the model put a citation marker, for dialects that show markers."""

    position: int  # offset in the plain text where the marker stood
    raw: str  # the marker as the model wrote it
    leading_space: str  # spaces the model put before it (dropped from the plain text)
    numbers: tuple[int, ...]  # as written
    valid_numbers: tuple[int, ...]  # those naming a retrieved passage (and kept after verification)
    segment_index: int | None  # the segment it cites, None when no valid number
    inferred: bool = False  # placed by Calypso after a sentence the model left uncited (raw is "")
    unsupported: tuple[int, ...] = ()  # numbers "verify" took out: below the support threshold


@dataclass
class UnsupportedCitation:
    """A model citation that ``verify`` found below the support threshold: reported, not shown as evidence."""

    retrieval_number: int  # as the model wrote it
    marker: str  # the marker as written
    start: int  # the segment it claimed to support, in the plain text
    end: int
    text: str
    support: float


SentenceStatus = Literal["supported", "weak", "unsupported", "not_a_claim"]
AnswerSupport = Literal["supported", "partial", "unsupported", "no_claims"]


@dataclass(frozen=True)
class SentenceSupport:
    """One sentence of the plain answer: its span (code points and UTF-16, end exclusive) and status."""

    start: int
    end: int
    start_utf16: int
    end_utf16: int
    status: SentenceStatus
    support: float | None  # the best quote's support score; None when uncited


@dataclass
class GroundedAnswer:
    text: str  # plain: markers removed
    raw_text: str  # as generated, markers in place
    sources: list[Source]  # every retrieved passage, in retrieval order
    segments: list[Segment] = field(default_factory=list)
    markers: list[MarkerPlacement] = field(default_factory=list)
    generator: str = ""
    model: str | None = None
    knowledge_base: bool = True  # False: the bot has no namespace (citations null)
    citations_enabled: bool = True
    retrieval_ran: bool = True  # False on a turn after a tool result
    finish_reason: str = "stop"
    tool_calls: list[dict[str, Any]] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attribution: str = "off"  # off | fill | verify: what Calypso did about uncited sentences (inference.py)
    unsupported: list[UnsupportedCitation] = field(default_factory=list)  # verify: model citations taken out
    sentences: list[SentenceSupport] = field(default_factory=list)  # each sentence's status (citations/claims.py)
    answers_question: bool | None = None  # False: no supported sentence answers it (citations/relevance.py)

    def attribution_counts(self) -> dict[str, int]:
        """How many (segment, source) citations came from the model's markers and how many were inferred."""
        counts = {"model": 0, "inferred": 0}
        for segment in self.segments:
            for citation in segment.citations:
                counts[citation.attribution] = counts.get(citation.attribution, 0) + 1
        return counts

    def quotes_of(self, source: Source) -> list[Quote]:
        """The quotes the answer cites ``source`` by, in order of citation (a quote cited twice, once)."""
        quotes: list[Quote] = []
        for segment in self.segments:
            for citation in segment.citations:
                if citation.retrieval_number == source.retrieval_number and citation.quote not in quotes:
                    quotes.append(citation.quote)
        return quotes

    def source_locator(self, source: Source) -> str:
        """Where the answer's quotes of ``source`` stand: each distinct quote locator in order of citation,
        joined by "; " ("Policy › Eligibility; Policy › How to request"); the passage's own locator when the
        answer quotes it nowhere."""
        quotes = self.quotes_of(source)
        if not quotes:
            return source.passage.locator_label
        locators = dict.fromkeys(quote_locator(q, source.passage)[2] for q in quotes)
        return "; ".join(locator for locator in locators if locator)

    def source_label(self, source: Source) -> str:
        """A source's label in this answer, "file (locator)" with ``source_locator``: the "Sources:" line."""
        return source.passage.labelled(self.source_locator(source))

    @property
    def cited_sources(self) -> list[Source]:
        return sorted((s for s in self.sources if s.cited), key=lambda s: s.display_number)

    def source(self, retrieval_number: int) -> Source:
        return self.sources[retrieval_number - 1]

    @property
    def by_display_number(self) -> list[Source]:
        return sorted(self.sources, key=lambda s: s.display_number)

    @property
    def retrieval_status(self) -> str:
        """grounded | ungrounded (retrieval found nothing or nothing was cited) | not_run."""
        if not self.knowledge_base or not self.retrieval_ran:
            return "not_run"
        return "grounded" if self.cited_sources else "ungrounded"

    @property
    def citations_are_null(self) -> bool:
        """Seed 004: null without a knowledge base, with citations disabled, or on a tool-call turn."""
        return not self.knowledge_base or not self.citations_enabled or self.finish_reason == "tool_calls"


GROUNDING_HINTS = {
    "available": "Retrieved context used to support this answer.",
    "hidden": "Sources exist but the workspace or bot policy hides them.",
    "missing": "The knowledge base was searched but nothing usable was found for this question.",
    "none": "This answer was not grounded in a knowledge base.",
}


# ``missing`` for an answer whose text the documents do not back: the text is kept, its sentences marked.
UNSUPPORTED_HINT = "The documents do not support this answer: none of its claims is in the cited passages."
NOT_ANSWERED_HINT = "The documents were searched, but what they say does not answer this question."
# ``missing`` for an answer that cites none of the passages found (a model that answered from its own knowledge):
# "nothing usable was found" would hide the passages listed beside it.
UNCITED_HINT = "Passages were found, but the answer cites none of them: its claims are not backed by the documents."


def grounded_sources_state(answer: GroundedAnswer, hidden: bool = False) -> str:
    """available | hidden | missing | none (docs/citations.md defines them)."""
    if not answer.knowledge_base or not answer.retrieval_ran:
        return "none"
    if not answer.cited_sources or not answer_is_grounded(answer):
        return "missing"
    # include_citations false: sources were used but the bot shows none, exactly like a hiding policy.
    return "hidden" if hidden or not answer.citations_enabled else "available"


def answer_is_grounded(answer: GroundedAnswer) -> bool:
    """False when the documents do not answer: claims are cited but none is supported (the model invented
    them), or no supported sentence answers the question. Its text is kept and marked, never shown as grounded.
    (An answer with no cited sentence at all cites no source: ``missing`` already.)"""
    if answer.answers_question is False:
        return False
    statuses = {s.status for s in answer.sentences}
    return "supported" in statuses or "weak" not in statuses


def grounding_status(answer: GroundedAnswer, hidden: bool = False) -> dict[str, Any]:
    """The compact status block every dialect carries (seed 000's keys)."""
    state = grounded_sources_state(answer, hidden)
    hint = GROUNDING_HINTS[state]
    if state == "missing" and answer.cited_sources:  # passages were cited, yet they do not answer
        hint = NOT_ANSWERED_HINT if answer.answers_question is False else UNSUPPORTED_HINT
    elif state == "missing" and answer.sources:  # passages were found, and the answer used none
        hint = UNCITED_HINT
    return {
        "retrieval_status": answer.retrieval_status,
        "grounded_sources_state": state,
        "grounded_sources_hint": hint,
        "generator": answer.generator,
        "attribution": attribution_summary(answer, hidden),
        "claims": claims_summary(answer),
    }


def attribution_summary(answer: GroundedAnswer, hidden: bool = False) -> dict[str, Any]:
    """The mode, how many citations the model wrote and how many Calypso inferred, and what verify took out.

    ``unsupported`` lists the model's citations that ``verify`` found below the threshold
    (docs/citations.md); a hidden sources policy shows only counts.
    """
    counts = answer.attribution_counts()
    unsupported = [
        {
            "text": u.text,
            "start_index": u.start,
            "end_index": u.end,
            "marker": u.marker,
            "retrieval_number": u.retrieval_number,
            "support_score": u.support,
        }
        for u in answer.unsupported
    ]
    return {
        "mode": answer.attribution,
        "model": counts["model"],
        "inferred": counts["inferred"],
        "unsupported": len(unsupported),
        "unsupported_citations": [] if hidden else unsupported,
    }


def coverage(sentences: list[SentenceSupport]) -> float | None:
    """Supported claim characters over all claim characters; None when the answer claims nothing."""
    claims = [s for s in sentences if s.status != "not_a_claim"]
    total = sum(s.end - s.start for s in claims)
    if not total:
        return None
    return round(sum(s.end - s.start for s in claims if s.status == "supported") / total, 4)


def answer_support(sentences: list[SentenceSupport]) -> AnswerSupport:
    statuses = {s.status for s in sentences} - {"not_a_claim"}
    if not statuses:
        return "no_claims"
    if statuses == {"supported"}:
        return "supported"
    if "supported" in statuses:
        return "partial"
    return "unsupported" if statuses == {"unsupported"} else "partial"


def claims_summary(answer: GroundedAnswer) -> dict[str, object]:
    """The per-sentence block of every dialect's status (``_aicore.claims``): counts, coverage, state, and
    the spans a reader should not take as grounded (unsupported and weak sentences)."""
    sentences = answer.sentences
    counts = {status: 0 for status in ("supported", "weak", "unsupported", "not_a_claim")}
    for s in sentences:
        counts[s.status] += 1
    flagged = [
        {
            "text": answer.text[s.start : s.end],
            "status": s.status,
            "start_index": s.start,
            "end_index": s.end,
            "start_index_utf16": s.start_utf16,
            "end_index_utf16": s.end_utf16,
            "support_score": s.support,
        }
        for s in sentences
        if s.status in ("unsupported", "weak")
    ]
    return {
        "support": answer_support(sentences),
        "answers_question": answer.answers_question,
        "coverage": coverage(sentences),
        **counts,
        "unsupported_spans": flagged,
    }
