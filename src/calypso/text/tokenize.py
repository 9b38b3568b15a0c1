"""Text analysis for keyword retrieval: lowercase, word regex, stopwords, Snowball stemming, per language.

The default analyzer is the pipeline bm25s uses (sklearn-style ``\\b\\w\\w+\\b`` tokens,
Lucene's English stop set removed before stemming, Snowball English stems); it is what
SciFact quality was tuned on (see bench/retrieval_quality.py).
"""

from __future__ import annotations

import operator
import re
import threading
import unicodedata
from collections.abc import Iterable
from functools import cache
from itertools import chain

import Stemmer

from calypso.text import languages
from calypso.text.english import STOPWORDS_EN, STOPWORDS_EN_EXTENDED
from calypso.text.languages import BIGRAM_SCRIPTS, LANGUAGES

# One regex for both settings: `\w+` is ~40% faster than `\b\w\w+\b`; with min_len=2
# the cache maps one-character tokens to "" instead, which gives the same terms.
_WORD_RE = re.compile(r"\w+")
_MAX_CACHE = 2_000_000  # bound the stem cache: number-like tokens never stop coming
_BIGRAM_RUN = re.compile(f"([{BIGRAM_SCRIPTS}]+)")


@cache
def _word_re() -> re.Pattern[str]:
    """Words of any script: ``\\w`` misses combining marks (Devanagari vowel signs, Hebrew points),
    which would cut "हिन्दी" into three one-letter tokens; the marks' ranges are read off unicodedata."""
    marks, start, previous = [], -1, -1
    for cp in range(0x300, 0x10000):
        if unicodedata.category(chr(cp))[0] == "M":
            if start < 0:
                start = cp
            previous = cp
        elif start >= 0:
            marks.append(f"{chr(start)}-{chr(previous)}")
            start = -1
    return re.compile(f"[\\w{''.join(marks)}]+")


def words_of(text: str) -> list[str]:
    """The words of ``text`` in any script, combining marks included."""
    return _word_re().findall(text) if not text.isascii() else _WORD_RE.findall(text)


def bigrams(run: str) -> list[str]:
    """The overlapping character pairs of a run of CJK (or Thai…) text, as Lucene's CJKBigramFilter
    makes them; a lone character stays a unigram."""
    if len(run) < 2:
        return [run]
    return list(map(operator.add, run, run[1:]))  # in C: a third faster than slicing in a comprehension


# Full-width ASCII and half-width katakana ("ＡＢＣ１２３", "ｶﾀｶﾅ"), folded as NFKC folds them.
_WIDTH_FORMS = re.compile("[\uff01-\uff5e\uff66-\uff9f]+")


def _nfkc(match: re.Match[str]) -> str:
    return unicodedata.normalize("NFKC", match.group())


class _StemCache(dict[str, str]):
    """token -> stem ('' for stopwords), filled on first sight.

    A dict subclass with ``__missing__`` lets the hot loop stay in C
    (``map(cache.__getitem__, tokens)``); only unseen tokens call the stemmer.
    """

    def __init__(self, stemmer: Stemmer.Stemmer | None, stopwords: frozenset[str], min_len: int) -> None:
        super().__init__()
        self._stemmer = stemmer
        self._stopwords = stopwords
        self._min_len = min_len
        self._lock = threading.Lock()  # PyStemmer objects are not thread-safe

    def __missing__(self, token: str) -> str:
        if token in self._stopwords or len(token) < self._min_len:
            stem = ""
        elif self._stemmer is None:
            stem = token
        else:
            with self._lock:
                stem = self._stemmer.stemWord(token)
        if len(self) >= _MAX_CACHE:
            self.clear()
        self[token] = stem
        return stem


class Analyzer:
    """Configurable, language-aware tokenizer; ``Analyzer()`` is the default used by :func:`tokenize`.

    Each text is analysed by its own language (``text.languages.detect``): English as before
    (``stopwords``, Snowball English), another language with its own stop words and Snowball stemmer,
    runs of CJK (and Thai, Lao, Khmer, Myanmar) characters as character bigrams. Non-ASCII text is
    NFKC-normalised first (full-width "ＡＢＣ１２３" is "abc123").

    Args:
        stopwords: English tokens dropped before stemming (lowercased surface forms); other languages
            drop their own list, plus these words when ``extra_stopwords``.
        stem: apply Snowball stemming (PyStemmer).
        min_len: 2 keeps words of two or more characters (drops "a", "5"); 1 keeps all. CJK unigrams stay.
        extra_stopwords: also drop ``stopwords`` in other languages' text (the English words a German
            passage quotes), for the support scorer's content words.
    """

    def __init__(
        self,
        stopwords: Iterable[str] = STOPWORDS_EN,
        stem: bool = True,
        min_len: int = 2,
        extra_stopwords: bool = False,
    ) -> None:
        if min_len not in (1, 2):
            raise ValueError("min_len must be 1 or 2")
        self.stopwords = frozenset(stopwords)
        self.stem = stem
        self.min_len = min_len
        self._extra = self.stopwords if extra_stopwords else frozenset()
        self._findall = _WORD_RE.findall
        self._caches: dict[str, _StemCache] = {}
        self._lock = threading.Lock()
        self._cache = self._stems("en")

    def _stems(self, code: str) -> _StemCache:
        """The stem cache of one language, made on first use."""
        found = self._caches.get(code)
        if found is not None:
            return found
        with self._lock:
            if code not in self._caches:
                language = LANGUAGES.get(code)
                algorithm = language.stemmer if language is not None and self.stem else None
                stop = self.stopwords if code == "en" else languages.stopwords(code) | self._extra
                stemmer = Stemmer.Stemmer(algorithm) if algorithm else None
                self._caches[code] = _StemCache(stemmer, stop, self.min_len)
            return self._caches[code]

    def __call__(self, text: str) -> list[str]:
        return self.tokenize(text)

    def analyze(self, text: str, fallback: str = "en") -> tuple[str, list[str]]:
        """(language code, analysed terms in order, duplicates kept) of ``text``; ``fallback`` is the
        language of a text too short to tell (a query: the knowledge base's most common language)."""
        if text.isascii():
            words = self._findall(text.lower())
            code = languages.latin_language(words) or fallback
            return code, list(filter(None, map(self._stems(code).__getitem__, words)))
        if _BIGRAM_RUN.search(text) is None:
            if not unicodedata.is_normalized("NFKC", text):
                text = unicodedata.normalize("NFKC", text)
            return self._analyze_words(text.lower(), fallback)
        # CJK text is not normalised whole (NFKC cost 44 µs of a 520-character Chinese passage, for its
        # full-width punctuation): only its full-width letters, digits and kana are.
        return self._analyze_cjk(_WIDTH_FORMS.sub(_nfkc, text).lower(), fallback)

    def _analyze_words(self, lower: str, fallback: str) -> tuple[str, list[str]]:
        """A text without CJK: the words of one language."""
        sample = lower[: languages.SCRIPT_SAMPLE_CHARS]
        scripts = languages.script_counts(sample)
        code = languages.script_language(scripts, sample)
        findall = _word_re().findall if scripts.keys() & languages.MARK_SCRIPTS else self._findall
        words = findall(lower)
        code = code or languages.latin_language(words) or fallback
        return code, list(filter(None, map(self._stems(code).__getitem__, words)))

    def _analyze_cjk(self, lower: str, fallback: str) -> tuple[str, list[str]]:
        pieces = _BIGRAM_RUN.split(lower)
        runs = pieces[1::2]
        found = languages.bigram_language(lower, sum(map(len, runs)))
        # Words between the CJK runs: English in a CJK text (the names it quotes), else the text's language
        # (a German passage that quotes a Chinese name). In order: the support scorer reads adjacent pairs.
        findall = _word_re().findall
        words = [findall(piece) if piece else [] for piece in pieces[::2]]
        code = found or languages.latin_language(list(chain.from_iterable(words))) or fallback
        get = self._stems("en" if found else code).__getitem__
        terms: list[str] = []
        for between, run in zip(words, runs):
            terms.extend(filter(None, map(get, between)))
            terms.extend(bigrams(run))
        terms.extend(filter(None, map(get, words[-1])))
        return code, terms

    def tokenize(self, text: str, fallback: str = "en") -> list[str]:
        """Analysed terms of ``text``, in order, duplicates kept (term frequency counts)."""
        return self.analyze(text, fallback)[1]

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Batch form of :meth:`tokenize`."""
        analyze = self.analyze
        return [analyze(t)[1] for t in texts]

    def __repr__(self) -> str:
        sw = "lucene" if self.stopwords == STOPWORDS_EN else f"{len(self.stopwords)} words"
        return f"Analyzer(stopwords={sw}, stem={self.stem}, min_len={self.min_len})"


DEFAULT_ANALYZER = Analyzer()
# Stored terms carry this tag; change it whenever the default analyzer's output changes,
# so terms written by an older analyzer are re-derived from the text instead of trusted.
# a1: English for every text. a2: each text by its language, CJK bigrams, NFKC.
ANALYZER_VERSION = "a2"


def tokenize(text: str) -> list[str]:
    """Analyze ``text`` with the default analyzer: its language's words (English: lowercase, words of >= 2
    characters, Lucene English stopwords removed, Snowball English stems), CJK as character bigrams."""
    return DEFAULT_ANALYZER.tokenize(text)


def tokenize_many(texts: Iterable[str]) -> list[list[str]]:
    """:func:`tokenize` over many texts (bulk loading)."""
    return DEFAULT_ANALYZER.tokenize_many(texts)


def analyze_many(texts: Iterable[str]) -> list[tuple[str, list[str]]]:
    """(language, terms) of each text with the default analyzer: what ingestion stores."""
    analyze = DEFAULT_ANALYZER.analyze
    return [analyze(t) for t in texts]


def encode_terms(terms: list[str], language: str = "en") -> str:
    """Terms as stored beside a chunk: the analyzer version, the passage's language, the terms."""
    # Terms are word characters only (a CJK bigram too), so a space joins them unambiguously.
    return f"{ANALYZER_VERSION} {language} " + " ".join(terms)


def decode_terms(stored: str | None) -> list[str] | None:
    """Stored terms, or None when absent or written by another analyzer version (re-tokenise then)."""
    if not stored:
        return None
    version, _, rest = stored.partition(" ")
    if version != ANALYZER_VERSION:
        return None
    joined = rest.partition(" ")[2]
    return joined.split(" ") if joined else []


def decode_language(stored: str | None) -> str | None:
    """The passage language stored with its terms (None when absent or of another analyzer version)."""
    if not stored:
        return None
    version, _, rest = stored.partition(" ")
    return rest.partition(" ")[0] or None if version == ANALYZER_VERSION else None


__all__ = [
    "ANALYZER_VERSION",
    "DEFAULT_ANALYZER",
    "STOPWORDS_EN",
    "STOPWORDS_EN_EXTENDED",  # re-exported: callers choose their stop list here
    "Analyzer",
    "analyze_many",
    "bigrams",
    "decode_language",
    "decode_terms",
    "encode_terms",
    "tokenize",
    "tokenize_many",
    "words_of",
]
