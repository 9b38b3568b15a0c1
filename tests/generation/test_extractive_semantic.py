"""The extractive answerer with the real embedding model: sentences chosen by meaning too (issue 12).

The model is the local int8 MiniLM (no mock of it); an embedder that fails is a real HTTP embeddings
client pointed at a loopback port nobody listens on.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence

import pytest

from calypso.citations.composer import AnswerComposer
from calypso.citations.grounded import GroundedAnswer, Quote, Source
from calypso.citations.support import best_evidence
from calypso.config import Settings
from calypso.embeddings import CachedEmbedder, MemoryVectorCache, OpenAIEmbedder
from calypso.embeddings.local_onnx import LocalOnnxEmbedder
from calypso.embeddings.serve_embeddings import EmbeddingsServer
from calypso.generation.base import GenerationRequest, TextDelta
from calypso.generation.extractive import NOT_FOUND, ExtractiveGenerator, select_sentences
from calypso.generation.sentence_pick import SEMANTIC_WEIGHT, SentenceSimilarity, pick_sentences
from calypso.generation.similarity import EmbeddingSimilarity
from calypso.models import Chunk, Document, Passage
from testkit.live_server import free_port

QUESTION = "What do ducks eat?"
# The answer shares no content word with the question ("duck", "eat"); nor does anything else here.
ANSWER = "Mallards feed mostly on pondweed, seeds and small snails."
PARK = f"{ANSWER} The park opens at nine every morning. Entry to the gardens is free on Sundays."


def _passage(text: str) -> Passage:
    document = Document("doc0", "file-0", "default", "general", "d0.txt", "text/plain", 1, "x", 0, 1, 1)
    return Passage(document, Chunk(0, text, 0, len(text), 1, 1, ("1",)), 1.0)


def _answer(question: str, passages: list[Passage], similarity: SentenceSimilarity | None) -> GroundedAnswer:
    """The generator through the composer, as ``Answerer.stream`` runs it."""

    def find_quote(segment: str, source: Source) -> Quote:
        ev = best_evidence(segment, source.passage.chunk.text)
        return Quote(ev.text, ev.start, ev.end, ev.start, ev.end, 1, "1", ev.score, ev.score > 0.3)

    async def run() -> GroundedAnswer:
        composer = AnswerComposer([Source(i, p) for i, p in enumerate(passages, 1)], find_quote)
        request = GenerationRequest(messages=[], passages=passages, question=question)
        async for event in ExtractiveGenerator(similarity=similarity).stream(request):
            if isinstance(event, TextDelta):
                composer.feed(event.text)
        composer.flush()
        return composer.finish(generator="extractive")

    return asyncio.run(run())


def test_a_sentence_sharing_no_word_with_the_question_is_found_only_with_the_model(
    minilm: LocalOnnxEmbedder,
) -> None:
    assert select_sentences(QUESTION, [_passage(PARK)]) == []
    assert _answer(QUESTION, [_passage(PARK)], None).text == NOT_FOUND

    similarity = EmbeddingSimilarity(minilm)
    assert select_sentences(QUESTION, [_passage(PARK)], similarity) == [(1, 0, ANSWER)]
    answer = _answer(QUESTION, [_passage(PARK)], similarity)
    assert answer.text == ANSWER
    (segment,) = answer.segments
    assert segment.text == ANSWER and [c.retrieval_number for c in segment.citations] == [1]


def test_meaning_reorders_sentences_that_share_the_same_words(minilm: LocalOnnxEmbedder) -> None:
    # Both name ducks once; only one says what they eat.
    text = "Ducks dabble for duckweed and water snails in ponds. Ducks were painted by many Dutch artists."
    assert pick_sentences(QUESTION, [_passage(text)])[0].text.startswith("Ducks were painted")  # words alone
    picked = pick_sentences(QUESTION, [_passage(text)], similarity=EmbeddingSimilarity(minilm))
    assert picked[0].text == "Ducks dabble for duckweed and water snails in ponds."


def test_the_question_and_seen_sentences_come_from_the_cache(minilm: LocalOnnxEmbedder) -> None:
    cached = CachedEmbedder(minilm, MemoryVectorCache())
    cached.embed([QUESTION])  # what search does with the query before the answer is written
    similarity = EmbeddingSimilarity(cached)
    first = similarity(QUESTION, ["Mallards feed mostly on pondweed.", "The park opens at nine."])
    assert cached.embedded == 3  # the question once (by search), then the two sentences in one call
    again = similarity(QUESTION, ["Mallards feed mostly on pondweed.", "The park opens at nine."])
    assert cached.embedded == 3  # nothing new
    assert first is not None and again is not None
    assert first == again
    assert first[0] > first[1] and all(0 <= r <= 1 for r in first)


def test_an_embedder_that_fails_leaves_the_words_to_choose(caplog: pytest.LogCaptureFixture) -> None:
    down = OpenAIEmbedder(f"http://127.0.0.1:{free_port()}/v1", "minilm", dimension=384, max_retries=0, timeout=2)
    similarity = EmbeddingSimilarity(down, retry_after=60)
    text = "Ducks live near water. Ducks eat aquatic plants, small fish, insects and snails."
    with caplog.at_level(logging.WARNING, logger="calypso.generation"):
        answer = _answer(QUESTION, [_passage(text)], similarity)
    assert answer.text == _answer(QUESTION, [_passage(text)], None).text
    assert "Ducks eat aquatic plants" in answer.text and all(s.citations for s in answer.segments)
    assert similarity.failures == 1
    assert "choosing them by words only" in caplog.text and "Cannot reach the embeddings server" in caplog.text
    # Within the pause the server is not asked again: no second failure, the same answer.
    assert select_sentences(QUESTION, [_passage(text)], similarity) == select_sentences(QUESTION, [_passage(text)])
    assert similarity.failures == 1
    down.close()


def test_weight_zero_never_asks_the_model() -> None:
    asked: list[Sequence[str]] = []

    def similarity(question: str, sentences: Sequence[str]) -> list[float]:
        asked.append(sentences)
        return [1.0] * len(sentences)

    picked = pick_sentences(QUESTION, [_passage(PARK)], similarity=similarity, semantic_weight=0)
    assert picked == [] and asked == []
    pick_sentences(QUESTION, [_passage(PARK)], similarity=similarity)
    assert len(asked) == 1 and len(asked[0]) == 3  # every candidate, in one call


def test_a_hung_embeddings_server_does_not_hold_the_answer(caplog: pytest.LogCaptureFixture) -> None:
    # A real socket on loopback that accepts connections and never answers.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        hung = OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "minilm", dimension=384, max_retries=0, timeout=30)
        similarity = EmbeddingSimilarity(hung, timeout=0.3)
        text = "Ducks live near water. Ducks eat aquatic plants, small fish, insects and snails."
        with caplog.at_level(logging.WARNING, logger="calypso.generation"):
            picked = select_sentences(QUESTION, [_passage(text)], similarity)
        # Answered by words while the server still holds the request (its client would wait 30 s).
        assert picked == select_sentences(QUESTION, [_passage(text)])
        assert "did not answer within 0.3 s" in caplog.text and similarity.failures == 1
        similarity.close()
    hung.close()


def test_the_server_default_weight_is_the_tuned_one() -> None:
    assert Settings().extractive_semantic_weight == SEMANTIC_WEIGHT


def test_through_an_openai_compatible_embeddings_server(minilm: LocalOnnxEmbedder) -> None:
    # The HTTP backend against a real /v1/embeddings server on loopback serving the same model.
    with EmbeddingsServer(minilm, model="minilm") as server:
        client = OpenAIEmbedder(server.base_url, "minilm", batch_size=64)
        try:
            picked = select_sentences(QUESTION, [_passage(PARK)], EmbeddingSimilarity(client))
        finally:
            client.close()
        assert picked == [(1, 0, ANSWER)]
        # One request: the question and the three candidate sentences together.
        assert len(server.requests) == 1 and server.requests[0]["input"][0] == QUESTION
        assert len(server.requests[0]["input"]) == 4
