"""Text analysis for keyword retrieval: lowercase, word regex, stopwords, Snowball stemming.

The default analyzer is the pipeline bm25s uses (sklearn-style ``\\b\\w\\w+\\b`` tokens,
Lucene's English stop set removed before stemming, Snowball English stems); it is what
SciFact quality was tuned on (see bench/retrieval_quality.py).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

import Stemmer

# Lucene's default English stop set (also bm25s' "en"): short on purpose, as BM25's idf
# already discounts frequent words; a longer list gave no significant gain on SciFact train.
STOPWORDS_EN: frozenset[str] = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    )
)

# A longer list (NLTK-like), kept for the tuning sweep in bench/retrieval_quality.py.
STOPWORDS_EN_EXTENDED: frozenset[str] = STOPWORDS_EN | frozenset(
    (
        "i",
        "me",
        "my",
        "myself",
        "we",
        "our",
        "ours",
        "ourselves",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "he",
        "him",
        "his",
        "himself",
        "she",
        "her",
        "hers",
        "herself",
        "its",
        "itself",
        "them",
        "theirs",
        "themselves",
        "what",
        "which",
        "who",
        "whom",
        "those",
        "am",
        "were",
        "been",
        "being",
        "have",
        "has",
        "had",
        "having",
        "do",
        "does",
        "did",
        "doing",
        "because",
        "until",
        "while",
        "about",
        "against",
        "between",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
        "from",
        "up",
        "down",
        "out",
        "off",
        "over",
        "under",
        "again",
        "further",
        "once",
        "here",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "nor",
        "only",
        "own",
        "same",
        "so",
        "than",
        "too",
        "very",
        "can",
        "just",
        "should",
        "now",
        "also",
        "may",
        "might",
        "must",
        "would",
        "could",
        "shall",
    )
)

# One regex for both settings: `\w+` is ~40% faster than `\b\w\w+\b`; with min_len=2
# the cache maps one-character tokens to "" instead, which gives the same terms.
_WORD_RE = re.compile(r"\w+")
_MAX_CACHE = 2_000_000  # bound the stem cache: number-like tokens never stop coming


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
    """Configurable tokenizer; ``Analyzer()`` is the default used by :func:`tokenize`.

    Args:
        stopwords: tokens dropped before stemming (lowercased surface forms).
        stem: apply Snowball English stemming (PyStemmer).
        min_len: 2 keeps words of two or more characters (drops "a", "5"); 1 keeps all.
    """

    def __init__(self, stopwords: Iterable[str] = STOPWORDS_EN, stem: bool = True, min_len: int = 2) -> None:
        if min_len not in (1, 2):
            raise ValueError("min_len must be 1 or 2")
        self.stopwords = frozenset(stopwords)
        self.stem = stem
        self.min_len = min_len
        self._findall = _WORD_RE.findall
        stemmer = Stemmer.Stemmer("english") if stem else None
        self._cache = _StemCache(stemmer, self.stopwords, min_len)

    def __call__(self, text: str) -> list[str]:
        return self.tokenize(text)

    def tokenize(self, text: str) -> list[str]:
        """Analyzed terms of ``text``, in order, duplicates kept (term frequency counts)."""
        return list(filter(None, map(self._cache.__getitem__, self._findall(text.lower()))))

    def tokenize_many(self, texts: Iterable[str]) -> list[list[str]]:
        """Batch form of :meth:`tokenize` (binds the hot callables once)."""
        get = self._cache.__getitem__
        findall = self._findall
        return [list(filter(None, map(get, findall(t.lower())))) for t in texts]

    def __repr__(self) -> str:
        sw = "lucene" if self.stopwords == STOPWORDS_EN else f"{len(self.stopwords)} words"
        return f"Analyzer(stopwords={sw}, stem={self.stem}, min_len={self.min_len})"


DEFAULT_ANALYZER = Analyzer()
# Stored terms carry this tag; change it whenever the default analyzer's output changes,
# so terms written by an older analyzer are re-derived from the text instead of trusted.
ANALYZER_VERSION = "a1"


def tokenize(text: str) -> list[str]:
    """Analyze ``text`` with the default analyzer: lowercase, words of >= 2 characters,
    Lucene English stopwords removed, Snowball English stems."""
    return DEFAULT_ANALYZER.tokenize(text)


def tokenize_many(texts: Iterable[str]) -> list[list[str]]:
    """:func:`tokenize` over many texts (bulk loading)."""
    return DEFAULT_ANALYZER.tokenize_many(texts)


def encode_terms(terms: list[str]) -> str:
    """Terms as stored beside a chunk, tagged with the analyzer version."""
    # Terms are word characters only, so a space joins them unambiguously.
    return f"{ANALYZER_VERSION} " + " ".join(terms)


def decode_terms(stored: str | None) -> list[str] | None:
    """Stored terms, or None when absent or written by another analyzer version (re-tokenise then)."""
    if not stored:
        return None
    version, _, joined = stored.partition(" ")
    if version != ANALYZER_VERSION:
        return None
    return joined.split(" ") if joined else []
