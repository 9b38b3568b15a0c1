"""Odd input at the HTTP edge (issue 26): look-alike names, file names that would reach a terminal raw,
over-long file names, and 405s that say which methods a path takes. The app in process: the bytes are
written by hand, and no test needs a socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from calypso.api.app import create_app
from calypso.config import Settings

ADMIN = "admin-key-for-odd-input"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    settings = Settings(home=tmp_path / "home", embedding_model="none", admin_key=ADMIN)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        yield client


def _error(response: httpx.Response, status: int, code: str, param: str | None) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, param), error
    return str(error["message"])


def _multipart(filename: bytes, content: bytes) -> tuple[bytes, dict[str, str]]:
    """A multipart body written by hand: clients escape control characters in names, an attacker does not."""
    boundary = b"oddinputboundary"
    body = (
        b"--" + boundary + b"\r\n"
        b'Content-Disposition: form-data; name="file"; filename="' + filename + b'"\r\n'
        b"Content-Type: text/plain\r\n\r\n" + content + b"\r\n--" + boundary + b"--\r\n"
    )
    return body, {"content-type": f"multipart/form-data; boundary={boundary.decode()}"}


@pytest.mark.parametrize("name", ["general\n", "acme\n", "general\r\n", "\ngeneral"])
def test_a_namespace_with_a_newline_is_refused(client: httpx.Client, name: str) -> None:
    response = client.post("/v1/documents", files={"file": ("a.txt", b"hello")}, data={"namespace": name})
    _error(response, 400, "invalid_namespace", "namespace")


def test_a_bot_id_with_a_trailing_newline_is_refused(client: httpx.Client) -> None:
    response = client.post("/v1/bots", json={"id": "nlbot\n"})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "id"
    assert client.get("/v1/bots/nlbot").status_code == 404


def test_a_workspace_name_with_a_trailing_newline_is_refused(client: httpx.Client) -> None:
    response = client.get("/v1/admin/workspaces/acme%0A/policy", headers={"authorization": f"Bearer {ADMIN}"})
    _error(response, 400, "invalid_namespace", "workspace")


def test_a_file_name_is_stored_without_its_path_or_control_characters(client: httpx.Client) -> None:
    body, headers = _multipart(b"../../etc/\x1b[31mevil\x07\x1b]0;pwned\x07.txt", b"hello evil world")
    response = client.post("/v1/documents?wait=true", content=body, headers=headers)
    assert response.status_code == 201, response.text
    document = response.json()
    assert document["filename"] == "evil.txt"
    listed = client.get("/v1/documents").json()["data"]
    assert [d["filename"] for d in listed] == ["evil.txt"]
    content = client.get(f"/v1/files/{document['file_id']}/content")
    assert "\x1b" not in content.headers["content-disposition"] and "evil.txt" in content.headers["content-disposition"]


@pytest.mark.parametrize("raw", [b"..", b"\x1b[0m", b"a\\b\\..\\", b"./"])
def test_a_file_name_with_nothing_printable_left_is_upload(client: httpx.Client, raw: bytes) -> None:
    body, headers = _multipart(raw, b"some text " + raw)
    response = client.post("/v1/documents", content=body, headers=headers)
    assert response.status_code == 201, response.text
    assert response.json()["filename"] == "upload"


def test_a_long_file_name_is_a_400_with_a_code(client: httpx.Client) -> None:
    response = client.post("/v1/documents", files={"file": ("a" * 300 + ".txt", b"hello")})
    message = _error(response, 400, "string_above_max_length", "file")
    assert "255" in message and "Rename" in message
    assert client.get("/v1/documents").json()["data"] == []


def test_a_file_name_too_long_for_the_multipart_parser_is_a_400_with_a_code(client: httpx.Client) -> None:
    response = client.post("/v1/files", files={"file": ("a" * 10_000 + ".txt", b"hi")})
    message = _error(response, 400, "invalid_multipart", None)
    assert "255 characters" in message


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/v1/documents", {"GET", "HEAD", "POST"}),
        ("PATCH", "/v1/vector_stores/vs_x", {"GET", "HEAD", "POST", "DELETE"}),
        ("POST", "/v1/models", {"GET", "HEAD"}),
        ("DELETE", "/v1/chat/completions", {"POST"}),
    ],
)
def test_a_405_says_which_methods_the_path_takes(client: httpx.Client, method: str, path: str, allowed: set) -> None:
    response = client.request(method, path)
    _error(response, 405, "method_not_allowed", None)
    assert {m.strip() for m in response.headers["allow"].split(",")} == allowed
