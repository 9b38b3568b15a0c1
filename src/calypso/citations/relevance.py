"""Does an answer answer the question, and does a citation keep the question's names? (issue 39)

Support says "the passage says this", not "this answers what was asked". Real models, asked about what the
documents do not hold, answer beside the question with true sentences ("Which range separates France from
Spain?" answered with a sentence about a range between France and Switzerland), or write the question's
name into a sentence copied from a passage about something else ("Lake Garda is a crescent shaped lake …"
cited to Lake Geneva's sentence). Two checks, for every answerer:

* ``NameCheck`` wraps the quote finder: a segment that names what the question names (its capitalised
  words, in English) while the cited passage does not, or that puts a name the passage lacks where the
  quoted sentence has another, is not supported by that passage, however many other words they share.
* ``answers_question``: some supported sentence must hold the question's focus — every name of the question
  in the sentence or the passages it cites, and one of its other content words in the sentence or its
  quotes — and, when the question asks for a quantity ("how many", "how high", "多少"), a number. An answer
  that fails is reported as not found (``grounded_sources_state`` ``missing``) with its text kept and marked.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import cache

from calypso.citations.grounded import GroundedAnswer, Quote, Source
from calypso.citations.support import SUBSTITUTION_FACTOR, content_stems
from calypso.generation.question_words import drop_question_terms
from calypso.text.languages import detect

QuoteFinder = Callable[[str, Source], Quote]

_CAPITALISED = re.compile(r"(?<![\w'’])[A-ZÀ-ÖØ-Þ][\w'’-]*")
# A question for a quantity, whose answer holds a number ("when" is left out: "during the Roman era" answers it).
_WANTS_QUANTITY = re.compile(
    r"\b(?:how (?:many|much|long|often|old|far|high|tall|big|large|deep|wide)|what (?:year|percentage|number)|"
    r"which year|wie (?:viele?|lange|oft|alt|weit|hoch|groß|gross|tief)|in welchem jahr|combien|cuánt[oa]s?)\b"
    r"|多少|几|幾|哪一年|哪年|何年|何人|いくつ|몇",
    re.IGNORECASE,
)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundreds?|"
    r"thousands?|millions?|billions?|dozens?|several|few|many|eins|zwei|drei|vier|fünf|sechs|sieben|acht|neun|"
    r"zehn|hundert|tausend)\b|[一二三四五六七八九十百千万億亿两]",
    re.IGNORECASE,
)


# Words a question is asked with, not about: the first word of "Describe Lake Garda" is no name.
_ASKING = frozenset(
    "describe explain tell list name give summarize summarise define mention show compare outline identify "
    "please what which who whom whose where when why how is are was were do does did can could should would "
    "will has have had in on at for from according happen happened happens".split()
)


def question_names(question: str, language: str = "en") -> frozenset[str]:
    """Content stems of the names an English question holds: its capitalised words, the first one only when
    it is not a word questions are asked with. None for other languages (German capitalises every noun; CJK
    has no capitals). ``language``: the documents', for a question too short to tell its own."""
    if not question.strip() or detect(question, language) != "en":
        return frozenset()
    words = _CAPITALISED.findall(question)
    if words and question.lstrip().startswith(words[0]) and words[0].lower() in _ASKING:
        words = words[1:]
    return frozenset(content_stems(" ".join(words)))


def _focus(question: str, fallback: str = "en") -> frozenset[str]:
    """The question's content stems, without its question words and the verbs it asks with."""
    language = detect(question, fallback)
    terms = content_stems(question, language)
    return frozenset(t for t in drop_question_terms(terms, language, _analyze) if t not in _asking_stems())


@cache
def _asking_stems() -> frozenset[str]:
    return frozenset(content_stems(" ".join(_ASKING)))


def _analyze(text: str, language: str) -> list[str]:
    return content_stems(text, language)


class NameCheck:
    """A quote finder that takes support away from a passage that does not hold a sentence's names.

    Two cases, English sentences only: the sentence names what the question names while the passage does
    not ("Lake Garda is a crescent shaped lake …" for "Describe Lake Garda."); or it holds a capitalised
    name the passage lacks while the quoted sentence has other names in its place ("… a popular tourist
    destination in Ireland" quoted from "The St. Bartholomew's chapel on the Königssee in Bavaria is a
    popular tourist destination"). Applied to answers only: on AttributionBench's long multi-claim answers
    the second rule would cost about 2 points of balanced accuracy (docs/benchmarks.md, issue 39)."""

    def __init__(self, question: str, find_quote: QuoteFinder, sources: list[Source]) -> None:
        self.language = passages_language(sources)
        # Asked in another language than the passages', an answer names things in the question's ("el Cervino").
        self.across = detect(question, self.language) != self.language
        self.names = _folded(question_names(question, self.language))
        self.find_quote = find_quote
        self._passages: dict[int, set[str]] = {}  # retrieval number -> its folded stems: asked once per source

    def __call__(self, segment_text: str, source: Source) -> Quote:
        quote = self.find_quote(segment_text, source)
        if not quote.supported or self.across or self.language != "en" or detect(segment_text, self.language) != "en":
            return quote  # English names in English passages only: a Chinese one writes Texas 德克萨斯州
        passage = self._passages.get(source.retrieval_number)
        if passage is None:
            passage = self._passages[source.retrieval_number] = _folded(content_stems(_passage_text(source)))
        own = _folded(content_stems(segment_text))
        named = self.names & own
        swapped = _names(segment_text) - passage
        if (named and not named <= passage) or (swapped and _names(quote.text) - own):
            return replace(quote, support=round(quote.support * SUBSTITUTION_FACTOR, 4), supported=False)
        return quote


def _names(text: str) -> set[str]:
    """Stems of the capitalised words of ``text`` after its first character (a sentence's first word is no name)."""
    return _folded(content_stems(" ".join(_CAPITALISED.findall(text[1:]))))


def _folded(stems: Iterable[str]) -> set[str]:
    """Without accents: a model writes "Otzi" for the passage's "Ötzi"."""
    return {unicodedata.normalize("NFKD", s).encode("ascii", "ignore").decode() or s for s in stems}


def passages_language(sources: list[Source]) -> str:
    """The language the retrieved passages are written in (of their first few thousand characters)."""
    return detect(" ".join(s.passage.chunk.text for s in sources[:3]), "en")


def _passage_text(source: Source) -> str:
    passage = source.passage
    return " ".join([passage.chunk.text, passage.document.title or "", " ".join(passage.chunk.heading_path)])


def answers_question(question: str, answer: GroundedAnswer) -> bool | None:
    """Whether a supported sentence of ``answer`` answers ``question``; None when there is nothing to judge
    (no question, or no supported sentence: the answer is not grounded either way)."""
    language = passages_language(answer.sources)
    focus = _focus(question, language)
    if not question.strip() or not focus:
        return None
    supported = [s for s in answer.sentences if s.status == "supported"]
    if not supported:
        return None
    names = _folded(question_names(question, language))
    others = _folded(focus) - names
    quantity = _WANTS_QUANTITY.search(question) is not None
    asked_in = detect(question, language)
    for sentence in supported:
        text = answer.text[sentence.start : sentence.end]
        if detect(text, language) != asked_in:
            # A sentence quoted in another language than the question's shares none of its words or names ("el
            # Cervino" is the Matterhorn): the answerer chose it by meaning; a quantity still needs a number.
            if not quantity or _NUMBER.search(text):
                return True
            continue
        cited = [
            (answer.source(c.retrieval_number), c.quote)
            for segment in answer.segments
            if segment.start < sentence.end and segment.end > sentence.start
            for c in segment.citations
        ]
        own = _folded(content_stems(text, language))
        quoted = own.union(*(_folded(content_stems(q.text, language)) for _, q in cited))
        around = quoted.union(*(_folded(content_stems(_passage_text(s), language)) for s, _ in cited))
        if names and not names <= around:
            # A terse answer ("1865 [Source 3]") cited to a passage that has its words but not the question's
            # names: any retrieved passage that has every word of the sentence and the names will do.
            for source in answer.sources:
                terms = _folded(content_stems(_passage_text(source), language))
                if own and own <= terms and names <= terms:
                    around |= terms
                    quoted |= terms
                    break
        if names and not names <= around:
            continue
        # The question's names in the sentence itself make it about the question ("What is Stefan Schmid's
        # profession?" answered "According to geologist Stefan Schmid, …"); else one more of its words must be.
        if others and not (names and names <= own) and not others & quoted:
            continue
        if quantity and not _NUMBER.search(text):
            continue
        return True
    return False
