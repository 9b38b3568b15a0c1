"""A passage begun inside a table carries the table's header: in search results and in what the model reads."""

from __future__ import annotations

from calypso.generation.prompts import format_sources
from calypso.services.ingestion import Upload

TERMS = "ingestion-docs/md/github-terms-of-service.md"  # its table of contents is a 19-row table over 4 passages
HEADER = "| Section | What can you find there? |\n| --- | --- |"


def test_rows_of_a_split_table_come_with_their_column_names(openai_client, http, data_dir, kb, searcher) -> None:
    store = openai_client.vector_stores.create(name="Terms")
    path = data_dir / TERMS
    file = openai_client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=(path.name, path.read_bytes())
    )
    assert file.status == "completed", file
    query = "section Intellectual Property Notice Beta Previews Payment Cancellation"
    hits = http.post(f"/v1/vector_stores/{store.id}/search", json={"query": query, "max_num_results": 50}).json()
    texts = [(hit["content"][0]["text"], hit["_aicore"]) for hit in hits["data"]]
    rows = [ours for text, ours in texts if text.startswith("| [")]  # begun at a row of the table's body
    assert rows and all(ours["table_header"] == HEADER for ours in rows)
    holding = [ours for text, ours in texts if "| Section | What can you find there? |" in text]
    assert holding and all("table_header" not in ours for ours in holding)  # the header is there already

    kb.ingest(Upload(path.read_bytes(), path.name))  # the default namespace, as the answer endpoints search it
    passages = searcher.search("Beta Previews features still in development", searcher.scope(max_results=10))
    shown = format_sources([p for p in passages if "[J. Beta Previews]" in p.chunk.text][:1])
    assert "table header (from above): | Section | What can you find there? |" in shown


def test_a_long_word_table_in_chinese_keeps_its_header_in_later_passages(openai_client, http) -> None:
    import io

    import docx

    document = docx.Document()
    document.add_paragraph("各城市收入表")
    table = document.add_table(rows=1, cols=3)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text, table.rows[0].cells[2].text = "地区", "收入", "备注"
    for i in range(300):
        cells = table.add_row().cells
        cells[0].text, cells[1].text, cells[2].text = f"城市{i}", f"{i * 100} 万元", "按季度统计"
    data = io.BytesIO()
    document.save(data)
    store = openai_client.vector_stores.create(name="收入")
    file = openai_client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("收入.docx", data.getvalue())
    )
    assert file.status == "completed", file
    hits = http.post(
        f"/v1/vector_stores/{store.id}/search", json={"query": "城市250 收入", "max_num_results": 20}
    ).json()["data"]
    later = [hit["_aicore"] for hit in hits if hit["content"][0]["text"].startswith("| 城市")]
    assert later and all(ours["table_header"] == "| 地区 | 收入 | 备注 |" for ours in later)
