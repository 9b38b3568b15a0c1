"""Support across languages: an answer's sentence and its passage written in different languages.

A model asked in English about a Chinese knowledge base answers in English and cites Chinese passages; the
lexical scorer (``citations/support.py``) finds no shared words there and would call every such citation
unsupported (on XQuAD's English and German translations of each other it said 2.7% of supported pairs were
supported). When the two languages differ and the search model places both (a multilingual one), support is
read from meaning instead: the sentence's best cosine to one of the passage's sentences, against a cut fitted
for that model (``bench/crosslingual_support.py``: fitted on even articles, balanced accuracy 0.959 on the odd
ones, 0.953 with the rules below; English sentences against German paragraphs and back). A number the sentence gives and the passage lacks
still makes another claim, as in one language. With a model that has no fitted cut the lexical score stands.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from calypso.embeddings.base import EmbeddingError
from calypso.text.cjk import CJK_CHARS
from calypso.text.languages import CJK_LANGUAGES, detect

if TYPE_CHECKING:
    from calypso.embeddings.base import Embedder

log = logging.getLogger("calypso.citations")

# The best-sentence cosine (both embedded as passages) at which support is as likely as not, per model: for two
# languages of one script family, and for Chinese, Japanese or Korean against the others, where the same meaning
# sits lower. e5-small: 0.8484 fitted on XQuAD's English/German translations (held out: balanced accuracy 0.959);
# 0.7842 on 48 English claims written for 12 CMRC paragraphs, two said and two not each (held out: 0.667 only,
# 58% of supported claims found supported: e5-small tells English and Chinese meaning apart far less well).
CUTS = {"multilingual-e5-small-int8": (0.8484, 0.7842)}
NUMBERS_AGREE = 0.04  # the cut lowered by this when the claim's numbers are all in the closest sentence
STEEPNESS = 40.0  # logits per unit of cosine: 0.05 above the cut reads as a clear yes
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_NUMERALS = "一二三四五六七八九十"
_CJK = re.compile(f"[{CJK_CHARS}]")


def _numbers(text: str) -> set[str]:
    # Separators differ by language (1,000.5 in English is 1.000,5 in German): compared without them.
    return {re.sub("[.,]", "", n) for n in _DIGITS.findall(text)}


def _written_numbers(text: str) -> set[str]:
    """The numbers a passage holds, its one-character Chinese numerals too ("巴黎第四区" holds the 4th)."""
    return _numbers(text) | {str(_NUMERALS.index(ch) + 1) for ch in set(text) if ch in _NUMERALS}


@dataclass(frozen=True)
class CrossEvidence:
    sentence: int  # index of the passage sentence that means the claim best
    score: float  # in [0, 1]; the support threshold is where the cosine meets the model's cut


def applies(embedder: Embedder | None, claim: str, passage: str, asked_in: str = "") -> bool:
    """Whether ``claim`` and ``passage`` are in different languages and ``embedder`` can judge them; a claim too
    short to tell its language is taken to be in ``asked_in`` (the question's, which a model answers in)."""
    if embedder is None or not claim.strip() or not passage.strip():
        return False
    try:
        if embedder.name not in CUTS:
            return False
    except EmbeddingError:
        return False
    claim_language, passage_language = detect(claim, asked_in), detect(passage, "")
    if not claim_language and passage_language:
        # Too short to tell its language ("Amarillo was originally named Oneida."), but not its script.
        return (_CJK.search(claim) is not None) != (passage_language in CJK_LANGUAGES)
    return bool(claim_language and passage_language) and claim_language != passage_language


def scripts_differ(claim: str, passage: str) -> bool:
    """One of the two is Chinese, Japanese or Korean and the other not: where e5-small reads meaning worst."""
    return (_CJK.search(claim) is not None) != (_CJK.search(passage) is not None)


def _cut(model: str, claim: str, sentences: Sequence[str]) -> float:
    same_family, cjk = CUTS[model]
    return cjk if scripts_differ(claim, " ".join(sentences)) else same_family


def judge(embedder: Embedder, claim: str, sentences: Sequence[str], threshold: float) -> CrossEvidence | None:
    """The passage sentence closest in meaning to ``claim`` and its support score; None when the model fails
    (the lexical score then stands: a citation is never lost because an optional model could not run)."""
    if not sentences:
        return None
    try:
        vectors = np.asarray(embedder.embed([claim, *sentences]), dtype=np.float32)
        cut = _cut(embedder.name, claim, sentences)
    except EmbeddingError as exc:
        log.warning("support across languages: embedding failed, lexical score only (%s)", exc)
        return None
    cosines = vectors[1:] @ vectors[0]
    best = int(np.argmax(cosines))
    numbers = _numbers(claim)
    if numbers and numbers <= _numbers(sentences[best]):
        # Every number of the claim in the sentence closest to it in meaning: on XQuAD's English/German pairs
        # 635 of 682 supported claims with numbers against 12 of 682 unsupported ones.
        cut -= NUMBERS_AGREE
    z = STEEPNESS * (float(cosines[best]) - cut) + math.log(threshold / (1.0 - threshold))
    score = 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))
    passage = " ".join(sentences)
    if numbers - _written_numbers(passage):
        score = min(score * 0.5, threshold * 0.9)  # another number: another claim, however close in meaning
    return CrossEvidence(best, score)
