"""What each sentence of an answer rests on: supported, weakly supported, unsupported, or not a claim.

A reader must be able to tell which sentences nothing supports (issue 24). Every sentence of the plain
answer (``calypso.text.sentences``) gets one status from the segments that overlap it:

- ``supported``: cited, and at least one citation's quote clears the support threshold;
- ``weak``: cited, but every quote scores below the threshold;
- ``unsupported``: a claim no citation backs (an upstream model's invented sentence);
- ``not_a_claim``: too few content words to claim anything (a greeting, "Yes."), a question, or one of
  the answerer's own fixed sentences ("I could not find anything about this …").

``coverage`` is the share of claim characters (the first three kinds) that are supported. An answer
whose claims are all supported is ``supported``; one with an unsupported or weak claim ``partial``; one
whose claims are all unsupported ``unsupported``; one with no claim ``no_claims``. Seed 000's grounding
states keep their meaning beside it: ``available`` with ``partial`` is "partly grounded". The statuses
are computed once, when the answer is finished (``services.answering``), and kept on the canonical
answer (``GroundedAnswer.sentences``); ``grounded.claims_summary`` renders them for every dialect.
"""

from __future__ import annotations

from collections.abc import Collection

from calypso.citations.grounded import GroundedAnswer, SentenceStatus, SentenceSupport, utf16_len
from calypso.citations.inference import MIN_CONTENT_TERMS, content_terms
from calypso.text.sentences import sentence_spans

_QUESTION_ENDS = ("?", "？", "؟")


def sentence_support(answer: GroundedAnswer, fixed: Collection[str] = ()) -> list[SentenceSupport]:
    """The status of every sentence of ``answer``; ``fixed``: sentences the answerer writes itself."""
    text = answer.text
    segments = sorted(answer.segments, key=lambda s: s.start)
    out: list[SentenceSupport] = []
    utf16_before = 0
    last = 0
    for start, end in sentence_spans(text):
        utf16_before += utf16_len(text[last:start])
        sentence = text[start:end]
        quotes = [c.quote for s in segments if s.citations and s.start < end and s.end > start for c in s.citations]
        best = max((q.support for q in quotes), default=None)
        status: SentenceStatus
        if any(q.supported for q in quotes):
            status = "supported"
        elif quotes:
            status = "weak"
        elif _is_claim(sentence, fixed):
            status = "unsupported"
        else:
            status = "not_a_claim"
        length16 = utf16_len(sentence)
        out.append(SentenceSupport(start, end, utf16_before, utf16_before + length16, status, best))
        utf16_before += length16
        last = end
    return out


def _is_claim(sentence: str, fixed: Collection[str]) -> bool:
    stripped = sentence.strip()
    if stripped in fixed or stripped.endswith(_QUESTION_ENDS):
        return False
    return content_terms(stripped) >= MIN_CONTENT_TERMS
