"""The Files API's ``expires_after`` (issue 25), through the openai SDK against a real server: accepted on
upload and returned as ``expires_at``, refused outside OpenAI's bounds, and an expired file is hidden at
once (not listed, 404) and then deleted by the server's sweep with its vector store copies."""

from __future__ import annotations

import time

import openai
import pytest
from tests_support import wait_for_file

HOUR = 3600
PASSAGE = b"Hannibal crossed the Alps in 218 BC with war elephants and an army of mercenaries."


@pytest.fixture
def quick_sweep(settings):
    settings.file_expiry_sweep_seconds = 0.1  # before the server starts: its sweep runs every 0.1 s
    return settings


def _upload(client, name: str, data: bytes, **extra):
    return client.files.create(file=(name, data), purpose="assistants", **extra)


def test_expires_after_is_kept_and_returned_as_expires_at(openai_client) -> None:
    made = _upload(openai_client, "alps.txt", PASSAGE, expires_after={"anchor": "created_at", "seconds": HOUR})
    assert made.expires_at == made.created_at + HOUR
    assert openai_client.files.retrieve(made.id).expires_at == made.created_at + HOUR
    plain = _upload(openai_client, "plain.txt", b"Nothing expires here, ever, at all.")
    assert plain.expires_at is None


@pytest.mark.parametrize(
    ("expires_after", "param", "code"),
    [
        ({"anchor": "created_at", "seconds": 3599}, "expires_after.seconds", "integer_below_min_value"),
        ({"anchor": "created_at", "seconds": 2_592_001}, "expires_after.seconds", "integer_above_max_value"),
        ({"anchor": "created_at", "seconds": "soon"}, "expires_after.seconds", "invalid_type"),
        ({"anchor": "last_active_at", "seconds": HOUR}, "expires_after.anchor", "invalid_value"),
        ({"anchor": "created_at"}, "expires_after.seconds", "missing_required_parameter"),
        ({"seconds": HOUR}, "expires_after.anchor", "missing_required_parameter"),
    ],
)
def test_bad_expires_after_is_openai_s_400_and_stores_nothing(openai_client, expires_after, param, code) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _upload(openai_client, "alps.txt", PASSAGE, expires_after=expires_after)
    error = caught.value.body
    assert (error["param"], error["code"], error["type"]) == (param, code, "invalid_request_error")
    assert openai_client.files.list().data == []


def test_an_expired_file_is_hidden_at_once_then_swept_with_its_store_copies(
    quick_sweep, services, openai_client, monkeypatch
) -> None:
    client = openai_client
    doomed = _upload(client, "alps.txt", PASSAGE, expires_after={"anchor": "created_at", "seconds": HOUR})
    kept = _upload(client, "kept.txt", b"The Rhone was crossed before the Alps, on rafts.")
    wait_for_file(client, doomed.id)
    store = client.vector_stores.create(name="alps")
    client.vector_stores.files.create_and_poll(file_id=doomed.id, vector_store_id=store.id)
    assert client.vector_stores.search(store.id, query="Hannibal elephants").data

    real_time = time.time
    # An hour and a second later (the server runs in this process, on this clock): hidden before any sweep.
    sweeps = services.vector_stores.delete_expired_files
    monkeypatch.setattr(services.vector_stores, "delete_expired_files", lambda now=None: 0)
    monkeypatch.setattr(time, "time", lambda: real_time() + HOUR + 1)
    assert [f.id for f in client.files.list().data] == [kept.id]
    with pytest.raises(openai.NotFoundError) as gone:
        client.files.retrieve(doomed.id)
    assert "expired" in gone.value.message
    with pytest.raises(openai.NotFoundError):
        client.files.content(doomed.id)
    assert services.storage.documents.get_document_by_file_id("default", doomed.id) is not None  # not swept yet

    # The server's sweep deletes it, and the copy the vector store made: its passages leave search.
    monkeypatch.setattr(services.vector_stores, "delete_expired_files", sweeps)
    deadline = real_time() + 10
    while services.storage.documents.get_document_by_file_id("default", doomed.id) is not None:
        assert real_time() < deadline, "the sweep did not delete the expired file"
        time.sleep(0.05)
    assert client.vector_stores.files.list(store.id).data == []
    assert client.vector_stores.search(store.id, query="Hannibal elephants").data == []
    assert client.files.retrieve(kept.id).id == kept.id
