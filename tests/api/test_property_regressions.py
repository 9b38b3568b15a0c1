"""What the property-based tests found, pinned as plain examples."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel, ConfigDict

from calypso.api.app import create_app
from calypso.citations.links import verify
from calypso.config import Settings
from calypso.validation import invalid_request_from
from testkit.live_server import LiveServer, free_port


def test_a_signed_link_with_a_non_ascii_signature_is_403(api: httpx.Client) -> None:
    # Was a 500: hmac.compare_digest raises TypeError for str with non-ASCII characters.
    upload = api.post("/v1/files", files={"file": ("a.txt", b"Refunds take 5 days.")}, data={"purpose": "assistants"})
    file_id = upload.json()["id"]
    expires = int(time.time()) + 3600
    response = api.get(f"/v1/files/{file_id}/content", params={"expires": expires, "signature": "é" * 64})
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "invalid_signature"
    assert not verify(b"secret", file_id, "default", expires, "ü")


def test_an_admin_key_with_non_ascii_bytes_is_401(tmp_path: Path) -> None:
    # Was a 500: the admin key check compared str with non-ASCII characters (any Latin-1 byte in the header).
    settings = Settings(home=tmp_path / "home", admin_key="admin-ключ")
    with LiveServer(create_app(settings), free_port()) as server:
        for value in (b"Bearer \xe9\xe9", b"Bearer \xff", "Bearer admin-клюк".encode()):
            response = httpx.get(f"{server.url}/v1/admin/keys", headers={"Authorization": value}, timeout=30)
            assert response.status_code == 401, response.text
        # The key itself, sent as UTF-8 bytes, still opens the admin API.
        correct = {"Authorization": "Bearer admin-ключ".encode()}
        assert httpx.get(f"{server.url}/v1/admin/keys", headers=correct, timeout=30).status_code == 200


class Search(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str
    path: list[str] = []


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        # A field named like a FastAPI source ("query", "path") was taken for one: param null, "the request body".
        ({}, "query", "missing_required_parameter"),
        ({"query": "x", "path": [5]}, "path[0]", "invalid_type"),
        # An empty key was reported as "Unknown parameter: the request body" with param null.
        ({"query": "x", "": 1}, "", "unknown_parameter"),
    ],
)
def test_a_model_validated_by_hand_names_the_parameter(body: dict, param: str, code: str) -> None:
    try:
        Search.model_validate(body)
    except Exception as exc:  # noqa: BLE001 - the translator takes pydantic's ValidationError
        error = invalid_request_from(exc, body, model=Search)  # type: ignore[arg-type]
    else:
        pytest.fail("expected a validation error")
    assert (error.param, error.code) == (param, code), error.message
    assert "the request body" not in error.message
