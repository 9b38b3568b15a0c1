"""The built-in extractive answer over the API: each sentence carries its own annotation (issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from calypso.services.ingestion import Upload
from calypso.text.sentences import sentence_spans


@pytest.fixture
def alps_kb(kb, data_dir: Path):
    html = data_dir / "alps-wiki-qa/alps_wiki.html"
    kb.ingest(Upload(html.read_bytes(), html.name))
    return kb


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What did Celtic tribes mine from the Alps?", "copper"),
        ("When are many passes in the Alps closed?", "winter"),
    ],
)
def test_responses_extractive_answer_cites_every_sentence(alps_kb, openai_client, question, expected) -> None:
    response = openai_client.responses.create(model="calypso-rag-agent", input=question)
    message = next(item for item in response.output if item.type == "message")
    (content,) = message.content
    text = content.text
    assert expected in text and "[" not in text and "**" not in text
    spans = [(a.model_extra["start_index"], a.model_extra["end_index"]) for a in content.annotations]
    sentences = sentence_spans(text)
    # One annotation per sentence, spanning exactly that sentence: no sentence is left uncited.
    assert sorted(set(spans)) == sentences and len(spans) == len(sentences)
    for annotation in content.annotations:
        extra = annotation.model_extra
        assert extra["_aicore"]["segment_text"] == text[extra["start_index"] : extra["end_index"]]
        assert extra["file_citation"]["quote"]


def test_chat_completions_extractive_answer_is_cited(alps_kb, openai_client) -> None:
    completion = openai_client.chat.completions.create(
        model="calypso-rag-agent", messages=[{"role": "user", "content": "Who was the Carthaginian general?"}]
    )
    message = completion.choices[0].message
    assert "Hannibal" in message.content
    annotations = message.annotations or []
    assert annotations and all(a.type == "url_citation" for a in annotations)
