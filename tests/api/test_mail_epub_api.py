"""E-books and e-mail through the real API: upload with the openai SDK into a vector store, search, and an
answer with file_search on /v1/responses whose citations name the chapter or the attachment; hostile
files refused in OpenAI's error shape with nothing stored."""

from __future__ import annotations

from email.message import EmailMessage
from email.policy import default as default_policy
from functools import partial
from pathlib import Path

import httpx
import pytest
from tests_support import WAIT, wait_for_document

from testkit import hostile_files

MORE = "ingestion-docs-more"


def _upload(openai_client, data_dir: Path, *relative: str):
    store = openai_client.vector_stores.create(name="mail and books")
    for name in relative:
        path = data_dir / MORE / name
        file = openai_client.vector_stores.files.upload_and_poll(
            vector_store_id=store.id, file=(path.name, path.read_bytes())
        )
        assert file.status == "completed" and file.last_error is None, file
    return store


def _answer(openai_client, store, question: str):
    response = openai_client.responses.create(
        model="calypso-rag-agent",
        input=question,
        tools=[{"type": "file_search", "vector_store_ids": [store.id], "max_num_results": 5}],
    )
    search = next(item for item in response.output if item.type == "file_search_call")
    message = next(item for item in response.output if item.type == "message")
    return search, [a for part in message.content for a in part.annotations]


@pytest.mark.parametrize("name", ["fake-email-attachment.eml", "fake-email-attachment.msg"])
def test_email_attachment_is_searched_and_cited_by_its_name(openai_client, http, data_dir: Path, name: str) -> None:
    store = _upload(openai_client, data_dir, f"email/{name}")
    documents = http.get("/v1/documents").json()["data"]
    (document,) = [d for d in documents if d["filename"] == name and d["namespace"] == store.id]
    assert document["title"] == "Fake email with attachment"
    assert document["metadata"]["from"] == "Mallori Harrell <mallori@unstructured.io>"
    assert document["metadata"]["date"] == "2022-12-23T12:08:48-06:00"

    hits = openai_client.vector_stores.search(vector_store_id=store.id, query="fake attachment")
    hit = next(h for h in hits.data if "Hey this is a fake attachment!" in h.content[0].text)
    assert "attachment fake-attachment.txt" in hit.model_extra["_aicore"]["locator_label"]
    assert "p. " not in hit.model_extra["_aicore"]["locator_label"]

    search, annotations = _answer(openai_client, store, "What does the fake attachment say?")
    assert any("Hey this is a fake attachment!" in r.text for r in search.results)
    cited = [a for a in annotations if "fake attachment" in a.model_extra["file_citation"]["quote"]]
    assert cited, annotations
    for annotation in cited:
        aicore = annotation.model_extra["_aicore"]
        assert annotation.filename == name
        assert aicore["locator_label"] == "attachment fake-attachment.txt"
        assert aicore["page_label"] == "attachment fake-attachment.txt"


def test_email_header_fields_reach_the_model(openai_client, data_dir: Path) -> None:
    store = _upload(openai_client, data_dir, "email/email-no-html-content-1.eml")
    search, _annotations = _answer(openai_client, store, "Which repositories was I subscribed to on GitHub?")
    texts = " ".join(r.text for r in search.results)
    assert "Subject: [GitHub] Subscribed to 63 nf-core repositories" in texts and "From: GitHub" in texts


def test_epub_passage_is_cited_by_its_chapter(openai_client, http, data_dir: Path) -> None:
    store = _upload(openai_client, data_dir, "epub/epub_purvis_poetry.epub")
    (document,) = [d for d in http.get("/v1/documents").json()["data"] if d["namespace"] == store.id]
    assert document["title"] == "Poetry" and document["media_type"] == "application/epub+zip"

    hits = openai_client.vector_stores.search(vector_store_id=store.id, query="cold storms of winter chill him")
    top = hits.data[0]
    assert "The cold storms of winter" in top.content[0].text
    # A passage is located where it starts: this one with the imprint's last lines (issue 42); the quote of the
    # poem is cited by the poem's title below.
    assert top.model_extra["_aicore"]["locator_label"] == "Imprint"
    assert "page_number" not in top.model_extra["_aicore"]  # an e-book has no pages a reader could find

    search, annotations = _answer(openai_client, store, "What will the cold storms of winter no longer do?")
    assert annotations
    by_index = {r.attributes["source_index"]: r for r in search.results}
    for annotation in annotations:
        aicore = annotation.model_extra["_aicore"]
        assert aicore["page_number"] is None and aicore["page_label"] is None
        quote = annotation.model_extra["file_citation"]["quote"]
        assert quote in by_index[aicore["source_index"]].text
        if "storms of winter" in quote:
            assert aicore["locator_label"] == "The Grave of the Slave"
    assert any("storms of winter" in a.model_extra["file_citation"]["quote"] for a in annotations)


def _hundreds_of_attachments() -> bytes:
    msg = EmailMessage(policy=default_policy)
    msg["From"], msg["To"], msg["Subject"] = "a@example.org", "b@example.org", "Many files"
    msg.set_content("Five hundred files follow.")
    for i in range(500):
        msg.add_attachment(f"File {i} body.".encode(), "text", "plain", filename=f"f{i}.txt")
    return msg.as_bytes()


@pytest.mark.parametrize(
    ("name", "make", "status", "code"),
    [
        ("bomb.epub", partial(hostile_files.epub_zip_bomb, 300), 413, "uncompressed_too_large"),
        ("junk.eml", lambda: bytes(range(1, 256)) * 50, 422, "unprocessable_document"),
        ("broken.msg", lambda: b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 4000, 422, "unprocessable_document"),
    ],
)
def test_hostile_mail_and_books_are_refused_and_nothing_stored(
    api: httpx.Client, name: str, make, status: int, code: str
) -> None:
    response = api.post("/v1/documents", files={"file": (name, make())}, params=WAIT)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code and error["param"] == "file" and error["type"] == "invalid_request_error"
    assert api.get("/v1/documents").json()["data"] == []


def test_five_hundred_attachments_are_bounded_and_said(api: httpx.Client) -> None:
    response = api.post("/v1/documents", files={"file": ("many.eml", _hundreds_of_attachments())}, params=WAIT)
    assert response.status_code == 201, response.text
    document = response.json()
    assert document["status"] == "completed" and document["page_count"] == 101
    chunks = api.get(f"/v1/documents/{document['id']}/chunks", params={"limit": 100}).json()["data"]
    assert any("400 more attachments" in c["text"] and "CALYPSO_MAX_EMAIL_ATTACHMENTS" in c["text"] for c in chunks)


def test_a_corrupt_message_uploaded_without_waiting_fails_with_last_error(api: httpx.Client) -> None:
    broken = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 4000
    queued = api.post("/v1/documents", files={"file": ("broken.msg", broken)})
    assert queued.status_code == 201 and queued.json()["status"] == "in_progress", queued.text
    document = wait_for_document(api, queued.json()["id"])
    assert document["status"] == "failed" and document["chunk_count"] == 0
    assert document["last_error"]["code"] == "invalid_file"
    assert "not a readable Outlook message" in document["last_error"]["message"]
    chunks = api.get(f"/v1/documents/{document['id']}/chunks").json()["data"]
    assert chunks == []
