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
        # Keyword only (the tests' default) and the index loaded: from memory on SQLite; on PostgreSQL driven on the
        # event loop too, its reads awaited (test_postgres_searches_await_their_reads_on_the_servers_event_loop).
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


def test_postgres_searches_await_their_reads_on_the_servers_event_loop(http, kb, searcher, services) -> None:
    """On PostgreSQL a search whose index is loaded is driven on the server's event loop, its reads awaited there
    through the asynchronous pool (no worker thread), with what the threaded search finds: a document filter, an
    attached file's id, Chinese and English. On SQLite the loop reads the file itself."""
    kb.ingest(Upload(_word_file(POLICY_ZH), "退款政策.docx"))
    slides = kb.ingest(
        Upload(b"Gift cards are never refundable. Shipping is paid by the customer.", "policy.txt")
    ).document
    store = http.post("/v1/vector_stores", json={"name": "policies"}).json()
    http.post(f"/v1/vector_stores/{store['id']}/files", json={"file_id": slides.file_id}).raise_for_status()
    http.post("/v1/search", json={"query": "礼品卡"}).raise_for_status()  # loads the index (on a thread)
    awaited: list[str] = []
    blocking: list[str] = []
    reads = searcher._reads
    if reads is not None:
        for name in ("document_keys", "get_passages", "file_links"):
            method = getattr(reads, name)

            async def recorded(*args, _method=method, _name=name):
                awaited.append(_name)
                return await _method(*args)

            setattr(reads, name, recorded)
    for owner, name in ((searcher.store, "get_passages"), (searcher.file_links, "file_links")):
        method = getattr(owner, name)

        def counted(*args, _method=method, _name=name, **kwargs):
            blocking.append(_name)
            return _method(*args, **kwargs)

        setattr(owner, name, counted)
    bodies = [
        {"query": "礼品卡可以退款吗？"},
        {"query": "gift cards refundable"},
        {"query": "gift cards refundable", "document_ids": [slides.id]},
    ]
    found = [http.post("/v1/search", json=body).json() for body in bodies]
    if searcher.settings.database_url:
        assert not blocking and {"get_passages", "file_links", "document_keys"} <= set(awaited)
    else:
        assert blocking and not awaited
    assert found[0]["data"][0]["filename"] == "退款政策.docx"
    assert found[1]["data"][0]["file_id"] == slides.file_id == found[2]["data"][0]["file_id"]
    assert [p["file_id"] for p in found[2]["data"]] == [slides.file_id]
    for body, answer in zip(bodies, found, strict=True):
        scope = searcher.scope(document_ids=body.get("document_ids"))
        threaded = searcher.search(body["query"], scope)  # a thread's way: the stores' blocking reads
        assert [(p["file_id"], p["score"]) for p in answer["data"]] == [
            (p.document.file_id, round(p.score, 6)) for p in threaded
        ]
