"""The Files API through the official openai SDK."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from tests_support import wait_for_file


def test_files_round_trip_through_the_sdk(openai_client, http, data_dir: Path) -> None:
    path = data_dir / "ingestion-docs/docx/word_sample.docx"
    with path.open("rb") as handle:
        created = openai_client.files.create(file=handle, purpose="assistants")
    assert created.id.startswith("file-") and created.object == "file"
    assert created.filename == "word_sample.docx" and created.bytes == path.stat().st_size
    assert created.purpose == "assistants" and created.status == "uploaded"  # answered at once
    assert wait_for_file(openai_client, created.id).status == "processed"

    # A file is a document in the default namespace.
    document_id = created.model_extra["document_id"]
    assert http.get(f"/v1/documents/{document_id}").json()["namespace"] == "general"

    assert openai_client.files.retrieve(created.id).id == created.id
    assert [f.id for f in openai_client.files.list()] == [created.id]
    assert openai_client.files.content(created.id).content == path.read_bytes()

    deleted = openai_client.files.delete(created.id)
    assert deleted.deleted and deleted.id == created.id
    with pytest.raises(openai.NotFoundError) as info:
        openai_client.files.retrieve(created.id)
    assert info.value.code == "not_found"
    assert http.get(f"/v1/documents/{document_id}").status_code == 404


def test_files_errors_through_the_sdk(openai_client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        openai_client.files.create(file=("a.txt", b"Some text."), purpose="fine-tune")
    assert info.value.param == "purpose"
    with pytest.raises(openai.APIStatusError) as info:
        openai_client.files.create(file=("a.bin", b"\x00\x01\x02" * 100), purpose="assistants")
    assert info.value.status_code == 415
    with pytest.raises(openai.NotFoundError):
        openai_client.files.content("file-doesnotexist")
    assert list(openai_client.files.list()) == []


def test_a_file_that_cannot_be_read_ends_in_error_with_details(openai_client) -> None:
    created = openai_client.files.create(
        file=("broken.pdf", b"%PDF-1.7\n" + b"\x00garbage" * 100), purpose="assistants"
    )
    assert created.status == "uploaded"
    failed = wait_for_file(openai_client, created.id)
    assert failed.status == "error" and "broken.pdf" in failed.status_details


def test_files_list_pages_as_openai_does(openai_client, http) -> None:
    """files.list takes a limit up to 10,000 (its default); other lists stop at 100."""
    for n in range(3):
        openai_client.files.create(file=(f"n{n}.txt", f"Note {n} about ferries.".encode()), purpose="assistants")
    page = openai_client.files.list(limit=2)
    assert len(page.data) == 2 and page.has_more
    assert http.get("/v1/files", params={"limit": 5000}).status_code == 200
    refused = http.get("/v1/files", params={"limit": 10_001})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "limit"
    assert http.get("/v1/vector_stores", params={"limit": 101}).status_code == 400


def test_a_files_purpose_is_kept_and_lists_filter_by_it(openai_client) -> None:
    mine = openai_client.files.create(file=("notes.txt", b"The ferry leaves at noon."), purpose="user_data")
    theirs = openai_client.files.create(file=("other.txt", b"The bus leaves at one."), purpose="assistants")
    assert mine.purpose == "user_data" and openai_client.files.retrieve(mine.id).purpose == "user_data"
    assert [f.id for f in openai_client.files.list(purpose="user_data")] == [mine.id]
    assert [f.id for f in openai_client.files.list(purpose="assistants")] == [theirs.id]
    assert {f.id for f in openai_client.files.list()} == {mine.id, theirs.id}
    assert list(openai_client.files.list(purpose="batch")) == []
