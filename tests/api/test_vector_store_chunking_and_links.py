"""Vector store files through the official SDK: static chunking honoured per file, files that share a
document, expired stores, store descriptions, and which files ``files.list`` shows."""

from __future__ import annotations

import random
from dataclasses import replace

import openai
import pytest

from calypso.ingest.tokens import count_tokens

SUBJECTS = ["The trustee", "Each member", "The treasurer", "A committee", "The auditor", "Every volunteer"]
VERBS = ["reviews", "approves", "records", "publishes", "audits", "signs"]
OBJECTS = [
    "the annual budget",
    "minutes of every meeting",
    "the register of interests",
    "quarterly expense reports",
    "contracts above the agreed threshold",
]
TAILS = [
    "before the end of March.",
    "within fourteen working days of the request.",
    "after consulting the chair and two independent members of the board.",
    "and keeps a copy in the office archive for seven years.",
    "unless the constitution says otherwise.",
]


def handbook(sentences: int = 400, seed: int = 7) -> bytes:
    """A few thousand tokens of varied sentences in paragraphs: enough for many chunks at any size."""
    rng = random.Random(seed)
    paragraphs = []
    for p in range(sentences // 8):
        body = " ".join(
            f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(TAILS)}" for _ in range(8)
        )
        paragraphs.append(f"Section {p + 1}. {body}")
    return ("\n\n".join(paragraphs) + "\n").encode()


def _chunks(http, document_id: str) -> list[dict]:
    page = http.get(f"/v1/documents/{document_id}/chunks", params={"limit": 100}).json()
    chunks = page["data"]
    while page["has_more"]:
        page = http.get(
            f"/v1/documents/{document_id}/chunks", params={"limit": 100, "after": chunks[-1]["chunk_index"]}
        ).json()
        chunks += page["data"]
    return chunks


def _static(size: int, overlap: int) -> dict:
    return {"type": "static", "static": {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap}}


def test_static_chunking_is_honoured_per_file(openai_client, http) -> None:
    data = handbook()
    assert count_tokens(data.decode()) > 4000
    uploaded = openai_client.files.create(file=("handbook.md", data), purpose="assistants")
    measured = {}
    for size, overlap in [(100, 50), (300, 0), (800, 400)]:
        store = openai_client.vector_stores.create(name=f"static {size}")
        file = openai_client.vector_stores.files.create_and_poll(
            vector_store_id=store.id, file_id=uploaded.id, chunking_strategy=_static(size, overlap)
        )
        assert file.status == "completed" and file.id == uploaded.id
        assert file.chunking_strategy.type == "static"
        assert file.chunking_strategy.static.max_chunk_size_tokens == size
        assert file.chunking_strategy.static.chunk_overlap_tokens == overlap
        chunks = _chunks(http, file.model_extra["document_id"])
        tokens = [count_tokens(c["text"]) for c in chunks]
        assert max(tokens) <= size, (size, max(tokens))
        assert sum(tokens) / len(tokens) >= size * 0.6, (size, sum(tokens) / len(tokens))  # packed, not tiny
        for before, after in zip(chunks, chunks[1:]):
            carried = data.decode()[after["start_index"] : before["end_index"]] if overlap else ""
            if overlap:  # the next chunk starts inside this one, carrying at most `overlap` tokens
                assert after["start_index"] < before["end_index"]
                assert count_tokens(carried) <= overlap
            else:
                assert after["start_index"] >= before["end_index"]
        measured[size] = len(chunks)
        hits = openai_client.vector_stores.search(vector_store_id=store.id, query="register of interests")
        assert hits.data and max(count_tokens(h.content[0].text) for h in hits.data) <= size
    assert measured[100] > measured[300] > measured[800]

    # No strategy, or auto: the server's own chunking, which the object reports as "other".
    store = openai_client.vector_stores.create(name="auto")
    file = openai_client.vector_stores.files.create_and_poll(
        vector_store_id=store.id, file_id=uploaded.id, chunking_strategy={"type": "auto"}
    )
    assert file.chunking_strategy.type == "other"
    # Asking again for another strategy is refused (its chunks are made); the same one is fine.
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.vector_stores.files.create(
            vector_store_id=store.id, file_id=uploaded.id, chunking_strategy=_static(200, 0)
        )
    assert info.value.param == "chunking_strategy" and "remove it from the store" in info.value.message
    again = openai_client.vector_stores.files.create(vector_store_id=store.id, file_id=uploaded.id)
    assert again.chunking_strategy.type == "other"


def test_a_store_created_with_files_and_batches_chunk_as_asked(openai_client, http) -> None:
    first = openai_client.files.create(file=("one.md", handbook(seed=1)), purpose="assistants")
    second = openai_client.files.create(file=("two.md", handbook(seed=2)), purpose="assistants")
    store = openai_client.vector_stores.create(
        name="created with files", file_ids=[first.id], chunking_strategy=_static(150, 30)
    )
    file = openai_client.vector_stores.files.poll(first.id, vector_store_id=store.id)
    assert file.chunking_strategy.static.max_chunk_size_tokens == 150
    assert max(count_tokens(c["text"]) for c in _chunks(http, file.model_extra["document_id"])) <= 150

    batch_store = openai_client.vector_stores.create(name="batch")
    batch = openai_client.vector_stores.file_batches.create_and_poll(
        vector_store_id=batch_store.id,
        files=[{"file_id": first.id, "chunking_strategy": _static(400, 100)}, {"file_id": second.id}],
        chunking_strategy=_static(120, 0),  # the batch's, for files that do not say
    )
    assert batch.status == "completed"
    files = {
        f.id: f for f in openai_client.vector_stores.file_batches.list_files(batch.id, vector_store_id=batch_store.id)
    }
    assert files[first.id].chunking_strategy.static.max_chunk_size_tokens == 400
    assert files[second.id].chunking_strategy.static.max_chunk_size_tokens == 120
    assert max(count_tokens(c["text"]) for c in _chunks(http, files[second.id].model_extra["document_id"])) <= 120


def test_chunking_strategy_errors_name_the_param(openai_client) -> None:
    uploaded = openai_client.files.create(file=("a.md", b"# A\n\nSome text to chunk.\n"), purpose="assistants")
    store = openai_client.vector_stores.create(name="errors")
    cases = [
        (_static(99, 0), "chunking_strategy.static.max_chunk_size_tokens"),
        (_static(4097, 0), "chunking_strategy.static.max_chunk_size_tokens"),
        (_static(800, 401), "chunking_strategy.static.chunk_overlap_tokens"),
        (_static(800, -1), "chunking_strategy.static.chunk_overlap_tokens"),
        ({"type": "static"}, "chunking_strategy.static"),
        ({"type": "semantic"}, "chunking_strategy"),
    ]
    for strategy, param in cases:
        with pytest.raises(openai.BadRequestError) as info:
            openai_client.vector_stores.files.create(
                vector_store_id=store.id, file_id=uploaded.id, chunking_strategy=strategy
            )
        assert info.value.param == param, strategy
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.vector_stores.file_batches.create(
            vector_store_id=store.id, files=[{"file_id": uploaded.id, "chunking_strategy": _static(200, 101)}]
        )
    assert info.value.param == "files[0].chunking_strategy.static.chunk_overlap_tokens"
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.vector_stores.create(name="x", file_ids=[uploaded.id], chunking_strategy=_static(100, 51))
    assert info.value.param == "chunking_strategy.static.chunk_overlap_tokens"
    assert list(openai_client.vector_stores.files.list(vector_store_id=store.id)) == []  # nothing attached


REFUNDS = b"# Refunds\n\nCustomers can request a refund within 30 days of purchase by writing to support.\n"


def test_files_with_identical_bytes_are_each_a_file_of_the_store(openai_client, http) -> None:
    # Two files with the same bytes (here from two namespaces of the documents API) attached to one store:
    # both are its files, each with its own attributes; removing one leaves the other searchable.
    ids = []
    for namespace in ("team-a", "team-b"):
        doc = http.post(
            "/v1/documents",
            files={"file": ("refunds.md", REFUNDS)},
            data={"namespace": namespace},
            params={"wait": "true"},
        ).json()
        ids.append(doc["file_id"])
    store = openai_client.vector_stores.create(name="shared")
    for file_id, team in zip(ids, ("a", "b")):
        attached = openai_client.vector_stores.files.create_and_poll(
            vector_store_id=store.id, file_id=file_id, attributes={"team": team}
        )
        assert attached.id == file_id and attached.attributes == {"team": team}
    listed = {f.id: f.attributes for f in openai_client.vector_stores.files.list(vector_store_id=store.id)}
    assert listed == {ids[0]: {"team": "a"}, ids[1]: {"team": "b"}}
    assert openai_client.vector_stores.retrieve(store.id).file_counts.total == 2

    for team, file_id in (("a", ids[0]), ("b", ids[1])):
        page = openai_client.vector_stores.search(
            vector_store_id=store.id, query="refund", filters={"type": "eq", "key": "team", "value": team}
        )
        assert page.data and {r.file_id for r in page.data} == {file_id}
        assert page.data[0].attributes == {"team": team}

    openai_client.vector_stores.files.delete(ids[0], vector_store_id=store.id)
    page = openai_client.vector_stores.search(vector_store_id=store.id, query="refund within 30 days")
    assert page.data and {r.file_id for r in page.data} == {ids[1]}
    assert [f.id for f in openai_client.vector_stores.files.list(vector_store_id=store.id)] == [ids[1]]
    openai_client.vector_stores.files.delete(ids[1], vector_store_id=store.id)
    assert openai_client.vector_stores.search(vector_store_id=store.id, query="refund").data == []
    assert openai_client.vector_stores.retrieve(store.id).file_counts.total == 0
    # The files themselves are untouched in their own namespaces.
    assert all(openai_client.files.retrieve(file_id).status == "processed" for file_id in ids)


def test_a_namespace_document_keeps_its_own_file_when_identical_bytes_are_attached(openai_client, http) -> None:
    own = http.post(
        "/v1/documents", files={"file": ("r.md", REFUNDS)}, data={"namespace": "kb"}, params={"wait": "true"}
    ).json()
    other = http.post(
        "/v1/documents", files={"file": ("r.md", REFUNDS)}, data={"namespace": "elsewhere"}, params={"wait": "true"}
    ).json()
    openai_client.vector_stores.files.create_and_poll(vector_store_id="kb", file_id=other["file_id"])
    listed = {f.id for f in openai_client.vector_stores.files.list(vector_store_id="kb")}
    assert listed == {own["file_id"], other["file_id"]}


def test_one_file_in_two_stores_leaves_one_when_removed_from_the_other(openai_client) -> None:
    uploaded = openai_client.files.create(file=("refunds.md", REFUNDS), purpose="assistants")
    stores = [openai_client.vector_stores.create(name=f"s{n}") for n in range(2)]
    for store in stores:
        openai_client.vector_stores.files.create_and_poll(vector_store_id=store.id, file_id=uploaded.id)
    openai_client.vector_stores.files.delete(uploaded.id, vector_store_id=stores[0].id)
    assert openai_client.vector_stores.search(vector_store_id=stores[0].id, query="refund").data == []
    hits = openai_client.vector_stores.search(vector_store_id=stores[1].id, query="refund")
    assert [r.file_id for r in hits.data] == [uploaded.id]
    assert openai_client.files.retrieve(uploaded.id).status == "processed"


def test_store_files_page_through_the_sdk(openai_client, http) -> None:
    store = openai_client.vector_stores.create(name="paged")
    ids = []
    for n in range(7):
        doc = http.post(
            "/v1/documents",
            files={"file": (f"n{n}.md", f"# Note {n}\n\nNote number {n} of the series.\n".encode())},
            data={"namespace": store.id},
            params={"wait": "true"},
        ).json()
        ids.append(doc["file_id"])
    assert [f.id for f in openai_client.vector_stores.files.list(vector_store_id=store.id, limit=3, order="asc")] == ids
    page = openai_client.vector_stores.files.list(vector_store_id=store.id, limit=3, order="desc")
    assert [f.id for f in page.data] == ids[::-1][:3] and page.has_more
    page = openai_client.vector_stores.files.list(vector_store_id=store.id, limit=2, before=ids[3], order="asc")
    assert [f.id for f in page.data] == ids[1:3]
    assert list(openai_client.vector_stores.files.list(vector_store_id=store.id, filter="in_progress")) == []
    with pytest.raises(openai.NotFoundError) as info:
        openai_client.vector_stores.files.list(vector_store_id=store.id, after="file-nope")
    assert info.value.param == "after"


def test_an_expired_store_is_refused_for_search_and_file_search(openai_client, services) -> None:
    uploaded = openai_client.files.create(file=("refunds.md", REFUNDS), purpose="assistants")
    store = openai_client.vector_stores.create(
        name="short-lived", file_ids=[uploaded.id], expires_after={"anchor": "last_active_at", "days": 1}
    )
    openai_client.vector_stores.files.poll(uploaded.id, vector_store_id=store.id)
    assert openai_client.vector_stores.search(vector_store_id=store.id, query="refund").data
    row = services.storage.vector_stores.get("default", store.id)
    services.storage.vector_stores.update(replace(row, last_active_at=row.last_active_at - 86400 - 5))

    expired = openai_client.vector_stores.retrieve(store.id)
    assert expired.status == "expired" and expired.expires_at == row.last_active_at - 5
    refused = [
        (lambda: openai_client.vector_stores.search(vector_store_id=store.id, query="refund"), "vector_store_id"),
        (
            lambda: openai_client.responses.create(
                model="calypso-rag-agent",
                input="How long do I have to ask for a refund?",
                tools=[{"type": "file_search", "vector_store_ids": [store.id]}],
            ),
            "tools[0].vector_store_ids",
        ),
        (
            lambda: openai_client.vector_stores.files.create(vector_store_id=store.id, file_id=uploaded.id),
            "vector_store_id",
        ),
        (lambda: openai_client.vector_stores.update(store.id, name="revived"), "vector_store_id"),
    ]
    for call, param in refused:
        with pytest.raises(openai.BadRequestError) as info:
            call()
        assert info.value.code == "vector_store_expired" and info.value.param == param
        assert "create a new vector store" in info.value.message
    # What is left to do with it still works: read, list its files, delete.
    assert [f.id for f in openai_client.vector_stores.files.list(vector_store_id=store.id)] == [uploaded.id]
    assert openai_client.vector_stores.delete(store.id).deleted


def test_a_store_keeps_its_description(openai_client) -> None:
    store = openai_client.vector_stores.create(name="FAQ", description="Answers for the support team")
    assert store.model_extra["description"] == "Answers for the support team"
    retrieved = openai_client.vector_stores.retrieve(store.id)
    assert retrieved.model_extra["description"] == "Answers for the support team"
    assert openai_client.vector_stores.create(name="bare").model_extra["description"] is None


def test_files_list_shows_the_default_namespace_and_the_quickstarts_files(openai_client, http) -> None:
    elsewhere = http.post(
        "/v1/documents",
        files={"file": ("notes.md", b"# Notes\n\nParking closes at midnight.\n")},
        data={"namespace": "team-notes"},
        params={"wait": "true"},
    ).json()
    in_default = http.post(
        "/v1/documents", files={"file": ("faq.md", b"# FAQ\n\nThe office opens at eight.\n")}, params={"wait": "true"}
    ).json()
    store = openai_client.vector_stores.create(name="quickstart")
    quickstart = openai_client.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=("r.md", REFUNDS))
    listed = [f.id for f in openai_client.files.list()]
    assert sorted(listed) == sorted([in_default["file_id"], quickstart.id])
    assert elsewhere["file_id"] not in listed
    # Not listed, but still a file: retrieve and content work by id.
    assert openai_client.files.retrieve(elsewhere["file_id"]).filename == "notes.md"
