"""Asked in one language, answered and cited from documents in another, through the OpenAI SDK (issue 43).

The server runs the bundled multilingual model (the default). An English question over Chinese paragraphs
(CMRC 2018) and a Spanish question over the English Alps PDF are answered by the default answerer, which
quotes the passage in its own language and says so in the question's; and by an upstream model (the scripted
one, writing what a model asked in English writes: an English sentence citing the Chinese passage, then one
nothing supports), whose English sentence is judged supported by meaning and whose invented one is flagged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calypso.config import Settings
from calypso.embeddings import multilingual_e5
from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.services import Services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload

pytestmark = pytest.mark.skipif(not multilingual_e5.available(), reason="the 'embed' extra is not installed")

PARAGRAPHS = ("DEV_216", "DEV_1536", "DEV_1672", "TRIAL_27", "TRIAL_58", "DEV_41", "TRIAL_188", "DEV_83")
QUESTION = "In which Chinese province were the fossils of Sahaliyania found?"
MODEL_ANSWER = "Pascal Godefroit and his colleagues announced the discovery of Sahaliyania in 2008 [Source 1]."
INVENTED = "The fossils are now shown in a museum in Paris next to a complete Tyrannosaurus skeleton."


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"embedding_model": multilingual_e5.MODEL_NAME})


@pytest.fixture
def chinese(kb, services: Services, data_dir: Path) -> None:
    with (data_dir / "multilingual" / "cmrc2018-zh" / "corpus.jsonl").open(encoding="utf-8") as fh:
        rows = {row["_id"]: row for row in map(json.loads, fh) if row["_id"] in PARAGRAPHS}
    for paragraph in PARAGRAPHS:
        kb.ingest(Upload(rows[paragraph]["text"].encode("utf-8"), f"{paragraph}.txt"))
    embed_all(services.vectors)


def _annotations(response: Any) -> list[dict[str, Any]]:
    message = next(item for item in response.output if item.type == "message")
    return [a.model_dump() | (a.model_extra or {}) for a in message.content[0].annotations]


def test_an_english_question_is_answered_from_the_chinese_paragraph_and_says_so(chinese, openai_client) -> None:
    response = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION)
    assert response.output_text.startswith("The sources say this in Chinese. "), response.output_text
    cited = _annotations(response)
    assert cited and {a["filename"] for a in cited} == {"DEV_216.txt"}
    assert any("化石发现于中国黑龙江省" in a["quote"] for a in cited)  # found in Heilongjiang
    claims = response.metadata["_aicore"]["claims"] if response.metadata else None
    assert claims is not None and claims["support"] == "supported" and claims["unsupported"] == 0, claims
    assert claims["answers_question"] is True


@pytest.fixture
def english_model(chinese, settings: Settings):
    """An upstream that answers in English, as a model asked in English does, citing the Chinese passage."""
    with FakeUpstream(default=Script.from_text(f"{MODEL_ANSWER} {INVENTED}")) as upstream:
        settings.llm_base_url = upstream.base_url
        settings.llm_model = "fake-model"
        settings.generator = "upstream"
        yield upstream


def test_a_model_s_english_sentence_citing_the_chinese_passage_is_supported(english_model, openai_client) -> None:
    completion = openai_client.chat.completions.create(
        model="calypso-rag-agent", messages=[{"role": "user", "content": QUESTION}]
    )
    message = completion.choices[0].message
    core = message.model_extra["_aicore"]
    prompt = json.dumps(english_model.requests[-1]["messages"], ensure_ascii=False)
    assert "write your answer in English" in prompt and "迦得弗利兹" in prompt  # asked in English, sent the Chinese
    citations = message.model_extra["citations"]
    assert citations and citations[0]["source_filename"] == "DEV_216.txt"
    assert "2008" in citations[0]["quote"] and citations[0]["support"] >= 0.485
    annotations = message.annotations or []
    assert annotations and annotations[0].url_citation.title == "DEV_216.txt"
    span = annotations[0].url_citation
    assert message.content[span.start_index : span.end_index].endswith("Sahaliyania in 2008")  # the English sentence
    spans = core["claims"]["unsupported_spans"]
    assert [s["text"] for s in spans] == [INVENTED], core["claims"]  # the English sentence is not flagged
    assert core["claims"]["supported"] == 1


def test_a_spanish_question_over_the_english_alps_pdf(kb, services: Services, data_dir: Path, openai_client) -> None:
    pdf = data_dir / "alps-wiki-qa" / "alps_wiki.pdf"
    kb.ingest(Upload(pdf.read_bytes(), pdf.name))
    embed_all(services.vectors)
    completion = openai_client.chat.completions.create(
        model="calypso-rag-agent",
        messages=[{"role": "user", "content": "¿En qué año llegó Edward Whymper a la cima del Cervino?"}],
    )
    message = completion.choices[0].message
    assert message.content.startswith("Las fuentes lo dicen en inglés. "), message.content
    assert "Edward Whymper reached the top of the Matterhorn in 1865" in message.content
    citations = message.model_extra["citations"]
    assert citations and citations[0]["source_filename"] == "alps_wiki.pdf"
    (gold,) = [row for row in _alps_questions(data_dir) if row["qid"] == "alps-022"]  # the same question in English
    assert citations[0]["page_number"] in gold["gold_pdf_pages"]
    assert message.model_extra["_aicore"]["claims"]["unsupported"] == 0


def _alps_questions(data_dir: Path) -> list[dict[str, Any]]:
    lines = (data_dir / "alps-wiki-qa" / "alps_qa_with_pdf_pages.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]
