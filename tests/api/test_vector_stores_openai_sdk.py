"""OpenAI's file-search quickstart against Calypso, through the official SDK's own helpers, unchanged."""

from __future__ import annotations

from dataclasses import replace

import openai
import pytest

HANDBOOK = b"""# Office handbook

Visitors must be accompanied by an employee at all times while in the building.
The office opens at eight in the morning and closes at six in the evening.
"""
REFUNDS = b"""# Refund policy 2026

Customers can request a refund within 30 days of purchase by writing to support.
Refunds are paid back to the original payment method within ten working days.
"""
LEGACY = b"""# Refund policy 2019

Customers could request a refund within 14 days of purchase, by post only.
"""


@pytest.fixture
def store(openai_client):
    """The quickstart: create a store, upload_and_poll three files with attributes."""
    vector_store = openai_client.vector_stores.create(name="Support FAQ")
    files = {}
    for name, data, attributes in [
        ("handbook.md", HANDBOOK, {"topic": "office", "year": 2024, "public": True}),
        ("refunds-2026.md", REFUNDS, {"topic": "refunds", "year": 2026, "public": True}),
        ("refunds-2019.md", LEGACY, {"topic": "refunds", "year": 2019, "public": False}),
    ]:
        file = openai_client.vector_stores.files.upload_and_poll(
            vector_store_id=vector_store.id, file=(name, data), attributes=attributes
        )
        assert file.status == "completed" and file.last_error is None, file
        assert file.vector_store_id == vector_store.id and file.attributes == attributes
        files[name] = file
    return vector_store, files


def _names(page) -> set[str]:
    return {r.filename for r in page.data}


def test_quickstart_store_files_and_search(openai_client, store) -> None:
    vector_store, files = store
    assert vector_store.id.startswith("vs_") and vector_store.object == "vector_store"
    retrieved = openai_client.vector_stores.retrieve(vector_store.id)
    assert retrieved.status == "completed" and retrieved.name == "Support FAQ"
    assert retrieved.file_counts.completed == 3 and retrieved.file_counts.total == 3
    assert retrieved.usage_bytes == len(HANDBOOK) + len(REFUNDS) + len(LEGACY)
    assert vector_store.id in [s.id for s in openai_client.vector_stores.list()]

    listed = openai_client.vector_stores.files.list(vector_store_id=vector_store.id, filter="completed")
    assert {f.id for f in listed} == {f.id for f in files.values()}
    assert list(openai_client.vector_stores.files.list(vector_store_id=vector_store.id, filter="failed")) == []

    results = openai_client.vector_stores.search(vector_store_id=vector_store.id, query="refund within days")
    assert results.data and all(0 <= r.score <= 1 for r in results.data)
    assert {r.file_id for r in results.data} <= {f.id for f in files.values()}
    hit = next(r for r in results.data if r.filename == "refunds-2026.md")
    assert hit.file_id == files["refunds-2026.md"].id and hit.attributes["year"] == 2026
    assert hit.content[0].type == "text" and "30 days" in hit.content[0].text

    query = "refund visitors office purchase"
    cases = [
        ({"type": "eq", "key": "topic", "value": "refunds"}, {"refunds-2026.md", "refunds-2019.md"}),
        ({"type": "ne", "key": "topic", "value": "refunds"}, {"handbook.md"}),
        ({"type": "gt", "key": "year", "value": 2024}, {"refunds-2026.md"}),
        ({"type": "gte", "key": "year", "value": 2024}, {"refunds-2026.md", "handbook.md"}),
        ({"type": "lt", "key": "year", "value": 2024}, {"refunds-2019.md"}),
        ({"type": "lte", "key": "year", "value": 2024}, {"refunds-2019.md", "handbook.md"}),
        ({"type": "in", "key": "year", "value": [2019, 2026]}, {"refunds-2019.md", "refunds-2026.md"}),
        ({"type": "nin", "key": "topic", "value": ["office"]}, {"refunds-2019.md", "refunds-2026.md"}),
        ({"type": "eq", "key": "public", "value": False}, {"refunds-2019.md"}),
        (
            {
                "type": "or",
                "filters": [
                    {"type": "eq", "key": "topic", "value": "office"},
                    {
                        "type": "and",
                        "filters": [
                            {"type": "eq", "key": "topic", "value": "refunds"},
                            {"type": "gte", "key": "year", "value": 2020},
                        ],
                    },
                ],
            },
            {"handbook.md", "refunds-2026.md"},
        ),
    ]
    for filters, expected in cases:
        page = openai_client.vector_stores.search(
            vector_store_id=vector_store.id, query=query, filters=filters, max_num_results=50
        )
        assert _names(page) == expected, filters

    content = openai_client.vector_stores.files.content(files["refunds-2026.md"].id, vector_store_id=vector_store.id)
    assert "30 days" in "".join(part.text for part in content)

    updated = openai_client.vector_stores.files.update(
        files["handbook.md"].id, vector_store_id=vector_store.id, attributes={"topic": "refunds"}
    )
    assert updated.attributes == {"topic": "refunds"}
    page = openai_client.vector_stores.search(
        vector_store_id=vector_store.id, query=query, filters={"type": "eq", "key": "topic", "value": "office"}
    )
    assert page.data == []

    changed = openai_client.vector_stores.update(
        vector_store.id, name="FAQ", metadata={"team": "support"}, expires_after={"anchor": "last_active_at", "days": 7}
    )
    assert changed.name == "FAQ" and changed.metadata == {"team": "support"} and changed.expires_after.days == 7


def test_responses_file_search_cites_files_of_the_store(openai_client, store) -> None:
    vector_store, files = store
    response = openai_client.responses.create(
        model="calypso-rag-agent",
        input="Within how many days can customers request a refund?",
        tools=[
            {
                "type": "file_search",
                "vector_store_ids": [vector_store.id],
                "filters": {"type": "eq", "key": "year", "value": 2026},
                "max_num_results": 5,
            }
        ],
    )
    message = next(item for item in response.output if item.type == "message")
    annotations = [a for part in message.content for a in part.annotations]
    assert annotations and {a.file_id for a in annotations} == {files["refunds-2026.md"].id}
    # The file's own attributes reach its file_search results, beside seed 000's (issue 25).
    search = next(item for item in response.output if item.type == "file_search_call")
    for result in search.results:
        assert result.attributes["topic"] == "refunds" and result.attributes["year"] == 2026
        assert result.attributes["source_index"] >= 1 and result.attributes["label"]
    assert all(a.type == "file_citation" and a.filename == "refunds-2026.md" for a in annotations)


def test_deleting_a_file_removes_its_passages_from_the_store_at_once(openai_client, store) -> None:
    vector_store, files = store
    query = "refund within days of purchase"
    before = openai_client.vector_stores.search(vector_store_id=vector_store.id, query=query)
    assert "refunds-2026.md" in _names(before)
    deleted = openai_client.vector_stores.files.delete(files["refunds-2026.md"].id, vector_store_id=vector_store.id)
    assert deleted.deleted
    after = openai_client.vector_stores.search(vector_store_id=vector_store.id, query=query)
    assert "refunds-2026.md" not in _names(after) and _names(after)
    assert openai_client.vector_stores.retrieve(vector_store.id).file_counts.total == 2
    with pytest.raises(openai.NotFoundError):
        openai_client.vector_stores.files.retrieve(files["refunds-2026.md"].id, vector_store_id=vector_store.id)

    assert openai_client.vector_stores.delete(vector_store.id).deleted
    with pytest.raises(openai.NotFoundError) as info:
        openai_client.vector_stores.retrieve(vector_store.id)
    assert info.value.param == "vector_store_id"


def test_a_namespace_is_a_store_and_a_store_is_a_namespace(openai_client, http, store) -> None:
    vector_store, _ = store
    uploaded = http.post(
        "/v1/documents",
        files={"file": ("notes.md", b"# Notes\n\nThe parking garage closes at midnight.\n")},
        data={"namespace": "notes"},
        params={"wait": "true"},
    ).json()
    as_store = openai_client.vector_stores.retrieve("notes")
    assert as_store.file_counts.completed == 1
    [file] = openai_client.vector_stores.files.list(vector_store_id="notes")
    assert file.id == uploaded["file_id"] and file.attributes == {}
    hits = openai_client.vector_stores.search(vector_store_id="notes", query="parking garage")
    assert [r.file_id for r in hits.data] == [uploaded["file_id"]]
    # The store's files are documents of its namespace.
    documents = http.get("/v1/documents", params={"namespace": vector_store.id}).json()["data"]
    assert len(documents) == 3


def test_bad_input_names_the_param(openai_client, http, store) -> None:
    vector_store, files = store
    with pytest.raises(openai.NotFoundError) as info:
        openai_client.vector_stores.search(vector_store_id="vs_unknown", query="x")
    assert info.value.status_code == 404 and info.value.param == "vector_store_id"
    with pytest.raises(openai.BadRequestError) as info:  # overlap above half the chunk size
        openai_client.vector_stores.files.create(
            vector_store_id=vector_store.id,
            file_id=files["handbook.md"].id,
            chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 101}},
        )
    assert info.value.param == "chunking_strategy.static.chunk_overlap_tokens"
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.vector_stores.search(vector_store_id=vector_store.id, query="refund", max_num_results=51)
    assert info.value.param == "max_num_results"
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.vector_stores.search(
            vector_store_id=vector_store.id,
            query="refund",
            filters={"type": "and", "filters": [{"type": "gt", "key": "year", "value": True}]},
        )
    assert info.value.param == "filters.filters[0].value"
    bad_attributes = [
        ({"k" * 65: "x"}, "attributes." + "k" * 65),
        ({"tags": ["a", "b"]}, "attributes.tags"),
        ({"note": "x" * 513}, "attributes.note"),
        ({f"k{i}": i for i in range(17)}, "attributes"),
    ]
    for attributes, param in bad_attributes:
        with pytest.raises(openai.BadRequestError) as info:
            openai_client.vector_stores.files.create(
                vector_store_id=vector_store.id, file_id=files["handbook.md"].id, attributes=attributes
            )
        assert info.value.param == param
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.vector_stores.list(limit=101)
    assert info.value.param == "limit"


def test_file_batches_upload_and_poll(openai_client) -> None:
    vector_store = openai_client.vector_stores.create(name="Batch")
    batch = openai_client.vector_stores.file_batches.upload_and_poll(
        vector_store_id=vector_store.id, files=[("handbook.md", HANDBOOK), ("refunds-2026.md", REFUNDS)]
    )
    assert batch.id.startswith("vsfb_") and batch.object == "vector_store.files_batch"
    assert batch.status == "completed" and batch.file_counts.completed == 2 and batch.file_counts.total == 2
    files = list(openai_client.vector_stores.file_batches.list_files(batch.id, vector_store_id=vector_store.id))
    assert {f.status for f in files} == {"completed"} and len(files) == 2
    assert (
        openai_client.vector_stores.file_batches.retrieve(batch.id, vector_store_id=vector_store.id).status
        == "completed"
    )
    results = openai_client.vector_stores.search(vector_store_id=vector_store.id, query="refund within 30 days")
    assert "refunds-2026.md" in _names(results)

    uploaded = openai_client.files.create(file=("legacy.md", LEGACY), purpose="assistants")
    batch = openai_client.vector_stores.file_batches.create(
        vector_store_id=vector_store.id, files=[{"file_id": uploaded.id, "attributes": {"year": 2019}}]
    )
    cancelled = openai_client.vector_stores.file_batches.cancel(batch.id, vector_store_id=vector_store.id)
    assert cancelled.status == "cancelled"
    with pytest.raises(openai.NotFoundError) as info:
        openai_client.vector_stores.file_batches.create(vector_store_id=vector_store.id, file_ids=["file-nope"])
    assert info.value.param == "files[0].file_id"


def test_deleting_a_file_removes_it_from_every_store(openai_client) -> None:
    uploaded = openai_client.files.create(file=("refunds-2026.md", REFUNDS), purpose="assistants")
    stores = [openai_client.vector_stores.create(name=f"s{n}") for n in range(2)]
    for store in stores:
        attached = openai_client.vector_stores.files.create_and_poll(file_id=uploaded.id, vector_store_id=store.id)
        assert attached.id == uploaded.id and attached.status == "completed"
    assert openai_client.files.delete(uploaded.id).deleted
    for store in stores:
        assert list(openai_client.vector_stores.files.list(vector_store_id=store.id)) == []
        assert openai_client.vector_stores.search(vector_store_id=store.id, query="refund").data == []


def test_an_expired_store_says_so(openai_client, services) -> None:
    store = openai_client.vector_stores.create(name="old", expires_after={"anchor": "last_active_at", "days": 1})
    assert store.status == "completed" and store.expires_at == store.last_active_at + 86400
    row = services.storage.vector_stores.get("default", store.id)
    services.storage.vector_stores.update(replace(row, last_active_at=row.last_active_at - 2 * 86400))
    assert openai_client.vector_stores.retrieve(store.id).status == "expired"
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.vector_stores.update(store.id, expires_after={"anchor": "created_at", "days": 1})
    assert info.value.param == "expires_after.anchor"  # the typed model names the field (issue 26)


def test_files_list_shows_each_uploaded_file_once(openai_client) -> None:
    # upload_and_poll uploads to /v1/files (namespace general), then attaches it to the store, which
    # ingests a copy into the store's namespace: the Files API must still list one file, the client's.
    first = openai_client.vector_stores.create(name="A")
    second = openai_client.vector_stores.create(name="B")
    file = openai_client.vector_stores.files.upload_and_poll(vector_store_id=first.id, file=("h.md", HANDBOOK))
    openai_client.vector_stores.files.create_and_poll(vector_store_id=second.id, file_id=file.id)
    listed = [f for f in openai_client.files.list() if f.filename == "h.md"]
    assert [f.id for f in listed] == [file.id]
    assert {f.id for f in openai_client.vector_stores.files.list(vector_store_id=second.id)} == {file.id}
