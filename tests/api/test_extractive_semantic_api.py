"""The extractive answer chooses by meaning through /v1/responses when an embedding model is on (issue 12).

A live server on loopback with the real local model, asked through the official openai SDK: the
question shares no content word with its answer, so hybrid search finds the passage by its vector and
the extractive answerer quotes the one sentence that answers, cited. Keyword-only, the same server
setup says it found nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.embeddings import local_onnx
from calypso.generation.extractive import NOT_FOUND
from calypso.generation.similarity import EmbeddingSimilarity
from calypso.services import open_services
from testkit.live_server import LiveServer, free_port

QUESTION = "What do ducks eat?"
ANSWER = "Mallards feed mostly on pondweed, seeds and small snails."
PARK = f"{ANSWER} The park opens at nine every morning. Entry to the gardens is free on Sundays."


def _serve(settings: Settings) -> Iterator[openai.OpenAI]:
    services = open_services(settings)
    try:
        with LiveServer(create_app(settings, services), free_port()) as live:
            with httpx.Client(base_url=f"{live.url}/v1", timeout=60) as http:
                uploaded = http.post(
                    "documents",
                    params={"wait": "true"},
                    data={"namespace": "general"},
                    files={"file": ("park.txt", PARK)},
                )
                assert uploaded.status_code == 201, uploaded.text
                document = uploaded.json()["id"]
                deadline = time.monotonic() + 60
                while settings.embedding_model != "none":  # hybrid search needs the passage's vector in
                    progress = http.get(f"documents/{document}").json()["embeddings"]
                    if progress["status"] == "completed":
                        break
                    assert time.monotonic() < deadline, f"embeddings not done after 60 s: {progress}"
                    time.sleep(0.1)
            yield openai.OpenAI(base_url=f"{live.url}/v1", api_key="test-key", max_retries=0)
    finally:
        services.close()


@pytest.fixture
def with_model(settings: Settings) -> Iterator[openai.OpenAI]:
    if not local_onnx.available():
        pytest.skip(f"the local embedding model is not installed ({local_onnx.INSTALL_HINT})")
    model = settings.model_copy(
        update={"embedding_model": "minilm-l6-v2-int8", "generator": "extractive", "job_poll_seconds": 0.1}
    )
    yield from _serve(model)


@pytest.fixture
def words_only(settings: Settings) -> Iterator[openai.OpenAI]:
    yield from _serve(settings.model_copy(update={"embedding_model": "none", "generator": "extractive"}))


def test_responses_quote_the_sentence_that_answers_by_meaning(with_model: openai.OpenAI) -> None:
    response = with_model.responses.create(model="calypso-rag-agent", input=QUESTION)
    message = next(item for item in response.output if item.type == "message")
    (content,) = message.content
    assert content.text == ANSWER
    (annotation,) = content.annotations
    extra = annotation.model_extra or {}
    assert (extra["start_index"], extra["end_index"]) == (0, len(ANSWER))
    assert annotation.filename == "park.txt"  # type: ignore[union-attr]
    assert extra["file_citation"]["quote"] == ANSWER


def test_without_a_model_the_same_question_finds_nothing(words_only: openai.OpenAI) -> None:
    response = words_only.responses.create(model="calypso-rag-agent", input=QUESTION)
    assert response.output_text == NOT_FOUND


def test_the_server_wires_the_model_into_the_extractive_answerer(settings: Settings) -> None:
    # Unit-level view of what the two API tests show end to end: the answerer's generator holds the
    # search's own (cached) embedder, and none without a model or with the weight at 0.
    if not local_onnx.available():
        pytest.skip(f"the local embedding model is not installed ({local_onnx.INSTALL_HINT})")
    for update, wired in (
        ({"embedding_model": "minilm-l6-v2-int8"}, True),
        ({"embedding_model": "minilm-l6-v2-int8", "extractive_semantic_weight": 0.0}, False),
        ({"embedding_model": "none"}, False),
    ):
        services = open_services(settings.model_copy(update=update))
        try:
            similarity = getattr(services.answering.generator("extractive"), "similarity", None)
            assert isinstance(similarity, EmbeddingSimilarity) is wired, update
            if wired:
                assert isinstance(similarity, EmbeddingSimilarity)
                assert similarity.embedder is services.vectors.embedder
        finally:
            services.close()
