"""The built-in extractive answerer: quotes the retrieved sentences that best answer the question.

It needs no model, never invents anything, and cites every sentence it
quotes with ``[Source N]``, so the embedded default always answers grounded.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Collection

from calypso.generation.base import Finish, GenerationEvent, GenerationRequest, Generator, TextDelta, Usage
from calypso.models import Passage
from calypso.retrieval.tokenize import tokenize
from calypso.text.sentences import sentence_spans

NOT_FOUND = "I could not find anything about this in the knowledge base."
MAX_SENTENCES = 3
MAX_CHARS = 700
MIN_SENTENCE_CHARS = 25
# Questions that want a quantity, date or duration are best answered by sentences with a number in them.
_WANTS_NUMBER = re.compile(
    r"\b(how (long|many|much|often|old|far|soon)|when|what (time|year|date)|which (year|date))\b", re.I
)
_HAS_NUMBER = re.compile(r"\d")


def _clean(sentence: str) -> str:
    # Headings and list bullets are quoted as plain sentences; internal line breaks become spaces.
    text = " ".join(sentence.split())
    return text.lstrip("#-*• ").strip()


def select_sentences(question: str, passages: list[Passage]) -> list[tuple[int, int, str]]:
    """(source number, position in passage, sentence) of the best sentences, best first."""
    query = set(tokenize(question))
    if not query:
        return []
    wants_number = bool(_WANTS_NUMBER.search(question))
    candidates = []
    for number, passage in enumerate(passages, start=1):
        text = passage.chunk.text
        for position, (start, end) in enumerate(sentence_spans(text)):
            sentence = _clean(text[start:end])
            if len(sentence) < MIN_SENTENCE_CHARS:
                continue
            terms: Collection[str] = tokenize(sentence)
            if not terms:
                continue
            hits = query.intersection(terms)
            if not hits:
                continue
            # Coverage of the question dominates; earlier-ranked passages win ties.
            score = len(hits) / len(query) + 0.15 / number + 0.05 * len(hits) / len(set(terms))
            if wants_number and _HAS_NUMBER.search(sentence):
                score += 0.2
            candidates.append((score, number, position, sentence, set(terms)))
    candidates.sort(key=lambda c: -c[0])
    if candidates:
        # Sentences far weaker than the best one are padding, not answers.
        floor = 0.6 * candidates[0][0]
        candidates = [c for c in candidates if c[0] >= floor]
    chosen: list[tuple[float, int, int, str, set[str]]] = []
    total = 0
    for candidate in candidates:
        terms = candidate[4]
        if any(len(terms & c[4]) / max(1, len(terms | c[4])) > 0.6 for c in chosen):
            continue  # near-duplicate (overlapping chunks repeat sentences)
        if chosen and total + len(candidate[3]) > MAX_CHARS:
            continue
        chosen.append(candidate)
        total += len(candidate[3])
        if len(chosen) == MAX_SENTENCES:
            break
    # Best answer first; the rest follow by relevance (chosen is already in score order).
    return [(c[1], c[2], c[3]) for c in chosen]


class ExtractiveGenerator(Generator):
    name = "extractive"

    def __init__(self, words_per_token: int = 1) -> None:
        self.words_per_token = words_per_token

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        picked = select_sentences(request.question, request.passages)
        if not picked:
            text = NOT_FOUND
        else:
            text = " ".join(f"{sentence} [Source {number}]" for number, _, sentence in picked)
        words = text.split(" ")
        for i in range(0, len(words), self.words_per_token):
            piece = " ".join(words[i : i + self.words_per_token])
            yield TextDelta(piece if i == 0 else " " + piece)
            await asyncio.sleep(0)  # let the server flush each token
        yield Finish("stop", Usage(prompt_tokens=0, completion_tokens=len(words)), model=self.name)
