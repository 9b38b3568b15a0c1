"""Does a cited passage support the answer segment that cites it?

A lexical entailment proxy in pure Python: split the passage into sentences
(calypso.text.sentences, run-ons cut at 600 characters), find the
window of 1-3 consecutive sentences that covers most of the segment's content words
(``calypso.text.tokenize.Analyzer``: each text by its language, extended English stopwords
removed, Snowball stems; CJK runs as character bigrams; window terms weighted by a passage-local idf), then combine a few
alignment features with a logistic regression (``FEATURE_NAMES``): content-word recall of
the segment in that window and in the whole passage, recall of its adjacent content-word
pairs in the window, its numbers missing from the passage, a negation mismatch with the
window, and how many of its content words the passage lacks.

The weights were fitted by ``bench/fit_support.py`` on the AttributionBench
*out-of-distribution* file only (HAGRID, BEGIN, AttrScore-GenSearch; 1,611 rows with
evidence), and ``SUPPORT_THRESHOLD`` is the macro-F1-best cut on that same file. The
in-distribution AttributionBench file and WiCE are held out; ``bench/attribution_quality.py``
reports them. At SUPPORT_THRESHOLD: ID macro-F1 70.4 / balanced accuracy 70.6 (the plain
content-word overlap baseline reaches 67.9 only with its threshold tuned on ID itself);
WiCE (partially supported excluded) macro-F1 61.0; OOD 82.4 in-sample. ExpertQA is the
weak spot (56 macro-F1): lexical overlap cannot tell topical from supporting evidence.
Cost: about 0.3 ms per (segment, ~1000-character passage) pair, linear in passage length.

With an embedding model (``embedder=``, the local ``minilm-l6-v2-int8`` only) a seventh
feature is added: the cosine between the segment and its passage's sentence centroid
(calypso.citations.semantic), with its own weights fitted the same way on the same OOD rows and
calibrated to the same SUPPORT_THRESHOLD. Measured (docs/benchmarks/answers.md): ID 70.4 -> 70.8 macro-F1,
OOD 5-fold CV 81.1 -> 81.9, at tens of ms per segment even with the passage's sentence vectors
cached (one segment embedding), hundreds cold. The span returned is chosen lexically either way.
Earlier, all-MiniLM-L6-v2 through sentence-transformers + torch (~1.5 GB) measured likewise.

The output is the logistic model's probability: calibrated on the fitting data only, so
use it as a score with a tuned cut rather than as a probability on other text.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from calypso.citations import crossing, semantic
from calypso.text.languages import detect
from calypso.text.sentences import sentence_spans
from calypso.text.tokenize import STOPWORDS_EN_EXTENDED, Analyzer

if TYPE_CHECKING:
    from calypso.embeddings.base import Embedder

__all__ = [
    "SUPPORT_THRESHOLD",
    "Evidence",
    "best_evidence",
    "content_stems",
    "split_sentences",
    "support_score",
    # The fitted model itself, for bench/fit_support.py and the tests that check it.
    "BIAS",
    "FEATURE_NAMES",
    "SCORE_WINDOW",
    "SEMANTIC_BIAS",
    "SEMANTIC_FEATURE_NAMES",
    "SEMANTIC_WEIGHTS",
    "WEIGHTS",
    "Analysis",
    "features",
]


@dataclass(frozen=True)
class Evidence:
    start: int  # code-point offsets into the passage text of the best supporting span (whole sentences)
    end: int
    text: str  # == passage[start:end], exact substring
    score: float  # support probability-like score in [0, 1]


# --------------------------------------------------------------------------- model
# Fitted by `bench/fit_support.py` (no options): L2 logistic regression (l2=1 on standardised
# features, Newton's method) on the 1,611 AttributionBench OOD rows with evidence; the
# threshold is the macro-F1-best cut on the whole OOD file (82.4 there, in-sample).
# The feature set was chosen among candidates by OOD 5-fold CV and WiCE, not by the ID file.
# Refitted after the move to calypso.text.sentences: every weight within 0.03, threshold
# 0.484, the same ID / OOD / WiCE figures; the constants were kept.
FEATURE_NAMES: tuple[str, ...] = (
    "rec_win",  # share of the segment's content stems in the best 1-3 sentence window
    "rec_whole",  # ... in the whole passage
    "big_win",  # share of the segment's adjacent content-stem pairs found adjacent in the window
    "num_miss",  # share of the segment's numbers absent from the passage
    "neg_mis",  # negation in exactly one of segment and window
    "miss_abs",  # log(1 + content stems of the segment absent from the passage)
)
WEIGHTS: tuple[float, ...] = (
    2.949029,  # rec_win
    2.082279,  # rec_whole
    1.713246,  # big_win
    -1.819263,  # num_miss
    -0.400826,  # neg_mis
    0.347545,  # miss_abs
)
BIAS: float = -4.082436
SUPPORT_THRESHOLD: float = 0.485
# A claim with a number its passage does not have scores at most half of what its words alone would give:
# below SUPPORT_THRESHOLD unless the threshold is set under 0.5 (issue 39).
SUBSTITUTION_FACTOR: float = 0.5

# With an embedder of calypso.citations.semantic.MODEL: the same features plus the semantic one,
# fitted the same way on the same OOD rows (`bench/fit_support.py --semantic`). The bias is shifted
# so that this model's own macro-F1-best cut on the OOD file falls at SUPPORT_THRESHOLD: one
# threshold (and one CALYPSO_SUPPORT_THRESHOLD) for both scorers.
SEMANTIC_FEATURE_NAMES: tuple[str, ...] = FEATURE_NAMES + semantic.FEATURE_NAMES
SEMANTIC_WEIGHTS: tuple[float, ...] = (
    2.810768,  # rec_win
    1.496228,  # rec_whole
    1.704939,  # big_win
    -1.868418,  # num_miss
    -0.343188,  # neg_mis
    0.194464,  # miss_abs
    1.020635,  # cos_cent
)
SEMANTIC_BIAS: float = -4.248493  # its own cut was 0.529 on OOD (82.8 in-sample, 81.9 by 5-fold CV vs 81.1 lexical)

# The window the score looks at (sentences); best_evidence's max_sentences only bounds
# the span it returns, so that one (segment, passage) pair always gets one score.
SCORE_WINDOW = 3
_WINDOW_PENALTY = 0.02  # per extra sentence: prefer the shorter span on near-ties
_MAX_SENTENCE_CHARS = 600  # run-on "sentences" (tables, lists without stops) are cut

# ------------------------------------------------------------------------ analysis
_NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "nobody",
        "nothing",
        "neither",
        "nor",
        "cannot",
        "without",
        "nt",
        "isnt",
        "doesnt",
        "dont",
        "didnt",
        "wasnt",
        "werent",
        "arent",
        "wont",
        "cant",
        "couldnt",
        "shouldnt",
        "wouldnt",
        "hasnt",
        "havent",
        "hadnt",
    ]
)
# extra_stopwords: the English words a German or Chinese passage quotes are not content words either.
# "located", "situated": words a paraphrase adds to say "in" ("Saalbach is located in Austria" for "Saalbach in
# Austria"); a claim is not less supported for them (issue 39).
_RELATION_WORDS = frozenset({"located", "situated", "lies", "lying", "locate"})
_ANALYZER = Analyzer(stopwords=(STOPWORDS_EN_EXTENDED | _NEGATIONS | _RELATION_WORDS), extra_stopwords=True)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEG_WORD = re.compile(r"\b(?:not|no|never|none|nobody|nothing|neither|nor|cannot|without)\b|n[’']t\b")
_NEG_CJK = re.compile("[不没沒无無未勿莫]|ない|ません|않|못")
_NEG_OTHER = re.compile(
    r"\b(?:nicht|kein|keine|keinen|keinem|keiner|keines|nie|niemals|nichts|weder"  # de
    r"|ne|pas|jamais|aucun|aucune|rien|personne|sans"  # fr
    r"|nunca|jamás|ningún|ninguno|ninguna|nada|nadie|tampoco|sin"  # es
    r"|non|mai|nessuno|nessuna|niente|nulla|não|nunca|nenhum|nenhuma|niet|geen|nooit)\b"  # it pt nl
)
_CITATION_MARK = re.compile(r"\[\d+(?:\s*[,;\-–]\s*\d+)*\]|</?s>")
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*")
_LIST_MARK = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*•·])\s+")


def _spans(text: str) -> list[tuple[int, int]]:
    """Sentence spans of ``text`` (calypso.text.sentences), run-ons cut to at most _MAX_SENTENCE_CHARS."""
    spans: list[tuple[int, int]] = []
    for s, e in sentence_spans(text):
        while e - s > _MAX_SENTENCE_CHARS:  # cut run-ons at the last space before the limit
            cut = text.rfind(" ", s + _MAX_SENTENCE_CHARS // 2, s + _MAX_SENTENCE_CHARS)
            if cut <= s:
                cut = s + _MAX_SENTENCE_CHARS
            piece_end = cut
            while piece_end > s and text[piece_end - 1].isspace():
                piece_end -= 1
            if piece_end > s:
                spans.append((s, piece_end))
            s = cut
            while s < e and text[s].isspace():
                s += 1
        if e > s:
            spans.append((s, e))
    return spans


def split_sentences(text: str) -> list[tuple[int, int]]:
    """The sentences the scorer works on: calypso.text.sentences spans, run-ons of over 600 characters cut."""
    return _spans(text or "")


def _terms(text: str, fallback: str = "en") -> list[str]:
    """Content stems of ``text`` in order; the analyzer makes runs of CJK characters character bigrams.
    ``fallback``: the language when ``text`` alone does not tell (a short sentence)."""
    return _ANALYZER.tokenize(text, fallback)


def content_stems(text: str, fallback: str = "en") -> list[str]:
    """The content stems the scorer compares (stop words out, each language stemmed, CJK as bigrams)."""
    return _terms(text, fallback)


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


_NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
        "seventeen eighteen nineteen twenty".split()
    )
} | {
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "seventy": "70",
    "eighty": "80",
    "ninety": "90",
    "hundred": "100",
    "thousand": "1000",
    "dozen": "12",
}
_WORDS = re.compile(r"[a-z]+")


def _spelled_numbers(text: str) -> set[str]:
    """The numbers a text spells out ("seven bear skulls"): a claim may write them as digits."""
    return {_NUMBER_WORDS[w] for w in _WORDS.findall(text.lower()) if w in _NUMBER_WORDS}


def _has_negation(text: str) -> bool:
    lower = text.lower()
    if _NEG_WORD.search(lower) is not None:
        return True
    # Chinese and Japanese negate with a character (礼品卡一律不予退款), Japanese also with ない/ません, Korean
    # with 않/못; none of these occurs in English text, whose scores stay as fitted.
    if not text.isascii() and _NEG_CJK.search(text) is not None:
        return True
    # German, French, Spanish … negations, only in text of those languages ("nie" and "pas" are not English).
    return _NEG_OTHER.search(lower) is not None and detect(text, "en") != "en"


def _clean_claim(claim: str) -> str:
    """Drop citation markers ([3], [1, 2]) and a leading list marker from a segment."""
    return _LIST_MARK.sub("", _CITATION_MARK.sub(" ", claim)).strip()


class Analysis:
    """Everything the score and the span choice need about one (claim, passage) pair."""

    __slots__ = ("best", "features", "semantic", "spans", "substituted")

    def __init__(self, claim: str, passage: str, window: int, embedder: Embedder | None = None) -> None:
        claim = _clean_claim(claim)
        self.spans = _spans(passage)
        sentences = [passage[s:e] for s, e in self.spans]
        # A short sentence does not tell its language ("308 Punkte gab die Verteidigung der Panthers ab." has no
        # German stop word the detector counts): it and the passage's sentences are read in the passage's, so
        # that both sides are stemmed alike (English stems of a German claim matched nothing).
        language = detect(passage, "en")
        claim_terms = _terms(claim, language)
        unique = list(dict.fromkeys(claim_terms))
        sentence_terms = [_terms(s, language) for s in sentences]
        sentence_sets = [set(t) for t in sentence_terms]
        n_terms = len(unique)

        # Per sentence: which claim terms it has (as a bitmask over `unique`).
        index = {t: i for i, t in enumerate(unique)}
        masks = []
        for terms in sentence_sets:
            mask = 0
            for t in terms:
                i = index.get(t)
                if i is not None:
                    mask |= 1 << i
            masks.append(mask)

        # Windows of 1..window sentences; best = most claim terms covered, shorter on ties.
        # Terms are weighted by a passage-local idf, 1 + ln(sentences / sentences with it),
        # so that a term the whole passage repeats ("bridge") locates less than one it has
        # once ("1937").
        n_sent = len(sentences)
        weights = []
        for i in range(n_terms):
            df = sum(1 for m in masks if m >> i & 1)
            weights.append(1.0 + math.log((n_sent + 1) / (df + 0.5)))
        total = sum(weights)
        coverage: dict[int, float] = {0: 0.0}  # mask -> weighted share of the claim covered
        best_by_size: dict[int, tuple[float, int, int]] = {}
        overall = (-1.0, 0, 0)
        for i in range(n_sent):
            mask = 0
            for k in range(window):
                j = i + k
                if j >= n_sent:
                    break
                mask |= masks[j]
                covered = coverage.get(mask)
                if covered is None:
                    covered = coverage[mask] = sum(w for b, w in enumerate(weights) if mask >> b & 1) / total
                value = covered - _WINDOW_PENALTY * k
                size = k + 1
                if size not in best_by_size or value > best_by_size[size][0]:
                    best_by_size[size] = (value, i, j + 1)
                if value > overall[0]:
                    overall = (value, i, j + 1)
        self.best = best_by_size  # size -> (value, first sentence, end sentence)

        _, w0, w1 = overall
        window_terms = [t for j in range(w0, w1) for t in sentence_terms[j]] if sentences else []
        window_set = set(window_terms)
        whole_set = set().union(*sentence_sets) if sentence_sets else set()

        if n_terms:
            rec_win = sum(1 for t in unique if t in window_set) / n_terms
            rec_whole = sum(1 for t in unique if t in whole_set) / n_terms
            missing = sum(1 for t in unique if t not in whole_set)
        else:
            rec_win = rec_whole = 0.0
            missing = 0
        claim_bigrams = set(itertools.pairwise(claim_terms))
        if claim_bigrams:
            window_bigrams = set(itertools.pairwise(window_terms))
            big_win = len(claim_bigrams & window_bigrams) / len(claim_bigrams)
        else:  # a one-word claim: its bigram recall is its word recall
            big_win = rec_win

        claim_numbers = _numbers(claim)
        missing_numbers = claim_numbers - _numbers(passage) - _spelled_numbers(passage)
        num_miss = len(missing_numbers) / len(claim_numbers) if claim_numbers else 0.0
        # Substitution (issue 39): a number the passage does not have (spelled out or in digits) makes another
        # claim, however many of its other words the passage shares. Names are checked in answers only
        # (citations/relevance.py): here, a rule on every capitalised word cost 3 points of balanced accuracy
        # on AttributionBench OOD and 6.6 on WiCE, a number rule nothing.
        self.substituted = sorted(missing_numbers)
        window_text = " ".join(sentences[w0:w1])
        neg_mis = float(_has_negation(claim) != _has_negation(window_text)) if sentences else 0.0

        values = {
            "rec_win": rec_win,
            "rec_whole": rec_whole,
            "big_win": big_win,
            "num_miss": num_miss,
            "neg_mis": neg_mis,
            "miss_abs": math.log1p(missing),
            "clen": math.log1p(n_terms),
        }
        self.features = values
        # The semantic feature (calypso.citations.semantic) when a model it was fitted for is given.
        self.semantic: dict[str, float] | None = None
        if n_terms and sentences and semantic.usable(embedder):
            assert embedder is not None
            self.semantic = semantic.features(embedder, claim, sentences)
            if self.semantic is not None:
                values.update(self.semantic)

    def score(self, weights: tuple[float, ...] | None = None, bias: float | None = None) -> float:
        if not self.spans or not self.features["clen"]:
            return 0.0
        names = FEATURE_NAMES
        if weights is None:
            weights, bias, names = (
                (SEMANTIC_WEIGHTS, SEMANTIC_BIAS, SEMANTIC_FEATURE_NAMES)
                if self.semantic is not None
                else (WEIGHTS, BIAS, names)
            )
        bias = BIAS if bias is None else bias
        z = bias + sum(w * self.features[name] for w, name in zip(weights, names))
        if z >= 0:
            p = 1.0 / (1.0 + math.exp(-z))
        else:
            ez = math.exp(z)
            p = ez / (1.0 + ez)
        return p * SUBSTITUTION_FACTOR if self.substituted else p


def features(claim: str, passage: str, embedder: Embedder | None = None) -> dict[str, float]:
    """The model's input features for one pair; the semantic ones too with an ``embedder`` of ``semantic.MODEL``
    (the candidates measured and left out are bench/common/attribution.py's ``candidate_features``)."""
    return dict(Analysis(claim or "", passage or "", SCORE_WINDOW, embedder).features)


def support_score(claim: str, evidence: str, embedder: Embedder | None = None, across: Embedder | None = None) -> float:
    """How well ``evidence`` supports ``claim``: a score in [0, 1]; compare with SUPPORT_THRESHOLD.

    With an ``embedder`` of ``semantic.MODEL`` the semantic feature is added (the other weights
    then apply, calibrated to the same SUPPORT_THRESHOLD); with none, or any other model, the
    score is the lexical one. ``across``: the multilingual model that judges a claim and evidence in
    different languages by meaning (``citations/crossing.py``).
    """
    if not claim or not evidence or not evidence.strip():
        return 0.0
    judged = _across(claim, evidence, across)
    if judged is not None:
        return judged.score
    return Analysis(claim, evidence, SCORE_WINDOW, embedder=embedder).score()


def _across(claim: str, passage: str, across: Embedder | None, asked_in: str = "") -> Evidence | None:
    """The evidence read by meaning when the claim and the passage are in different languages, else None."""
    if across is None or not crossing.applies(across, claim, passage, asked_in):
        return None
    spans = _spans(passage)
    judged = crossing.judge(across, _clean_claim(claim), [passage[s:e] for s, e in spans], SUPPORT_THRESHOLD)
    if judged is None:
        return None
    start, end = spans[judged.sentence]
    return Evidence(start, end, passage[start:end], judged.score)


def best_evidence(
    claim: str,
    passage: str,
    max_sentences: int = 2,
    embedder: Embedder | None = None,
    across: Embedder | None = None,
    asked_in: str = "",
) -> Evidence:
    """The passage sentence(s) that best support the claim, with the support score.

    The span is the window of at most ``max_sentences`` consecutive sentences covering the
    most content words of the claim (the first sentence when nothing matches); ``text`` is
    exactly ``passage[start:end]``. The score is ``support_score(claim, passage, embedder)``:
    it does not depend on ``max_sentences``; the span is chosen lexically either way, except across languages
    (``across``, see ``support_score``): there it is the one sentence closest in meaning. ``asked_in``: the
    question's language, taken for a claim too short to tell its own.
    """
    passage = passage or ""
    judged = _across(claim or "", passage, across, asked_in)
    if judged is not None:
        return judged
    analysis = Analysis(claim or "", passage, max(SCORE_WINDOW, max_sentences, 1), embedder=embedder)
    if not analysis.spans:
        return Evidence(0, 0, "", 0.0)
    limit = max(1, max_sentences)
    candidates = [v for size, v in analysis.best.items() if size <= limit]
    value, first, last = max(candidates, key=lambda v: (v[0], -v[1], -(v[2] - v[1])))
    if value <= 0.0:
        first, last = 0, 1
    start, end = analysis.spans[first][0], analysis.spans[last - 1][1]
    if limit <= SCORE_WINDOW:
        score = analysis.score()
    else:  # searched wider than the model's window: score with the model's own window
        score = Analysis(claim or "", passage, SCORE_WINDOW, embedder=embedder).score()
    return Evidence(start, end, passage[start:end], score)
