"""What a client may store is bounded as OpenAI bounds it (issue 26): metadata 16 pairs, keys up to 64
and values up to 512 characters; names 256; a 400 in OpenAI's shape names the field. Real HTTP on
loopback, and the official openai SDK where it sends the field."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from calypso.api.app import create_app
from calypso.config import Settings
from testkit.live_server import LiveServer, free_port

PAIRS_17 = {f"k{i}": "v" for i in range(17)}
LONG_KEY = {"k" * 65: "v"}
LONG_VALUE = {"note": "x" * 513}
AT_THE_LIMITS = {**{f"k{i}": "v" for i in range(15)}, "k" * 64: "x" * 512}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    settings = Settings(home=tmp_path_factory.mktemp("bounds") / "home", embedding_model="none")
    with LiveServer(create_app(settings), free_port()) as server:
        yield server


def _refused(response: httpx.Response, code: str, param: str) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, param), error
    assert len(response.content) < 2_000  # a refused 1 MB value is not echoed back
    return error


OBJECTS = [
    (PAIRS_17, "object_above_max_properties", ""),
    (LONG_KEY, "string_above_max_length", "." + "k" * 65),
    (LONG_VALUE, "string_above_max_length", ".note"),
    ({"n": 5}, "invalid_type", ".n"),
]


@pytest.mark.parametrize(("metadata", "code", "suffix"), OBJECTS)
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/vector_stores", {"name": "s"}),
        ("/v1/conversations", {}),
        ("/v1/responses", {"input": "hi", "store": False}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    ],
)
def test_metadata_is_bounded_everywhere(
    live: LiveServer, path: str, body: dict, metadata: dict, code: str, suffix: str
) -> None:
    response = httpx.post(f"{live.url}{path}", json={**body, "metadata": metadata}, timeout=30)
    _refused(response, code, "metadata" + suffix)


def test_ten_thousand_keys_are_refused_without_reading_them(live: LiveServer) -> None:
    metadata = {f"key{i}": "x" * 100 for i in range(10_000)}
    error = _refused(
        httpx.post(f"{live.url}/v1/conversations", json={"metadata": metadata}),
        "object_above_max_properties",
        "metadata",
    )
    assert "at most 16" in error["message"] and "10000" in error["message"]


@pytest.mark.parametrize("path", ["/v1/vector_stores", "/v1/conversations"])
def test_metadata_at_the_limits_is_stored(live: LiveServer, path: str) -> None:
    response = httpx.post(f"{live.url}{path}", json={"metadata": AT_THE_LIMITS})
    assert response.status_code in (200, 201), response.text
    assert response.json()["metadata"] == AT_THE_LIMITS


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("name", "n" * 257, "string_above_max_length"),
        ("description", "d" * 513, "string_above_max_length"),
        ("name", 5, "invalid_type"),
    ],
)
def test_vector_store_name_and_description_are_bounded(live: LiveServer, field: str, value: Any, code: str) -> None:
    before = httpx.get(f"{live.url}/v1/vector_stores").json()["data"]
    _refused(httpx.post(f"{live.url}/v1/vector_stores", json={field: value}), code, field)
    assert httpx.get(f"{live.url}/v1/vector_stores").json()["data"] == before


def test_the_sdk_sees_the_bound_on_a_store_name_and_its_update(live: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.create(name="n" * 257)
    assert (info.value.code, info.value.param) == ("string_above_max_length", "name")
    store = client.vector_stores.create(name="n" * 256)
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.update(store.id, name="n" * 300)
    assert info.value.param == "name"
    with pytest.raises(openai.BadRequestError) as info:
        client.vector_stores.update(store.id, metadata=PAIRS_17)
    assert (info.value.code, info.value.param) == ("object_above_max_properties", "metadata")
    assert client.vector_stores.retrieve(store.id).name == "n" * 256


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/chat/completions"])
def test_user_is_bounded(live: LiveServer, path: str) -> None:
    body = {"input": "hi"} if path == "/v1/responses" else {"messages": [{"role": "user", "content": "hi"}]}
    _refused(httpx.post(f"{live.url}{path}", json={**body, "user": "u" * 257}), "string_above_max_length", "user")


def test_responses_metadata_keeps_its_aicore_object(live: LiveServer) -> None:
    ok = httpx.post(
        f"{live.url}/v1/responses",
        json={"input": "hi", "metadata": {"_aicore": {"sources_appendix": "omit"}, "t": "1"}},
    )
    assert ok.status_code == 200, ok.text
    _refused(
        httpx.post(f"{live.url}/v1/responses", json={"input": "hi", "metadata": {"t": {"x": 1}}}),
        "invalid_type",
        "metadata",
    )


@pytest.mark.parametrize(("metadata", "code", "suffix"), OBJECTS[:3])
def test_upload_metadata_is_bounded(live: LiveServer, metadata: dict, code: str, suffix: str) -> None:
    files = {"file": ("a.txt", b"some upload text " + json.dumps(metadata)[:20].encode())}
    response = httpx.post(f"{live.url}/v1/documents", files=files, data={"metadata": json.dumps(metadata)})
    _refused(response, code, "metadata" + suffix)
    crawl = httpx.post(f"{live.url}/v1/documents/crawl", json={"url": "http://127.0.0.1:9/x", "metadata": metadata})
    _refused(crawl, code, "metadata" + suffix)


def test_upload_metadata_may_hold_numbers_and_booleans(live: LiveServer) -> None:
    metadata = {"year": 2024, "draft": False, "score": 0.5, "team": "support"}
    response = httpx.post(
        f"{live.url}/v1/documents",
        files={"file": ("m.txt", b"metadata kinds")},
        data={"metadata": json.dumps(metadata)},
    )
    assert response.status_code == 201, response.text
    assert response.json()["metadata"] == metadata


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"file_ids": ["file-x"], "attributes": PAIRS_17}, "attributes"),
        ({"files": [{"file_id": "file-x", "attributes": LONG_VALUE}]}, "files[0].attributes.note"),
    ],
)
def test_file_attributes_are_bounded(live: LiveServer, body: dict, param: str) -> None:
    store = httpx.post(f"{live.url}/v1/vector_stores", json={"name": "attrs"}).json()["id"]
    response = httpx.post(f"{live.url}/v1/vector_stores/{store}/file_batches", json=body)
    error = _refused(response, response.json()["error"]["code"], param)
    assert error["code"] in ("object_above_max_properties", "string_above_max_length")
    attach = httpx.post(
        f"{live.url}/v1/vector_stores/{store}/files", json={"file_id": "file-x", "attributes": {"a": [1]}}
    )
    _refused(attach, "invalid_type", "attributes.a")
