"""The built-in extractive answerer: quotes the retrieved sentences that best answer the question.

It needs no model and never invents anything. Each answer sentence is one real sentence
of a retrieved passage (``calypso.generation.sentence_pick`` chooses and cleans them),
followed by its own ``[Source N]`` marker, so the composer opens one cited segment per
sentence and every sentence of the answer is cited.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator

from calypso.generation import phrases
from calypso.generation.base import Finish, GenerationEvent, GenerationRequest, Generator, TextDelta, Usage
from calypso.generation.sentence_pick import (
    MAX_CHARS,
    MAX_SENTENCES,
    SEMANTIC_WEIGHT,
    SentenceSimilarity,
    answers_question,
    passage_language,
    pick_sentences,
)
from calypso.models import Passage
from calypso.text import languages
from calypso.text.cjk import CJK_CHARS, has_cjk

# In English; the answerer says them in the question's language (calypso.generation.phrases).
NOT_FOUND = phrases.NOT_FOUND["en"]
# Said when nothing was searched: this answerer only quotes sources, so it has nothing to say.
NO_KNOWLEDGE_BASE = phrases.NO_KNOWLEDGE_BASE["en"]

# A streamed piece of CJK text: up to two CJK characters, or a run of other non-space characters,
# each with the whitespace before it.
_CJK_PIECES = re.compile(rf"\s*(?:[{CJK_CHARS}]{{1,2}}|[^\s{CJK_CHARS}]+)|\s+$")

__all__ = ["MAX_CHARS", "MAX_SENTENCES", "NOT_FOUND", "NO_KNOWLEDGE_BASE", "ExtractiveGenerator", "select_sentences"]


def select_sentences(
    question: str,
    passages: list[Passage],
    similarity: SentenceSimilarity | None = None,
    semantic_weight: float = SEMANTIC_WEIGHT,
) -> list[tuple[int, int, str]]:
    """(source number, offset of the sentence in its passage, cleaned sentence) of the best sentences, best first;
    none when no sentence answers the question (``generation.answerability``)."""
    picked = pick_sentences(question, passages, similarity=similarity, semantic_weight=semantic_weight)
    if picked and not answers_question(question, passages, picked):
        return []  # the sentences share the question's words but do not answer it: say nothing was found
    return [(c.number, c.start, c.text) for c in picked]


def compose(picked: list[tuple[int, int, str]], language: str = "en") -> str:
    """The answer text: each sentence followed by the marker of its own source, after a sentence saying in
    which language the sources say it when that is not ``language`` (the question's); when nothing was
    picked, that nothing was found, in ``language``."""
    if not picked:
        return phrases.not_found(language)
    quotes = " ".join(f"{sentence} [Source {number}]" for number, _, sentence in picked)
    note = phrases.quoted_in(language, languages.detect(" ".join(sentence for _, _, sentence in picked), language))
    return f"{note} {quotes}" if note else quotes


def _asked(request: GenerationRequest) -> str:
    """The question, for its language: the searched query, else (nothing searched) the last user message."""
    if request.question:
        return request.question
    for message in reversed(request.messages):
        content = message.get("content")
        if message.get("role") == "user":
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts: the text ones
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            break
    return ""


class ExtractiveGenerator(Generator):
    """``similarity`` (optional) adds a semantic score to the sentence choice, weighing ``semantic_weight``
    against the lexical one (``calypso.generation.similarity.EmbeddingSimilarity``: embedding cosine)."""

    name = "extractive"

    def __init__(
        self,
        words_per_token: int = 1,
        similarity: SentenceSimilarity | None = None,
        semantic_weight: float = SEMANTIC_WEIGHT,
    ) -> None:
        self.words_per_token = words_per_token
        self.similarity = similarity
        self.semantic_weight = semantic_weight

    async def aclose(self) -> None:
        """Stop the similarity's threads, if it keeps any (``Answerer.aclose`` calls this)."""
        close = getattr(self.similarity, "close", None)
        if close is not None:
            close()

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[GenerationEvent, None]:
        language = phrases.question_language(_asked(request), passage_language(request.passages or []))
        if request.searched and self.similarity is not None:
            # A model run takes tens of milliseconds of CPU: off the event loop, so other requests go on.
            picked = await asyncio.to_thread(
                select_sentences, request.question, request.passages, self.similarity, self.semantic_weight
            )
            text = compose(picked, language)
        elif request.searched:
            text = compose(select_sentences(request.question, request.passages), language)
        else:
            text = phrases.no_knowledge_base(language)
        if has_cjk(text):
            # Chinese and Japanese have no spaces: a "word" would be a whole sentence. Stream them a
            # few characters at a time, as a model's tokens would come.
            pieces = _CJK_PIECES.findall(text)
            if "".join(pieces) != text:
                pieces = [text]
            for piece in pieces:
                yield TextDelta(piece)
                await asyncio.sleep(0)
            yield Finish("stop", Usage(prompt_tokens=0, completion_tokens=len(pieces)), model=self.name)
            return
        words = text.split(" ")
        for i in range(0, len(words), self.words_per_token):
            piece = " ".join(words[i : i + self.words_per_token])
            yield TextDelta(piece if i == 0 else " " + piece)
            await asyncio.sleep(0)  # let the server flush each token
        yield Finish("stop", Usage(prompt_tokens=0, completion_tokens=len(words)), model=self.name)
