"""Searches run from memory on the event loop (``SearchService.runs_from_memory``) answer as the threaded ones did:
Chinese and English, a Word file and a slide deck, bad input, and an answer's second turn through the SDK."""

from __future__ import annotations

import io

import docx

from calypso.services.ingestion import Upload

POLICY_ZH = ["退款政策", "礼品卡一律不予退款，也不能兑换现金。", "运费由客户承担，除非商品在运输途中损坏。"]
DUCKS = "ingestion-docs-more/pptx/pptx_chart.pptx"  # "Quarterly Duck Survey": the numbers only in its charts


def _word_file(paragraphs: list[str]) -> bytes:
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    data = io.BytesIO()
    document.save(data)
    return data.getvalue()


def test_searches_from_memory_find_chinese_word_and_english_slides(http, kb, searcher, data_dir) -> None:
    kb.ingest(Upload(_word_file(POLICY_ZH), "退款政策.docx"))
    kb.ingest(Upload((data_dir / DUCKS).read_bytes(), "pptx_chart.pptx"))
    queries = {"礼品卡可以退款吗？": "退款政策.docx", "Quarterly Duck Survey": "pptx_chart.pptx"}
    first = {q: http.post("/v1/search", json={"query": q}).json() for q in queries}  # loads the index (a thread)
    for query, filename in queries.items():
        # Keyword only (the tests' default) and the index loaded: the event loop on SQLite, a thread on PostgreSQL.
        assert searcher.runs_from_memory(query, searcher.scope()) == (not searcher.settings.database_url)
        again = http.post("/v1/search", json={"query": query}).json()
        assert again == first[query]
        assert again["data"] and again["data"][0]["filename"] == filename
    slide = first["Quarterly Duck Survey"]["data"][0]["attributes"]
    assert slide["locator_label"].startswith("slide")


def test_bad_searches_from_memory_are_openai_errors(http, kb) -> None:
    kb.ingest(Upload(_word_file(POLICY_ZH), "退款政策.docx"))
    http.post("/v1/search", json={"query": "礼品卡"}).raise_for_status()  # the index is loaded
    cases = [
        ({"query": "   "}, "query"),
        ({"query": "礼品卡", "namespace": "Not a namespace!"}, "namespace"),
        (
            {"query": "礼品卡", "ranking_options": {"hybrid_search": {"embedding_weight": 0, "text_weight": 0}}},
            "ranking_options.hybrid_search",
        ),
    ]
    for body, param in cases:
        response = http.post("/v1/search", json=body)
        assert response.status_code == 400, body
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "invalid_request_error" and error["param"] == param
    assert http.post("/v1/search", json={"query": "礼品卡"}).json()["data"]  # nothing lost


def test_an_answers_second_turn_retrieves_from_memory_through_the_sdk(openai_client, kb, searcher) -> None:
    kb.ingest(Upload(_word_file(POLICY_ZH), "退款政策.docx"))
    messages = [{"role": "user", "content": "礼品卡可以退款吗？"}]
    first = openai_client.chat.completions.create(model="calypso-rag-agent", messages=messages)
    assert "礼品卡一律不予退款" in first.choices[0].message.content
    follow_up = "运费由谁承担？"
    assert searcher.runs_from_memory(follow_up, searcher.scope()) == (
        not searcher.settings.database_url
    )  # the index is loaded
    messages += [{"role": "assistant", "content": first.choices[0].message.content}]
    messages += [{"role": "user", "content": follow_up}]
    second = openai_client.chat.completions.create(model="calypso-rag-agent", messages=messages)
    message = second.choices[0].message
    assert "运费由客户承担" in message.content
    assert message.annotations
