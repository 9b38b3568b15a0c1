"""The keyword index searched from its saved files (``BM25Index.settle``; on PostgreSQL the process's own
directory) answers through the API as the in-memory one did: Chinese in a Word file and English slides, a
document added and one deleted after the save, bad input, and an answer's second turn through the SDK."""

from __future__ import annotations

import pytest
from test_search_from_memory_api import DUCKS, POLICY_ZH, _word_file

from calypso.retrieval import bm25_files
from calypso.services.ingestion import Upload

QUERIES = {"礼品卡可以退款吗？": "退款政策.docx", "Quarterly Duck Survey": "pptx_chart.pptx"}


@pytest.fixture(autouse=True)
def _small_segments_from_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_files, "_FILE_POSTINGS_MIN", 0)  # these few postings are read from the files too


def _settled(searcher) -> None:
    """Wait for the save that follows the index's build; then every segment is read from its files."""
    assert searcher.indexes.wait_saved(timeout=60)
    assert all(seg.files is not None for seg in searcher.index("general")._segs)


def test_search_from_the_files_finds_chinese_word_and_english_slides(http, kb, searcher, services, data_dir) -> None:
    zh = kb.ingest(Upload(_word_file(POLICY_ZH), "退款政策.docx")).document
    kb.ingest(Upload((data_dir / DUCKS).read_bytes(), "pptx_chart.pptx"))
    first = {q: http.post("/v1/search", json={"query": q}).json() for q in QUERIES}  # builds, then saves
    _settled(searcher)
    for query, filename in QUERIES.items():
        again = http.post("/v1/search", json={"query": query}).json()
        assert again == first[query] and again["data"][0]["filename"] == filename
    # A document added after the save (held in memory) and one deleted (its rows in the file-backed segment).
    late = kb.ingest(Upload(b"Quarterly duck counts by pond, survey of spring.", "ducks.txt")).document
    assert {p["filename"] for p in http.post("/v1/search", json={"query": "duck survey"}).json()["data"]} >= {
        "ducks.txt",
        "pptx_chart.pptx",
    }
    services.documents.delete(zh.id)
    assert http.post("/v1/search", json={"query": "礼品卡可以退款吗？"}).json()["data"] == []
    assert http.post("/v1/search", json={"query": "duck counts pond"}).json()["data"][0]["filename"] == late.filename


def test_bad_searches_on_the_files_are_openai_errors(http, kb, searcher) -> None:
    kb.ingest(Upload(_word_file(POLICY_ZH), "退款政策.docx"))
    http.post("/v1/search", json={"query": "礼品卡"}).raise_for_status()
    _settled(searcher)
    for body, param in [
        ({"query": "   "}, "query"),
        ({"query": "礼品卡", "namespace": "Not a namespace!"}, "namespace"),
    ]:
        response = http.post("/v1/search", json=body)
        assert response.status_code == 400, body
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["param"] == param
    assert http.post("/v1/search", json={"query": "礼品卡"}).json()["data"]  # nothing lost


def test_an_answers_second_turn_from_the_files_through_the_sdk(openai_client, http, kb, searcher) -> None:
    kb.ingest(Upload(_word_file(POLICY_ZH), "退款政策.docx"))
    http.post("/v1/search", json={"query": "礼品卡"}).raise_for_status()
    _settled(searcher)
    messages = [{"role": "user", "content": "礼品卡可以退款吗？"}]
    first = openai_client.chat.completions.create(model="calypso-rag-agent", messages=messages)
    assert "礼品卡一律不予退款" in first.choices[0].message.content
    messages += [{"role": "assistant", "content": first.choices[0].message.content}]
    messages += [{"role": "user", "content": "运费由谁承担？"}]
    second = openai_client.chat.completions.create(model="calypso-rag-agent", messages=messages)
    assert "运费由客户承担" in second.choices[0].message.content and second.choices[0].message.annotations
