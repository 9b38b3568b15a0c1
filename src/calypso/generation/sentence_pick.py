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
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from calypso.generation import answerability
from calypso.generation.question_words import WANTS_NUMBER, drop_question_terms
from calypso.models import Passage
from calypso.text import languages
from calypso.text.cjk import content_length
from calypso.text.sentences import sentence_spans
from calypso.text.tokenize import STOPWORDS_EN_EXTENDED, Analyzer

# (question, sentences) -> each sentence's similarity to the question in [0, 1];
# None: no semantic score this time (the model failed), choose by words only.
SentenceSimilarity = Callable[[str, Sequence[str]], "Sequence[float] | None"]

MAX_SENTENCES = 3
# Without a semantic score (the bundled model covers English only), a German or Chinese choice by words
# alone is less sure of its best sentence: one more is quoted. bench/multilingual_answers.py, hybrid
# search: German 84 -> 86, Chinese 84 -> 89 answers in 100 hold the gold answer.
MAX_SENTENCES_BY_WORDS = 4
MAX_CHARS = 700
MIN_SENTENCE_CHARS = 20
# A question longer than this is a pasted document: its sentence choice reads this much of it, so that
# the work stays bounded (every question term is looked up in every candidate sentence).
MAX_QUESTION_CHARS = 4000
RELATIVE_FLOOR = 0.6  # a sentence scoring under this share of the best one is padding, not an answer
DUPLICATE_JACCARD = 0.6  # content-word overlap above which two sentences say the same thing
# Tuned on SciFact train claims against their gold rationale sentences (bench/extractive_rationales.py):
SEMANTIC_WEIGHT = 0.35  # share of the (pool-normalised) semantic score in a sentence's relevance
SEMANTIC_FLOOR = 0.7  # RELATIVE_FLOOR with a semantic score: the blend is flatter, so padding needs a higher bar
SEMANTIC_ONLY_MIN = 0.5  # semantic score from which a sentence sharing no content word may be chosen
# CJK only: a question term the sentence lacks but its passage has counts this share. A Chinese
# sentence names its subject once and then leaves it out ("…，1953年逝世"), and a question's bigrams
# are many and small, so a sentence elsewhere that shares one generic bigram ("职业") would otherwise
# beat the passage that is about the question's subject. Tuned on bench/multilingual_answers.py.
PASSAGE_CREDIT = 0.3
# CJK only, choosing by words alone: the share of the question's bigrams that the best passage must
# hold for an answer to be quoted. A bigram is half a word, and a question shares one with almost any
# Chinese text ("在家里", "不会"). On the cmrc2018-zh knowledge base of bench/multilingual_answers.py,
# 99% of 300 answerable questions reach 0.3 and 7 of 10 questions about topics it lacks do not; the
# first 100 lose nothing (0.34: 8 of 10, but 3 of those 100 refused).
CJK_MIN_COVERAGE = 0.3
# English: the share of the question's content words one retrieved passage must hold (or a sentence must
# mean the question, SEMANTIC_ONLY_MIN) for an answer (German answers fell from 90 to 67 in 100 under it:
# inflected and compound words match less, so other languages keep their rules). Set on questions built for
# issue 24 (bench/unanswerable.py): the 39 Alps questions (lowest share 0.5) against 60 SciFact claims
# (highest 0.33) and 15 near-topic questions the article does not answer (7 of them under 0.4): 65 of 75
# declined with hybrid search, 39 of 39 answered with the gold answer cited. 0.4, not 0.45: GitHub's terms
# of service hold 0.44 of a question about sharing personal data, and do speak to it.
MIN_COVERAGE = 0.4
_PARTICLES = frozenset("的是了在和与及")
QUESTION_WORDS = frozenset("what which who whom whose when where why how do does did".split())

_ANALYZER = Analyzer(stopwords=STOPWORDS_EN_EXTENDED | QUESTION_WORDS)
_HAS_NUMBER = re.compile(r"\d")
# A sentence that ends like one: terminal punctuation, then closers and footnote markers.
_ENDS_SENTENCE = re.compile(r"[.!?…:;。！？；]['\"”’»)\]」』）》]*(?:\[[^\[\]]{1,40}\])*\s*$")
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
# The same in other languages, for sentences of passages in them (English text keeps the list above:
# "ER" and "es" are words of English science text).
_REFERRING_BY_LANGUAGE = {
    "en": _REFERRING,
    "de": frozenset(
        "er sie es ihr ihre ihren ihrem ihrer ihn ihm ihnen sein seine seinen seinem seiner dies diese dieser"
        " dieses diesem diesen dort damals"
        # connectives that go on from the sentence before ("Zum Beispiel ist P ⊆ NP …")
        " beispiel beispielsweise dabei dadurch daher deshalb darunter davon dafür dazu somit".split()
    ),
    "fr": frozenset("il elle ils elles son sa ses leur leurs lui ce cette ces celui celle exemple ainsi".split()),
    "es": frozenset("él ella ellos ellas su sus le les lo la este esta estos estas ese esa allí ejemplo así".split()),
}
# German puts the verb second, so its pronoun comes later: "In den meisten Ländern ist sie heute verboten".
_WORD = re.compile(r"\w+")
# A Chinese or Japanese sentence that opens with a pronoun or demonstrative (他, 其, 该, 此, 这 …).
_REFERRING_CJK = frozenset("他她它其该該此这這牠彼")
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
    # CJK passages only: the content terms of the whole passage (see PASSAGE_CREDIT).
    passage_terms: frozenset[str] = frozenset()
    score: float = 0.0
    meaning: float | None = None  # the similarity's score (cosine to the question), when there is one


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


def passage_language(passages: Sequence[Passage]) -> str:
    """The most common language of the passages (English when there are none): what a question too
    short to tell its own language is taken to be in, as search does with the knowledge base's."""
    found = Counter(languages.detect(p.chunk.text) for p in passages)
    return found.most_common(1)[0][0] if found else "en"


def candidates(passages: Sequence[Passage]) -> list[Candidate]:
    """Every quotable sentence of the passages, in retrieval order."""
    out = []
    for number, passage in enumerate(passages, start=1):
        text = passage.chunk.text
        # A short sentence cannot tell its language: it is taken to be in its passage's.
        language = languages.detect(text)
        whole = _terms(text, language) if language in languages.CJK_LANGUAGES else frozenset()
        referring = _REFERRING_BY_LANGUAGE.get(language, _REFERRING)
        previous: frozenset[str] = frozenset()
        out_here = 0
        for start, end in sentence_units(text):
            cleaned = clean_sentence(text[start:end], text)
            # The composer re-splits the answer text: a cleaned unit that reads as two sentences is two.
            for s, e in sentence_spans(cleaned):
                sentence = cleaned[s:e]
                if content_length(sentence) < MIN_SENTENCE_CHARS:  # CJK characters weigh three
                    continue
                terms = _terms(sentence, language)
                head = re.findall(r"\w+", sentence[:60])[:8] if language == "en" else _WORD.findall(sentence[:100])[:12]
                refers = any(w.lower() in referring for w in head) or (
                    language in languages.CJK_LANGUAGES and sentence[0] in _REFERRING_CJK
                )
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
                        passage_terms=whole,
                    )
                )
                out_here += 1
    return out


def _cut_at_start(sentence: str, first: bool) -> bool:
    """Does the sentence start mid-way (a chunk cut it: "1,200 kilometres (750 mi) across ...")?"""
    head = sentence[0]
    return head.islower() or (first and head.isdigit())


def _terms(text: str, language: str = "en") -> frozenset[str]:
    """Content terms (stems; CJK as character bigrams), ``language`` deciding a text too short to tell."""
    terms = set(_ANALYZER.tokenize(text, language))
    # Hyphenated compounds also count as one word: "four-thousanders" matches "fourthousanders".
    for compound in re.findall(r"\w+(?:-\w+)+", text):
        terms.update(_ANALYZER.tokenize(compound.replace("-", ""), language))
    return frozenset(terms)


_MIN_NEAR = 5  # _near and _compound_part need a stem of five letters: shorter ones (CJK bigrams) skip the scan


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


# Languages that write compounds as one word: "Funkdemonstration" holds "Demonstration".
COMPOUNDING = frozenset(("de", "nl", "sv", "da", "no", "fi"))
_MIN_COMPOUND_PART = 5


def _compound_part(a: str, b: str) -> bool:
    """One stem is the head or the start of a compound the other is (at least five letters of it)."""
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) < _MIN_COMPOUND_PART or len(long) < len(short) + 3:
        return False
    return long.endswith(short) or long.startswith(short)


def question_terms(question: str, language: str = "en") -> list[str]:
    """The question's content words (stems), stopwords and question words removed; ``language``
    decides a question too short to tell its own. Only the first ``MAX_QUESTION_CHARS`` are read."""
    question = question[:MAX_QUESTION_CHARS]
    return sorted(drop_question_terms(_terms(question, language), language, _ANALYZER.tokenize))


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
    language: str = "en",
) -> list[Candidate]:
    """The candidates worth quoting, scored, best first: those that share a content word with the
    question, and with a semantic score those whose score reaches ``semantic_only_min``."""
    query = question_terms(question, language)
    if not query or not pool:
        return []
    n = len(pool)
    df = {t: sum(1 for c in pool if t in c.terms) for t in query}
    weight = {t: math.log(1 + (n + 1) / (df[t] + 0.5)) for t in query}
    total = sum(weight.values())
    wants_number = bool(WANTS_NUMBER.search(question))
    compounds = language in COMPOUNDING
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
            elif len(t) >= _MIN_NEAR and (
                any(_near(t, u) for u in candidate.terms)
                or (compounds and any(_compound_part(t, u) for u in candidate.terms))
            ):
                matched += 0.5 * weight[t]
                hits += 1
            elif t in candidate.context:
                matched += 0.4 * weight[t]  # named in the sentence before, referred to here
            elif t in candidate.passage_terms:
                matched += PASSAGE_CREDIT * weight[t]
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
        scored.append(replace(candidate, score=score, meaning=None if semantic is None else semantic[index]))
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
    max_sentences: int | None = None,
    max_chars: int = MAX_CHARS,
    semantic_weight: float = SEMANTIC_WEIGHT,
    semantic_only_min: float = SEMANTIC_ONLY_MIN,
    semantic_floor: float = SEMANTIC_FLOOR,
) -> list[Candidate]:
    """The best sentences for the question, best first: no near-duplicates, stopping where relevance falls off.

    ``similarity`` is asked once, for every candidate (unless ``semantic_weight`` is 0); when it gives
    nothing (None: the model failed, or it does not cover the language) the choice is the lexical one.
    ``max_sentences`` None: ``MAX_SENTENCES``, or ``MAX_SENTENCES_BY_WORDS`` for a passage language other
    than English chosen by words alone."""
    pool = candidates(passages)
    language = passage_language(passages)
    if not question_terms(question, language):
        return []
    semantic = semantic_scores(question, pool, similarity) if semantic_weight > 0 else None
    scored = score_candidates(
        question,
        pool,
        semantic,
        semantic_weight=semantic_weight,
        semantic_only_min=semantic_only_min,
        language=language,
    )
    if not scored:
        return []
    if language in languages.CJK_LANGUAGES:
        if semantic is None and _passage_coverage(question, pool, language) < CJK_MIN_COVERAGE:
            return []  # one shared bigram ("在家", "电力") is not an answer: say that nothing was found
    elif (
        language == "en"
        and max(_passage_coverage(part, pool, language) for part in _question_parts(question)) < MIN_COVERAGE
        and max(semantic or [0.0]) < semantic_only_min
    ):
        return []  # no passage holds enough of any part of the question, nor means it: the documents do not answer
    if max_sentences is None:
        by_words = semantic is None and language != "en"
        max_sentences = MAX_SENTENCES_BY_WORDS if by_words else MAX_SENTENCES
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
    if language != "en":
        chosen = _with_antecedents(chosen, pool)
    return chosen


def answers_question(question: str, passages: Sequence[Passage], chosen: Sequence[Candidate]) -> bool:
    """Whether one of the ``chosen`` sentences answers ``question``, or one of its parts when it asks two
    things ("How does GitHub share personal data, and what are my rights to delete it?"), rather than only
    sharing its words (``generation.answerability``): the answerer declines when none does. A question in
    another language than the passages' names things in its own ("el Cervino" for the Matterhorn): its names
    are not looked for in them."""
    language = passage_language(passages)
    same_language = languages.detect(question, language) == language
    compounds = language in COMPOUNDING

    def near(a: str, b: str) -> bool:
        return _near(a, b) or (compounds and _compound_part(a, b))

    titles = {p.document.id: f"{p.document.title or ''} {p.document.filename.rsplit('.', 1)[0]}" for p in passages}
    title_terms = [_terms(title.replace("_", " "), language) for title in titles.values()]
    quoted = [answerability.Quoted(c.number, c.text, c.terms, c.context, c.meaning, c.passage_terms) for c in chosen]
    # English only, as the coverage rule above: a German relative clause ("Was ist die Annahme, die …") is no
    # second question.
    for part in _question_parts(question) if language == "en" else [question]:
        terms = [t for t in question_terms(part, language) if not _PARTICLES & set(t)]
        asked = answerability.asked(part, terms, language, _terms)
        if not same_language:
            asked = replace(asked, names=frozenset(), across_languages=True)
        topic = answerability.topic_names(asked, title_terms, near)
        if answerability.answered(asked, quoted, topic=topic, language=language, analyze=_terms, near=near):
            return True
    return False


FOLLOWERS = 2  # sentences that may follow the best one, each referring back to the one before


_PART_BREAKS = re.compile(
    r"\s*[,;]\s*(?:and |or |but )?|\s+(?:and|or|but) (?=(?:who|what|when|where|which|why|how|can|does|do|is|are|was|were)\b)"
)


def _question_parts(question: str) -> list[str]:
    """The question, and each of its parts when it asks two things ("Who must accompany visitors, and within
    how many days can customers request a refund?"): the documents answer it if they answer one part."""
    parts = [p for p in _PART_BREAKS.split(question) if p and len(p.split()) >= 2]
    return [question, *parts] if len(parts) > 1 else [question]


def _passage_coverage(question: str, pool: list[Candidate], language: str) -> float:
    """The largest share of the question's terms that one candidate's passage holds. Unweighted: an idf
    over the pool would weigh most the bigrams no passage has, which are mostly ones across two words
    ("鹿又"); bigrams across a particle ("鹏的", "业是") are left out as no word of the question's."""
    query = [t for t in question_terms(question, language) if not _PARTICLES & set(t)]
    if not query or not pool:
        return 0.0
    return max(sum(1 for t in query if t in c.terms or t in c.passage_terms) for c in pool) / len(query)


def _with_antecedents(chosen: list[Candidate], pool: list[Candidate]) -> list[Candidate]:
    """Each chosen sentence that refers back ("Sie gewannen …", "他于1953年逝世") preceded by the sentence
    it refers to, unless that one is chosen already, so that the answer names whom it is about; and the
    best sentence followed by the next one when that one refers back to it ("… Sie ist heute verboten."),
    which is often where a German or Chinese passage puts the answer. Not for English, whose choice was
    tuned without it. On bench/multilingual_answers.py (keyword search): German 77 -> 82, Chinese 81 -> 82."""
    position = {(c.number, c.start, c.text): i for i, c in enumerate(pool)}
    texts = {c.text for c in chosen}
    out: list[Candidate] = []
    for rank, candidate in enumerate(chosen):
        i = position.get((candidate.number, candidate.start, candidate.text), 0)
        before = pool[i - 1] if i > 0 else None
        if candidate.context and before is not None and before.number == candidate.number and before.text not in texts:
            out.append(before)
            texts.add(before.text)
        out.append(candidate)
        if rank == 0:  # the best sentence goes on while the next ones refer back to it
            for after in pool[i + 1 : i + 1 + FOLLOWERS]:
                if not after.context or after.number != candidate.number or after.text in texts:
                    break
                out.append(after)
                texts.add(after.text)
    return out
