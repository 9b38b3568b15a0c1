"""Identifier-like terms in a query: the codes, numbers and sections people search for by their exact form.

Form numbers ("Form 1041"), command and error codes ("CC TXMOD", "CFOL007", "E0x80070005"), statute sections
("§ 1983", "28 U.S.C. § 1332", "§ 823 BGB"), case numbers ("No. 19-1392", "（2019）京01民终1234号") and dotted
section numbers ("2.3.59") name one thing: a passage that holds the code is about it, a passage whose meaning
is close is not. ``identifiers`` finds them as written; whether one is rare enough in a knowledge base to
earn weight in fusion is decided there (``retrieval.hybrid``), by its terms' idf.
"""

from __future__ import annotations

import re

from calypso.retrieval.query import QUERY_FUNCTION_WORDS
from calypso.text.english import STOPWORDS_EN

_CJK = "\u3400-\u4dbf\u4e00-\u9fff"
# Longest forms first: a case number or a section swallows the numbers inside it.
_PATTERNS = (
    # A Chinese court's case number: (year) court + docket kind + number 号.
    rf"[（(]\s*\d{{4}}\s*[）)]\s*[{_CJK}]{{1,8}}\d*[{_CJK}]{{1,8}}\d+\s*号",
    # "No. 19-1392", "No. 07-1315": a docket number after "No."
    r"\bNo\.?\s*\d+(?:[-–]\w+)+",
    # "§ 1983", "§§ 1322", "§ 39.13", "§ 1302(b)(1)", "§ 823"
    r"§§?\s*\d+[\w.]*(?:\(\w+\))*",
    # "2.3.59", "2.3.59-51": section and exhibit numbers with two dots or more (one dot is a decimal: "0.5 mg")
    r"(?<![\w.])\d+(?:\.\d+){2,}(?:[-–]\d+)?(?![\w.])",
    # A word of letters and digits, maybe joined by hyphens or slashes: "1041A", "CFOL007", "IL-10", "W-2",
    # "H3K4me3", "FAA-2020-0746", "19-1392"; or a number of three digits or more ("1041"), not "1,000".
    r"(?<![\w.,])[^\W_]+(?:[-–/][^\W_]+)*(?![\w]|[.,]\d)",
)
_FINDER = re.compile("|".join(f"({p})" for p in _PATTERNS))
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th|s)", re.IGNORECASE)  # "15th", "1990s": not codes
_ORDINARY = STOPWORDS_EN | QUERY_FUNCTION_WORDS


def _is_code(word: str) -> bool:
    """A word (hyphen- or slash-joined parts) that reads as a code rather than an ordinary word."""
    if _ORDINAL.fullmatch(word):
        return False
    digits = any(c.isdigit() for c in word)
    letters = any(c.isalpha() for c in word)
    if digits and letters:
        return True
    if digits:  # "1041", "19-1392": a number of three digits or more, or numbers joined
        return len(word) >= 3
    # Letters only: an all-caps code of two letters or more ("BMF", "TXMOD", "BGB") that is not a word
    # written in capitals ("THE", "WHAT").
    return word.isupper() and sum(c.isalpha() for c in word) >= 2 and word.lower() not in _ORDINARY


def identifiers(query: str) -> list[str]:
    """The identifier-like terms of ``query`` as written, in order, each once."""
    found: list[str] = []
    for match in _FINDER.finditer(query):
        text = match.group().strip()
        if match.lastindex == len(_PATTERNS) and not _is_code(text):
            continue
        if text not in found:
            found.append(text)
    return found
