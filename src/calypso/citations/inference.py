"""Inferred attribution: cite the sentences the model left without a marker.

Small local models often write no citation marker at all. For each answer sentence
without one, ``Attributor.best`` scores every passage retrieved for this answer with
the support scorer (``citations/support.py``, through the answerer's quote finder) and
returns the best one when it clears the support threshold; a sentence no passage
supports stays uncited, so an inferred citation is never a guess. The composer places
the citation right after the sentence, exactly where a model's marker would stand, so
every dialect renders it like the model's own (``attribution: "inferred"``).

Modes (``CALYPSO_ATTRIBUTION``, or a bot's ``attribution``):

* ``off``: the model's markers only, as before;
* ``fill`` (default): also cite the sentences the model left uncited;
* ``verify``: ``fill``, and the model's own citations are re-checked: one below the
  threshold is taken out of the evidence and reported as unsupported
  (``metadata._aicore.attribution.unsupported_citations``), and its sentence is then
  treated as uncited.

Streaming: a sentence is attributed as soon as its end is final (``settled_end`` in
calypso.text.sentences),
and the composer holds back text only from the first candidate sentence end whose
decision is still open, so the citation event comes right after the text that ends
its sentence and streamed and one-shot answers agree however the deltas are split.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Final, Literal

from calypso.citations.crossing import scripts_differ
from calypso.citations.declines import is_decline
from calypso.citations.grounded import Quote, Source
from calypso.text.cjk import CJK_CHARS
from calypso.text.sentences import sentence_spans
from calypso.text.tokenize import STOPWORDS_EN_EXTENDED, Analyzer

AttributionMode = Literal["off", "fill", "verify"]
MODES: Final = ("off", "fill", "verify")

# A sentence needs this many distinct content words to be attributed: a heading or a
# one-word reply ("Summary", "Yes.") matches any passage that has the word. CJK text is
# analysed into overlapping character bigrams, about two per word: two count as one word.
MIN_CONTENT_TERMS = 3
_CJK_TERM = re.compile(f"[{CJK_CHARS}]")

# A sentence the model left uncited, in another script than a passage (English over Chinese), is cited to it only
# with the confidence a pair of one script family needs (support 0.92: the cosine at that family's cut): e5-small
# places an English sentence close to a Chinese one about another person or year (a real model's "The Liu Liu and
# Liu Qi rebellion broke out in 225 AD." inferred to Zhuge Liang's campaign of 225 at 0.81, against a cut of 0.78).
INFERRED_ACROSS_SCRIPTS_MIN = 0.92
QUESTION_ENDS = ("?", "？", "؟")

_ENDS = re.compile(r"[.!?…‼⁇⁈⁉؟。！？｡\n]")  # calypso.text.sentences' candidate ends
_ANALYZER = Analyzer(stopwords=STOPWORDS_EN_EXTENDED, extra_stopwords=True)

QuoteFinder = Callable[[str, Source], Quote]


def content_terms(text: str) -> int:
    """Distinct content words in ``text`` (stopwords removed): stems, and CJK bigrams two to a word."""
    terms = set(_ANALYZER.tokenize(text))
    cjk = sum(1 for t in terms if _CJK_TERM.match(t))
    return len(terms) - cjk + (cjk + 1) // 2


def may_end_sentence(text: str) -> bool:
    """Whether ``text`` holds a character a sentence can end at (terminal punctuation, a line break)."""
    return _ENDS.search(text) is not None


def complete_sentences(text: str, start: int, end: int, release: int, final: bool) -> list[tuple[int, int]]:
    """The sentences of ``text[start:end]`` whose end is final, given that cuts before ``release`` are.

    ``release`` is ``settled_end``'s answer while more text may come. With ``final`` (the
    end of the answer, or a citation marker the model put at ``end``) every sentence, the
    last one included, is complete.
    """
    spans = sentence_spans(text, start, end)
    if final:
        return spans
    return [spans[i] for i in range(len(spans) - 1) if spans[i + 1][0] <= release]


class Attributor:
    """Finds the passage that best supports a sentence, among those retrieved for this answer."""

    def __init__(
        self,
        sources: list[Source],
        find_quote: QuoteFinder,
        mode: AttributionMode = "fill",
        fixed: Collection[str] = (),
    ) -> None:
        """``fixed``: sentences the answerer writes itself ("The sources say this in English."), never cited."""
        self.sources = sources
        self.find_quote = find_quote
        self.mode = mode
        self.fixed = fixed

    @property
    def verify(self) -> bool:
        return self.mode == "verify"

    def best(self, sentence: str) -> tuple[Source, Quote] | None:
        """The best supporting (source, quote) when its support clears the threshold; None otherwise.

        Ties go to the earlier retrieved passage (the better ranked one).
        """
        if (
            not self.sources
            or sentence.strip() in self.fixed
            # A question (the model restating the user's) claims nothing, nor a lead-in to what follows ("… es:").
            or sentence.rstrip().endswith((*QUESTION_ENDS, ":", "："))
            or content_terms(sentence) < MIN_CONTENT_TERMS
            or is_decline(sentence)
        ):
            return None  # a decline is about the sources: citing one for it would say it is in them
        best: tuple[Source, Quote] | None = None
        for source in self.sources:
            quote = self.find_quote(sentence, source)
            if not quote.supported or (best is not None and quote.support <= best[1].support):
                continue
            if quote.support < INFERRED_ACROSS_SCRIPTS_MIN and scripts_differ(sentence, source.passage.chunk.text):
                continue
            best = (source, quote)
        return best
