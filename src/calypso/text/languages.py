"""Which language a text is in, and how each language is analysed for keyword search.

Detection is two cheap steps, so it can run on every passage at ingestion speed:

1. **Script.** One regex pass counts the characters of the scripts that name their language
   (Han, kana, Hangul, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai …). A script that makes up a fifth of them decides: kana means
   Japanese, Hangul Korean, Han alone Chinese; Persian letters tell Persian from Arabic.
2. **Stop words**, for Latin-script text: each language's most frequent function words
   (``stopwords/*.txt``) are counted among the first ``SAMPLE_WORDS`` words; a language wins
   with at least two hits and clearly more than any other. When nothing wins (a short query,
   a title) the caller's fallback decides: English for a passage, so English text is analysed
   exactly as before, and the knowledge base's most common language for a query.

A general language identifier (py3langid, 97 languages) measured 290-380 µs per passage here,
5-10x the whole English analysis of that passage; these two steps cost a few µs.

"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from functools import cache
from importlib import resources

from calypso.text.english import STOPWORDS_EN, STOPWORDS_EN_EXTENDED

SAMPLE_CHARS = 2000
SAMPLE_WORDS = 120
SCRIPT_SAMPLE_CHARS = 600  # enough to tell a script; per-run counting costs ~0.1 µs a word
_SCRIPT_SHARE = 0.2  # of the sampled characters: a script this common decides the language
_VIETNAMESE_SHARE = 0.02  # ... and Vietnamese's own letters this common
_MIN_HITS = 2  # stop words a non-English language needs among the sampled words
_MARGIN = 1.25  # ... and how many times English's count

# Scripts written without spaces between words: their runs are indexed as character bigrams.
BIGRAM_SCRIPTS = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f"
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff"  # Thai, Lao, Myanmar, Khmer
)

_SCRIPTS = {
    "kana": "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "hangul": "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af",
    "han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f",
    "cyrillic": "\u0400-\u04ff\u0500-\u052f",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "arabic": "\u0600-\u06ff\u0750-\u077f\ufb50-\ufdff\ufe70-\ufeff",
    "hebrew": "\u0590-\u05ff",
    "devanagari": "\u0900-\u097f",
    "armenian": "\u0530-\u058f",
    "tamil": "\u0b80-\u0bff",
    "thai": "\u0e00-\u0e7f",
    "lao": "\u0e80-\u0eff",
    "myanmar": "\u1000-\u109f",
    "khmer": "\u1780-\u17ff",
    # Latin letters only Vietnamese uses (ạ…ỹ, đ, ơ, ư): a few percent of a Vietnamese text, none elsewhere.
    "vietnamese": "\u1ea0-\u1ef9\u0110-\u0111\u01a0-\u01a1\u01af-\u01b0",
}
# One character class over every script above: a scan is one class test per character (a regex
# with a group per script cost 290 µs a passage), and each run found is named by its first character.
_SCRIPT_RUNS = re.compile(f"[{''.join(_SCRIPTS.values())}]+")


def _range_table() -> tuple[list[int], list[str]]:
    bounds: list[tuple[int, int, str]] = []
    for name, chars in _SCRIPTS.items():
        for lo, hi in re.findall(r"(.)-(.)", chars, flags=re.S):
            bounds.append((ord(lo), ord(hi), name))
    bounds.sort()
    return [lo for lo, _, _ in bounds], [name for _, _, name in bounds]


_RANGE_STARTS, _RANGE_NAMES = _range_table()
# Scripts whose words hold combining marks that ``\w`` does not match (see tokenize._word_re).
MARK_SCRIPTS = frozenset(("arabic", "hebrew", "devanagari", "tamil", "thai", "lao", "myanmar", "khmer"))
BIGRAM_SCRIPT_NAMES = frozenset(("kana", "hangul", "han", "thai", "lao", "myanmar", "khmer"))


def script_counts(text: str) -> Counter[str]:
    """Characters of each non-Latin script in ``text`` (empty for Latin-only text)."""
    counts: Counter[str] = Counter()
    for match in _SCRIPT_RUNS.finditer(text):
        run = match.group()
        counts[_RANGE_NAMES[bisect_right(_RANGE_STARTS, ord(run[0])) - 1]] += len(run)
    return counts


_SCRIPT_LANGUAGE = {
    "hangul": "ko",
    "han": "zh",
    "cyrillic": "ru",
    "greek": "el",
    "arabic": "ar",
    "hebrew": "he",
    "devanagari": "hi",
    "armenian": "hy",
    "tamil": "ta",
    "thai": "th",
    "lao": "lo",
    "myanmar": "my",
    "khmer": "km",
}
_PERSIAN_LETTERS = re.compile("[\u067e\u0686\u0698\u06af\u06a9\u06cc]")
_UKRAINIAN_LETTERS = re.compile("[\u0404\u0406\u0407\u0490\u0454\u0456\u0457\u0491]")
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class Language:
    """How one language's words become terms: its Snowball stemmer (None: words as they are)."""

    code: str  # ISO 639-1
    name: str
    stemmer: str | None  # a PyStemmer algorithm


LANGUAGES: dict[str, Language] = {
    lang.code: lang
    for lang in (
        Language("en", "English", "english"),
        Language("de", "German", "german"),
        Language("fr", "French", "french"),
        Language("es", "Spanish", "spanish"),
        Language("it", "Italian", "italian"),
        Language("pt", "Portuguese", "portuguese"),
        Language("nl", "Dutch", "dutch"),
        Language("sv", "Swedish", "swedish"),
        Language("no", "Norwegian", "norwegian"),
        Language("da", "Danish", "danish"),
        Language("fi", "Finnish", "finnish"),
        Language("hu", "Hungarian", "hungarian"),
        Language("ro", "Romanian", "romanian"),
        Language("tr", "Turkish", "turkish"),
        Language("id", "Indonesian", "indonesian"),
        Language("ca", "Catalan", "catalan"),
        Language("cs", "Czech", "czech"),
        Language("pl", "Polish", "polish"),
        Language("ru", "Russian", "russian"),
        Language("uk", "Ukrainian", None),
        Language("el", "Greek", "greek"),
        Language("ar", "Arabic", "arabic"),
        Language("fa", "Persian", "persian"),
        Language("he", "Hebrew", None),
        Language("hi", "Hindi", "hindi"),
        Language("hy", "Armenian", "armenian"),
        Language("ta", "Tamil", "tamil"),
        Language("zh", "Chinese", None),
        Language("ja", "Japanese", None),
        Language("ko", "Korean", None),
        Language("th", "Thai", None),
        Language("lo", "Lao", None),
        Language("my", "Burmese", None),
        Language("km", "Khmer", None),
        Language("vi", "Vietnamese", None),
    )
}
CJK_LANGUAGES = frozenset(("zh", "ja", "ko"))


@cache
def stopwords(code: str) -> frozenset[str]:
    """The stop words of a language (lowercased); empty where none are shipped."""
    if code == "en":
        return STOPWORDS_EN
    try:
        text = resources.files("calypso.text").joinpath("stopwords", f"{code}.txt").read_text("utf-8")
    except FileNotFoundError:
        return frozenset()
    return frozenset(word for word in text.split("\n") if word)


@cache
def _detection_table() -> tuple[dict[str, int], list[str], dict[int, tuple[int, ...]]]:
    """word -> bit mask of the Latin-script languages whose stop list has it; the languages by bit;
    each mask's language indices (English's words count for English alone)."""
    latin = ["en", "de", "fr", "es", "it", "pt", "nl", "sv", "no", "da", "fi", "hu", "ro", "tr", "id", "ca", "cs", "pl"]
    table: dict[str, int] = {}
    for bit, code in enumerate(latin):
        for word in STOPWORDS_EN_EXTENDED if code == "en" else stopwords(code):
            if len(word) > 1:
                table[word] = table.get(word, 0) | (1 << bit)
    bits = {mask: (0,) if mask & 1 else tuple(b for b in range(len(latin)) if mask >> b & 1) for mask in table.values()}
    return table, latin, bits


def script_language(counts: Counter[str], sample: str) -> str | None:
    """The language a non-Latin script names when it makes up a fifth of ``sample`` (``counts`` from
    :func:`script_counts` of it), else None."""
    if not counts:
        return None
    floor = _SCRIPT_SHARE * len(sample)
    cjk = counts["han"] + counts["kana"] + counts["hangul"]  # runs mix them: "東京は" is one run
    if cjk >= floor:
        return bigram_language(sample, cjk)
    script, count = max(
        ((s, c) for s, c in counts.items() if s not in ("han", "kana", "hangul", "vietnamese")), default=("", 0)
    )
    if count and count >= floor:
        return refine(_SCRIPT_LANGUAGE[script], sample)
    if counts["vietnamese"] >= _VIETNAMESE_SHARE * len(sample):
        return "vi"
    return None


_KANA = re.compile(f"[{_SCRIPTS['kana']}]+")
_HANGUL = re.compile(f"[{_SCRIPTS['hangul']}]+")
_HAN = re.compile(f"[{_SCRIPTS['han']}]")


def bigram_language(text: str, chars: int) -> str | None:
    """The language of a text with ``chars`` characters of bigram scripts (CJK, Thai…), when they make
    up a fifth of it; kana means Japanese, more Hangul than Han Korean."""
    if chars < _SCRIPT_SHARE * len(text):
        return None
    kana = sum(map(len, _KANA.findall(text)))
    if kana >= 0.05 * chars:
        return "ja"
    hangul = sum(map(len, _HANGUL.findall(text)))
    if hangul >= 0.5 * chars:
        return "ko"
    if _HAN.search(text) or kana or hangul:
        return "zh"
    counts = script_counts(text[:SCRIPT_SAMPLE_CHARS])  # Thai, Lao, Khmer, Myanmar (never in one run with Han)
    script = max(("thai", "lao", "myanmar", "khmer"), key=counts.__getitem__)
    return _SCRIPT_LANGUAGE[script]


def refine(code: str, text: str) -> str:
    """Persian rather than Arabic, Ukrainian rather than Russian, by the letters only they use."""
    if code == "ar" and _PERSIAN_LETTERS.search(text):
        return "fa"
    if code == "ru" and _UKRAINIAN_LETTERS.search(text):
        return "uk"
    return code


def latin_language(words: list[str]) -> str | None:
    """The Latin-script language whose stop words ``words`` (lowercased) use most; None when unclear.

    Each distinct word votes once; a word on English's list votes for English only ("in", "also", "was" are German words too), and
    one-letter words do not vote (Czech "a", French "t" and the "s" of "patient's"), so a short
    English claim is never taken for Italian because it names IL-6. Clear means at least two votes
    and more than ``_MARGIN`` times the runner-up's.
    """
    table, latin, bits = _detection_table()
    masks = Counter(
        filter(None, map(table.get, set(words[:SAMPLE_WORDS])))
    )  # distinct words: "pro- and pro-" is one vote
    if not masks:
        return None
    hits = [0] * len(latin)
    for mask, count in masks.items():
        for bit in bits[mask]:
            hits[bit] += count
    ranked = sorted(range(len(latin)), key=hits.__getitem__, reverse=True)
    best, second = hits[ranked[0]], hits[ranked[1]]
    if best >= _MIN_HITS and best > _MARGIN * second:
        return latin[ranked[0]]
    return None


def detect(text: str, fallback: str = "en") -> str:
    """ISO 639-1 code of the language ``text`` is written in; ``fallback`` when nothing tells."""
    sample = text[:SAMPLE_CHARS].lower()
    if not sample.isascii():
        code = script_language(script_counts(sample), sample)
        if code is not None:
            return code
    found = latin_language(_WORDS.findall(sample))
    if found is None and ("¿" in sample or "¡" in sample):
        return "es"  # Spanish alone opens a question with ¿: "¿Con qué frecuencia se debe …?" shares its words
    return found or fallback
