"""What real models write, replayed by the scripted upstream (issue 39).

The answers below are what Qwen2.5-Coder (0.5B, 1.5B) and SmolLM2 behind llama.cpp wrote about the Alps PDF
(bench/real_model.py), or the forms the issue saw them write: markers used as nouns ("According to [Source 2],
…"), markers in every shape, a correct sentence cited to the wrong source, the question's name written into
another lake's sentence, a true answer beside the question, invented sentences. Each goes through Responses
(plain and inline) and Chat Completions (numeric and source), streamed and not, over the real Alps PDF.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.services.ingestion import Upload

ARTIFACT = re.compile(
    r"\b(?:[Aa]ccording to|[Ss]ee|[Ii]n|[Ff]rom|[Aa]s)\s*[,.;:)]|\(\s*\)|\[\s*\]|\[Source|【|\(p\.\s*\d+\)"
)


@pytest.fixture
def alps(kb, data_dir: Path):
    pdf = data_dir / "alps-wiki-qa/alps_wiki.pdf"
    kb.ingest(Upload(pdf.read_bytes(), pdf.name))
    return kb


@pytest.fixture
def fake(alps):
    settings = alps.settings
    with FakeUpstream() as upstream:
        settings.llm_base_url = upstream.base_url
        settings.llm_model = "fake-model"
        settings.generator = "upstream"
        yield upstream


def _sse(http: httpx.Client, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with http.stream("POST", path, json={**body, "stream": True}) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data: {")]
    return [json.loads(line[6:]) for line in lines]


def _message(response: dict[str, Any]) -> dict[str, Any]:
    return next(item for item in response["output"] if item["type"] == "message")["content"][0]


def ask_responses(http: httpx.Client, fake: FakeUpstream, question: str, raw: str, **extra: Any) -> dict[str, Any]:
    """The Responses answer to ``question`` when the model writes ``raw``: one-shot, checked equal to streamed."""
    fake.script(Script.from_text(raw, token_size=3), Script.from_text(raw, token_size=3))
    body = {"model": "calypso-rag-agent", "input": question, **extra}
    plain = http.post("/v1/responses", json=body).json()
    streamed = _sse(http, "/v1/responses", body)[-1]["response"]
    assert _message(streamed)["text"] == _message(plain)["text"]
    assert streamed["metadata"]["_aicore"]["claims"] == plain["metadata"]["_aicore"]["claims"]
    return plain


def ask_chat(http: httpx.Client, fake: FakeUpstream, bot: str, question: str, raw: str) -> dict[str, Any]:
    fake.script(Script.from_text(raw, token_size=3), Script.from_text(raw, token_size=3))
    body = {"model": bot, "messages": [{"role": "user", "content": question}]}
    message = http.post("/v1/chat/completions", json=body).json()["choices"][0]["message"]
    chunks = _sse(http, "/v1/chat/completions", body)
    streamed = "".join((c["choices"][0]["delta"].get("content") or "") for c in chunks if c["choices"])
    assert streamed == message["content"]
    return message


NOUN_MARKERS = [
    (
        "Where have moraines accumulated?",
        "According to [Source 1], moraines accumulate at edges, center and the terminus of glaciers.",
        "According to the source, moraines accumulate at edges, center and the terminus of glaciers.",
    ),
    (
        "What may have been buried by the same prehistoric people?",
        "According to [Source 1] (p. 15), seven bear skulls from the cave may have been buried by the same "
        "prehistoric people.",
        "According to the source, seven bear skulls from the cave may have been buried by the same prehistoric people.",
    ),
    (
        "What may have been buried by the same prehistoric people?",
        "[Source 1] says that seven bear skulls from the cave may have been buried by the same prehistoric people.",
        "The source says that seven bear skulls from the cave may have been buried by the same prehistoric people.",
    ),
    (
        "What may have been buried by the same prehistoric people?",
        "As Source 1 notes, seven bear skulls from the cave may have been buried by the same prehistoric people.",
        "As the source notes, seven bear skulls from the cave may have been buried by the same prehistoric people.",
    ),
]


@pytest.mark.parametrize(("question", "raw", "expected"), NOUN_MARKERS, ids=["according", "page", "says", "as"])
def test_a_marker_used_as_a_noun_becomes_words_and_its_citation_stays_on_the_sentence(
    fake, http, question: str, raw: str, expected: str
) -> None:
    response = ask_responses(http, fake, question, raw)
    content = _message(response)
    assert content["text"] == expected
    (annotation,) = content["annotations"]
    assert annotation["_aicore"]["supported"] is True
    assert content["text"][annotation["start_index"] : annotation["end_index"]] == expected.rstrip(".")
    assert response["metadata"]["_aicore"]["grounded_sources_state"] == "available"
    inline = _message(ask_responses(http, fake, question, raw, include=["inline_citations"]))["text"]
    assert re.match(re.escape(expected.rstrip(".")) + r" ?\[\[1\]\]\(", inline), inline
    for bot, marker in (("calypso-rag-agent", "[1]"), ("source-style", "[Source ")):
        if bot == "source-style":
            http.post("/v1/bots", json={"id": bot, "marker_style": "source"})
        message = ask_chat(http, fake, bot, question, raw)
        body = message["content"].split("\n\nSources:")[0]
        assert body.startswith(expected.rstrip(".") + " " + marker) and body.endswith(".")
        assert message["citations"]


def test_every_marker_shape_a_model_writes_is_read_and_leaves_whole_prose(fake, http) -> None:
    question = "What did Celtic tribes mine from the Alps?"
    raw = (
        "Celtic tribes mined copper 【1】. They mined copper (Source 1). They mined copper [Source: alps_wiki.pdf]. "
        "They mined copper [1][2]. They mined copper [^1]. They mined copper [Source 1, p. 7]. "
        "Celtic tribes mined copper according to [1] and [2]."
    )
    response = ask_responses(http, fake, question, raw)
    text = _message(response)["text"]
    assert not ARTIFACT.search(text) and "Source" not in text and "alps_wiki" not in text, text
    assert text.count("copper") == 7 and text.endswith("according to the sources.")
    assert len(_message(response)["annotations"]) >= 7


def test_a_correct_sentence_cited_to_the_wrong_source_is_cited_to_the_right_one(fake, http) -> None:
    # Qwen2.5-Coder-1.5B wrote [Source 3] here; the sentence is on page 8 in another retrieved passage.
    raw = "Moraines accumulate at edges, center and the terminus of glaciers. [Source 3]"
    response = ask_responses(http, fake, "Where have moraines accumulated?", raw)
    (annotation,) = _message(response)["annotations"]
    assert annotation["_aicore"]["supported"] is True and annotation["_aicore"]["page_number"] == 8
    meta = response["metadata"]["_aicore"]
    assert meta["claims"]["support"] == "supported" and meta["grounded_sources_state"] == "available"
    assert [u["retrieval_number"] for u in meta["attribution"]["unsupported_citations"]] == [3]


def test_the_questions_name_written_into_another_lakes_sentence_is_not_supported(fake, http) -> None:
    raw = "Lake Garda is a crescent shaped lake crossing the Swiss border at one end. [Source 1]"
    response = ask_responses(http, fake, "Describe Lake Garda.", raw)
    meta = response["metadata"]["_aicore"]
    assert meta["claims"]["supported"] == 0 and meta["claims"]["unsupported_spans"]
    assert meta["grounded_sources_state"] == "missing"
    assert _message(response)["text"].startswith("Lake Garda is a crescent")  # kept, and marked


def test_a_number_the_passage_does_not_give_is_not_supported(fake, http) -> None:
    raw = "Edward Whymper reached the top of the Matterhorn in 1869."
    response = ask_responses(http, fake, "What year did Edward Whymper reach the top of the Matterhorn?", raw)
    claims = response["metadata"]["_aicore"]["claims"]
    assert claims["supported"] == 0 and response["metadata"]["_aicore"]["grounded_sources_state"] == "missing"
    right = ask_responses(
        http,
        fake,
        "What year did Edward Whymper reach the top of the Matterhorn?",
        "Edward Whymper reached the top of the Matterhorn in 1865.",
    )
    assert right["metadata"]["_aicore"]["claims"]["support"] == "supported"


def test_a_true_answer_beside_the_question_is_not_found(fake, http) -> None:
    raw = "The Brenner Pass separates the Ötztal Alps and Zillertal Alps."
    response = ask_responses(http, fake, "Which mountain range separates France from Spain?", raw)
    meta = response["metadata"]["_aicore"]
    assert meta["claims"]["support"] == "supported"  # true, and cited
    assert meta["claims"]["answers_question"] is False and meta["grounded_sources_state"] == "missing"
    assert _message(response)["text"] == raw  # the model's text is kept; the state says it does not answer
    chat = ask_chat(http, fake, "calypso-rag-agent", "Which mountain range separates France from Spain?", raw)
    assert chat["_aicore"]["grounded_sources_state"] == "missing"


def test_a_quantity_question_needs_a_number(fake, http) -> None:
    raw = "The Grossglockner is a mountain in the Alps."
    response = ask_responses(http, fake, "How high is the Grossglockner?", raw)
    assert response["metadata"]["_aicore"]["grounded_sources_state"] == "missing"


def test_invented_answers_are_missing_and_flagged(fake, http) -> None:
    raw = (
        "Lake Garda is a large, freshwater lake located in the south-eastern part of the island of Ireland. "
        "It is a popular tourist destination in Ireland."
    )
    response = ask_responses(http, fake, "Describe Lake Garda.", raw)
    meta = response["metadata"]["_aicore"]
    assert meta["grounded_sources_state"] == "missing"
    assert meta["claims"]["supported"] == 0 and len(meta["claims"]["unsupported_spans"]) == 2


def test_a_correct_answer_stays_grounded(fake, http) -> None:
    raw = "The Frankish expansion and the Bavarian expansion introduced feudalism and the building of castles."
    response = ask_responses(http, fake, "What did the Frankish expansion and the Bavarian expansion introduce?", raw)
    meta = response["metadata"]["_aicore"]
    assert meta["claims"]["support"] == "supported" and meta["claims"]["answers_question"] is True
    assert meta["grounded_sources_state"] == "available"


ZH_TEXT = (
    "锣鼓经\n\n锣鼓经是大陆传统器乐及戏曲里面常用的打击乐记谱方法。锣鼓经常用的节奏型称为「锣鼓点」。"
    "以中文字的声音模拟敲击乐的声音，纪录打击乐的各种不同的演奏方法。\n"
)


def test_a_chinese_answer_with_its_marker_used_as_a_noun(alps, fake, http) -> None:
    alps.ingest(Upload(ZH_TEXT.encode("utf-8"), "luogujing.txt"))
    question = "锣鼓经常用的节奏型称为什么？"
    raw = "根据【1】，锣鼓经常用的节奏型称为「锣鼓点」。"
    response = ask_responses(http, fake, question, raw)
    content = _message(response)
    assert content["text"] == "根据资料，锣鼓经常用的节奏型称为「锣鼓点」。"
    (annotation,) = content["annotations"]
    assert annotation["_aicore"]["supported"] is True and annotation["filename"] == "luogujing.txt"
    assert response["metadata"]["_aicore"]["grounded_sources_state"] == "available"
    assert fake.requests[-1]["messages"][0]["content"].endswith(
        "The question is in Chinese: write your answer in Chinese."
    )
    message = ask_chat(http, fake, "calypso-rag-agent", question, raw)
    assert message["content"].startswith("根据资料，锣鼓经常用的节奏型称为「锣鼓点」[1]。")


def test_a_second_turn_is_checked_as_the_first(fake, http) -> None:
    first = ask_responses(
        http,
        fake,
        "Where was Otzi the Iceman discovered?",
        "According to [Source 1], Ötzi was discovered by hikers on the Similaun glacier.",
    )
    assert _message(first)["text"].startswith("According to the source, Ötzi was discovered")
    raw = "The Zugspitze was first climbed in 1938. [Source 1]"
    fake.script(Script.from_text(raw, token_size=3))
    second = http.post(
        "/v1/responses",
        json={
            "model": "calypso-rag-agent",
            "input": "When was the Zugspitze first climbed?",
            "previous_response_id": first["id"],
        },
    ).json()
    meta = second["metadata"]["_aicore"]
    assert meta["grounded_sources_state"] == "missing" and meta["claims"]["supported"] == 0
    assert fake.requests[-1]["messages"][-2]["role"] == "assistant"  # the first turn went with it
