"""Pick the retrieved sentences that answer a question: the extractive answerer's scorer.

Each retrieved passage is cut into real sentences by ``calypso.text.sentences`` and then
mended where PDF layout broke the splitter: a sentence that a short line cut mid-way
("... because the Western" | "Alps underwent ...") is joined to its rest, and a figure
caption glued in front of a sentence ("... (left to right)" + "The Alps are ...") is cut
off. Each sentence is cleaned (control characters, page furniture, footnote markers,
line-break hyphenation, markdown emphasis) and nothing else, so the support scorer still
finds it in the passage as the quote.

A sentence's score is the idf-weighted share of the question's content words it holds
(stems, plus near-stems like ``climber``/``climbed`` at half weight; stopwords and question
words never count), a small prior for the passage's retrieval rank, a bonus for numbers
when the question asks how many/when, and penalties for fragments and bibliography
entries. ``SentenceSimilarity`` is the hook for a semantic score (embedding cosine,
``calypso.generation.similarity``): given, a sentence's relevance is
``(1 - semantic_weight) * lexical + semantic_weight * semantic``, a sentence that shares no
content word with the question may still be chosen when its semantic score reaches
``SEMANTIC_ONLY_MIN``. The weights are tuned on SciFact train claims (docs/benchmarks/answers.md,
"Extractive answers (issue 12)"). Near-duplicates stay lexical: an embedding-cosine check
dropped more gold rationale sentences than padding.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from calypso.models import Passage
from calypso.retrieval.tokenize import STOPWORDS_EN_EXTENDED, Analyzer
from calypso.text.sentences import sentence_spans

# (question, sentences) -> each sentence's similarity to the question in [0, 1];
# None: no semantic score this time (the model failed), choose by words only.
SentenceSimilarity = Callable[[str, Sequence[str]], "Sequence[float] | None"]

MAX_SENTENCES = 3
MAX_CHARS = 700
MIN_SENTENCE_CHARS = 20
RELATIVE_FLOOR = 0.6  # a sentence scoring under this share of the best one is padding, not an answer
DUPLICATE_JACCARD = 0.6  # content-word overlap above which two sentences say the same thing
# Tuned on SciFact train claims against their gold rationale sentences (bench/extractive_rationales.py):
SEMANTIC_WEIGHT = 0.35  # share of the (pool-normalised) semantic score in a sentence's relevance
SEMANTIC_FLOOR = 0.7  # RELATIVE_FLOOR with a semantic score: the blend is flatter, so padding needs a higher bar
SEMANTIC_ONLY_MIN = 0.5  # semantic score from which a sentence sharing no content word may be chosen
QUESTION_WORDS = frozenset("what which who whom whose when where why how do does did".split())

_ANALYZER = Analyzer(stopwords=STOPWORDS_EN_EXTENDED | QUESTION_WORDS)
_WANTS_NUMBER = re.compile(
    r"\b(how (long|many|much|often|old|far|soon|high|tall|big|large)|when|what (time|year|date)|which (year|date))\b",
    re.I,
)
_HAS_NUMBER = re.compile(r"\d")
# A sentence that ends like one: terminal punctuation, then closers and footnote markers.
_ENDS_SENTENCE = re.compile(r"[.!?…:;。！？]['\"”’»)\]]*(?:\[[^\[\]]{1,40}\])*\s*$")
# Wikipedia footnotes ("[83]", "[note 2]", "[citation needed]"): the composer would read "[3]" as a citation marker.
_FOOTNOTE = re.compile(r"\s?\[(?:\d{1,3}|note \d{1,3}|[a-z]|citation needed|clarification needed|when\?)\]", re.I)
_EMPHASIS = re.compile(r"\*\*|__|(?<![\w*])\*(?=\w)|(?<=\w)\*(?![\w*])")
_BREAKS = frozenset("\r\v\f\x85\u2028\u2029")  # line and page breaks that are not "\n": a space
# A bibliography entry: "Schmid, Stefan M. (2004).", "ISBN 978-...", "Retrieved 5 May 2015."
_REFERENCE = re.compile(r"\(\d{4}[a-z]?\)\.?$|\bISBN\b|\bdoi:|\bRetrieved \d|\bArchived from\b|^\^")
# Page furniture on a line of its own: page numbers, "Page 3 of 25", "3/25", a printed URL or timestamp line.
_FURNITURE_LINE = re.compile(
    r"^(?:(?:page\s+)?\d{1,4}(?:\s*(?:/|of)\s*\d{1,4})?|[-–—]\s*\d{1,4}\s*[-–—]"
    r"|https?://\S+(?:\s+\d{1,4}/\d{1,4})?|\d{1,2}/\d{1,2}/\d{2,4},?\s+\d{1,2}:\d{2}(?:\s*[AP]M)?\b.*)$",
    re.I,
)
# A hyphen at a line end between two lower-case letters: a word broken by the layout ("exam-\nple").
_LINE_HYPHEN = re.compile(r"(\w*[^\W\d_])-[ \t]*\n[ \t]*([^\W\d_A-Z]\w*)")
_KEPT_HYPHEN = re.compile(r"(?<=\w)-[ \t]*\n[ \t]*(?=\w)")
# Words that open a sentence after a caption line ("... (left to right)\nThe Alps are ...").
_OPENERS = frozenset(
    "The A An In On At This These Those There It Its During After Before Since Many Most Some Several".split()
)
_REFERRING = frozenset("he she it they his her its their him them this these those".split())
_CONTINUES = frozenset("a an the of and or to in on at for with by from as is are was were be that which".split())


@dataclass(frozen=True)
class Candidate:
    """One sentence of one retrieved passage, cleaned, with where it stands in the passage."""

    number: int  # the passage's retrieval number (1-based), as ``[Source N]`` names it
    start: int  # offsets of the original sentence in ``passage.chunk.text``
    end: int
    text: str  # the cleaned sentence, as quoted in the answer
    terms: frozenset[str]
    complete: bool  # ends like a sentence (not a heading, caption or cut fragment)
    reference: bool  # looks like a bibliography entry
    # The previous sentence's content words when this one refers back to it ("he", "its" ...).
    context: frozenset[str] = frozenset()
    score: float = 0.0


def _is_control(ch: str) -> bool:
    return ch not in "\n\t" and unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


def clean_sentence(raw: str, context: str = "") -> str:
    """The sentence as an answer quotes it: layout undone, nothing reworded.

    Drops control and format characters (soft hyphens, zero-width spaces), lines that are page
    furniture, footnote markers and markdown emphasis; joins words the layout hyphenated at a
    line end unless ``context`` (the passage) spells the word with its hyphen elsewhere; folds
    whitespace into single spaces.
    """
    text = "".join(" " if ch in _BREAKS else "" if _is_control(ch) else ch for ch in raw)
    if "\n" in text:
        lines = [line for line in text.split("\n") if not _FURNITURE_LINE.match(line.strip())]
        text = "\n".join(lines)

        def join(match: re.Match[str]) -> str:
            left, right = match.group(1), match.group(2)
            return f"{left}-{right}" if f"{left}-{right}" in context else left + right

        text = _LINE_HYPHEN.sub(join, text)
        text = _KEPT_HYPHEN.sub("-", text)  # "978-\n0-8021", "north-\nSouth": a real hyphen, no space after it
    text = _FOOTNOTE.sub("", text)
    text = _EMPHASIS.sub("", text)
    text = " ".join(text.split())
    return text.lstrip("#-*•·> ").strip()


def _line_cut(text: str, a: int, b: int) -> bool:
    """Did the splitter cut a sentence mid-way at the single line break between ``a`` and ``b``?"""
    gap = text[a:b]
    if gap.count("\n") != 1 or _ENDS_SENTENCE.search(text, max(0, a - 60), a):
        return False
    if b >= len(text) or text[b].isspace():
        return False
    line = text[text.rfind("\n", 0, a) + 1 : a]
    words = line.split()
    if len(words) >= 3 and text[b] == "(":
        return True  # "... moved at 100 m" | "(328 ft) per year.": a unit in brackets never opens a sentence
    # A heading is short and has no comma; a wrapped line of running text is long or has one.
    return len(words) >= 5 and ("," in line or len(line) >= 40)


def _caption_cuts(text: str, start: int, end: int) -> list[int]:
    """Where a caption line glued before a sentence ends: after a line with no terminal
    punctuation, before a line that opens with a sentence opener ("The", "In" ...)."""
    cuts = []
    pos = text.find("\n", start, end)
    while pos >= 0:
        line = text[text.rfind("\n", start, pos) + 1 if text.rfind("\n", start, pos) >= 0 else start : pos].rstrip()
        following = text[pos + 1 : end].lstrip()
        first = following.split(" ", 1)[0] if following else ""
        last = line.rsplit(" ", 1)[-1].lower() if line else ""
        if (
            line
            and first in _OPENERS
            and not _ENDS_SENTENCE.search(line)
            and line[-1] not in ",-–—(/&"
            and last not in _CONTINUES
        ):
            cuts.append(pos)
        pos = text.find("\n", pos + 1, end)
    return cuts


def sentence_units(text: str) -> list[tuple[int, int]]:
    """The real sentences of a passage: splitter spans, mended where the PDF layout misled it."""
    spans = sentence_spans(text)
    merged: list[tuple[int, int]] = []
    i = 0
    while i < len(spans):
        start, end = spans[i]
        joins = 0
        while i + 1 < len(spans) and joins < 3 and _line_cut(text, end, spans[i + 1][0]):
            i += 1
            end = spans[i][1]
            joins += 1
        merged.append((start, end))
        i += 1
    units: list[tuple[int, int]] = []
    for start, end in merged:
        previous = start
        for cut in _caption_cuts(text, start, end):
            units.append((previous, cut))
            previous = cut + 1
        units.append((previous, end))
    return [(s, e) for s, e in units if text[s:e].strip()]


def candidates(passages: Sequence[Passage]) -> list[Candidate]:
    """Every quotable sentence of the passages, in retrieval order."""
    out = []
    for number, passage in enumerate(passages, start=1):
        text = passage.chunk.text
        previous: frozenset[str] = frozenset()
        out_here = 0
        for start, end in sentence_units(text):
            cleaned = clean_sentence(text[start:end], text)
            # The composer re-splits the answer text: a cleaned unit that reads as two sentences is two.
            for s, e in sentence_spans(cleaned):
                sentence = cleaned[s:e]
                if len(sentence) < MIN_SENTENCE_CHARS:
                    continue
                terms = _terms(sentence)
                refers = any(w.lower() in _REFERRING for w in re.findall(r"\w+", sentence[:60])[:8])
                context, previous = (previous if refers else frozenset()), terms
                if not terms:
                    continue
                out.append(
                    Candidate(
                        number=number,
                        start=start,
                        end=end,
                        text=sentence,
                        terms=terms,
                        complete=bool(_ENDS_SENTENCE.search(sentence)) and not _cut_at_start(sentence, not out_here),
                        reference=bool(_REFERENCE.search(sentence)),
                        context=context,
                    )
                )
                out_here += 1
    return out


def _cut_at_start(sentence: str, first: bool) -> bool:
    """Does the sentence start mid-way (a chunk cut it: "1,200 kilometres (750 mi) across ...")?"""
    head = sentence[0]
    return head.islower() or (first and head.isdigit())


def _terms(text: str) -> frozenset[str]:
    terms = set(_ANALYZER.tokenize(text))
    # Hyphenated compounds also count as one word: "four-thousanders" matches "fourthousanders".
    for compound in re.findall(r"\w+(?:-\w+)+", text):
        terms.update(_ANALYZER.tokenize(compound.replace("-", "")))
    return frozenset(terms)


def _near(a: str, b: str) -> bool:
    """Stems of one word that the stemmer left apart: "climber"/"climb", "undergo"/"underw"."""
    shorter = min(len(a), len(b))
    if shorter < 5:
        return False
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common >= 5 and common >= 0.8 * shorter


def question_terms(question: str) -> list[str]:
    """The question's content words (stems), stopwords and question words removed."""
    return sorted(_terms(question))


def semantic_scores(question: str, pool: list[Candidate], similarity: SentenceSimilarity | None) -> list[float] | None:
    """The similarity's score of each candidate; None when there is none."""
    if similarity is None or not pool:
        return None
    got = similarity(question, [c.text for c in pool])
    if got is None:
        return None
    if len(got) != len(pool):
        raise ValueError(f"the similarity scored {len(got)} sentences of {len(pool)}")
    return [float(r) for r in got]


def score_candidates(
    question: str,
    pool: list[Candidate],
    semantic: list[float] | None = None,
    *,
    semantic_weight: float = SEMANTIC_WEIGHT,
    semantic_only_min: float = SEMANTIC_ONLY_MIN,
) -> list[Candidate]:
    """The candidates worth quoting, scored, best first: those that share a content word with the
    question, and with a semantic score those whose score reaches ``semantic_only_min``."""
    query = question_terms(question)
    if not query or not pool:
        return []
    n = len(pool)
    df = {t: sum(1 for c in pool if t in c.terms) for t in query}
    weight = {t: math.log(1 + (n + 1) / (df[t] + 0.5)) for t in query}
    total = sum(weight.values())
    wants_number = bool(_WANTS_NUMBER.search(question))
    spread: list[float] = []
    if semantic is not None:
        low, high = min(semantic), max(semantic)
        spread = [(r - low) / (high - low) if high > low else 1.0 for r in semantic]
    scored = []
    for index, candidate in enumerate(pool):
        matched = 0.0
        hits = 0
        for t in query:
            if t in candidate.terms:
                matched += weight[t]
                hits += 1
            elif any(_near(t, u) for u in candidate.terms):
                matched += 0.5 * weight[t]
                hits += 1
            elif t in candidate.context:
                matched += 0.4 * weight[t]  # named in the sentence before, referred to here
        lexical = matched / total
        if semantic is None:
            if hits == 0:
                continue
            score = lexical
        else:
            if hits == 0 and semantic[index] < semantic_only_min:
                continue
            score = (1 - semantic_weight) * lexical + semantic_weight * spread[index]
        score += 0.1 / candidate.number  # earlier-ranked passages win ties
        score += 0.1 * hits / len(candidate.terms)  # of two sentences with the same words, the one about less else
        if wants_number and _HAS_NUMBER.search(candidate.text):
            score += 0.15
        if not candidate.complete:
            score *= 0.7
        if candidate.reference:
            score *= 0.3
        scored.append(replace(candidate, score=score))
    scored.sort(key=lambda c: (-c.score, c.number, c.start))
    return scored


def _duplicate(a: Candidate, b: Candidate) -> bool:
    if a.text.lower() in b.text.lower() or b.text.lower() in a.text.lower():
        return True
    return len(a.terms & b.terms) / max(1, len(a.terms | b.terms)) > DUPLICATE_JACCARD


def pick_sentences(
    question: str,
    passages: Sequence[Passage],
    *,
    similarity: SentenceSimilarity | None = None,
    max_sentences: int = MAX_SENTENCES,
    max_chars: int = MAX_CHARS,
    semantic_weight: float = SEMANTIC_WEIGHT,
    semantic_only_min: float = SEMANTIC_ONLY_MIN,
    semantic_floor: float = SEMANTIC_FLOOR,
) -> list[Candidate]:
    """The best sentences for the question, best first: no near-duplicates, stopping where relevance falls off.

    ``similarity`` is asked once, for every candidate (unless ``semantic_weight`` is 0); when it gives
    nothing (None: the model failed) the choice is the lexical one."""
    pool = candidates(passages)
    if not question_terms(question):
        return []
    semantic = semantic_scores(question, pool, similarity) if semantic_weight > 0 else None
    scored = score_candidates(
        question, pool, semantic, semantic_weight=semantic_weight, semantic_only_min=semantic_only_min
    )
    if not scored:
        return []
    floor = (semantic_floor if semantic is not None else RELATIVE_FLOOR) * scored[0].score
    chosen: list[Candidate] = []
    total = 0
    for candidate in scored:
        if candidate.score < floor:
            break
        if any(_duplicate(candidate, c) for c in chosen):
            continue  # overlapping chunks repeat sentences
        if chosen and total + len(candidate.text) > max_chars:
            continue
        chosen.append(candidate)
        total += len(candidate.text)
        if len(chosen) == max_sentences:
            break
    return chosen
