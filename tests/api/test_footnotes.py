"""A footnote is not a marker: "[2]" a model copies from a Wikipedia passage stays text, in every dialect."""

from __future__ import annotations

from pathlib import Path

import pytest

from calypso.citations.footnotes import is_passage_footnote
from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.services.ingestion import Upload

COPIED = (
    "A duckling is a young duck in downy plumage[1] or baby duck,[2] but in the food trade a young "
    "domestic duck is called a duckling. [Source 1]"
)


@pytest.fixture
def duck_upstream(kb, data_dir: Path):
    path = data_dir / "ingestion-docs/html/wiki_duck.html"
    kb.ingest(Upload(path.read_bytes(), path.name))
    with FakeUpstream() as upstream:
        kb.settings.llm_base_url = upstream.base_url
        kb.settings.llm_model = "fake-model"
        kb.settings.generator = "upstream"
        yield upstream


def test_copied_footnotes_are_text_in_chat(duck_upstream, http) -> None:
    duck_upstream.script(Script.from_text(COPIED, token_size=3))  # markers split across deltas
    body = {"model": "calypso-rag-agent", "messages": [{"role": "user", "content": "What is a duckling?"}]}
    message = http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
    # Numeric style: the footnotes stay as written, the model's [Source 1] becomes [1].
    assert message["content"].startswith("A duckling is a young duck in downy plumage[1] or baby duck,[2] but")
    assert len(message["citations"]) == 1 and message["citations"][0]["source_index"] == 1
    assert len(message["annotations"]) == 1


def test_copied_footnotes_are_text_in_responses(duck_upstream, openai_client) -> None:
    duck_upstream.script(Script.from_text(COPIED, token_size=5))
    response = openai_client.responses.create(model="calypso-rag-agent", input="What is a duckling?")
    content = next(o for o in response.output if o.type == "message").content[0]
    assert "downy plumage[1] or baby duck,[2] but" in content.text
    assert "[Source" not in content.text
    (annotation,) = content.annotations  # only the model's own marker cites
    assert annotation.model_extra["_aicore"]["source_index"] == 1
    search = next(o for o in response.output if o.type == "file_search_call")
    assert sum(r.attributes["cited"] for r in search.results) == 1


def test_only_the_passage_own_brackets_are_footnotes() -> None:
    passage = ["Ducks eat food sources such as grasses, aquatic plants, fish, insects.[28] Some eat fruit."]
    assert is_passage_footnote("[28]", "such as grasses, aquatic plants, fish, insects.", passage)
    assert is_passage_footnote("[28]", "such as grasses, aquatic\nplants, fish, insects. ", passage)
    assert not is_passage_footnote("[2]", "such as grasses, aquatic plants, fish, insects.", passage)
    assert not is_passage_footnote("[28]", "Ducks like bread and other things.", passage)
    assert not is_passage_footnote("[Source 28]", "aquatic plants, fish, insects.", ["fish, insects.[Source 28]"])
    assert not is_passage_footnote("[28]", "insects.", passage)  # too little context to tell
