"""API keys, workspaces and signed source links, over real HTTP with auth on."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import openai
import pytest
from tests_support import WAIT

from calypso.api.app import create_app
from calypso.citations.links import signature
from calypso.config import Settings
from calypso.services import open_services
from testkit.live_server import LiveServer, free_port

ADMIN = "admin-secret-for-tests"
QUESTION = "How many days do customers have to request a full refund?"


@pytest.fixture
def secured(tmp_path: Path):
    settings = Settings(home=tmp_path / "home", auth="on", admin_key=ADMIN)
    services = open_services(settings)
    app = create_app(settings, services)
    with LiveServer(app, free_port()) as live:
        yield live, app
    services.close()


def _key(base: str, workspace: str) -> tuple[str, str]:
    response = httpx.post(
        f"{base}/v1/admin/keys",
        json={"workspace": workspace, "name": "t"},
        headers={"Authorization": f"Bearer {ADMIN}"},
    )
    assert response.status_code == 201, response.text
    return response.json()["key"], response.json()["id"]


def _client(base: str, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=base, headers=headers, timeout=60)


@pytest.fixture
def two_workspaces(secured, data_dir: Path):
    live, app = secured
    key_a, id_a = _key(live.url, "acme")
    key_b, _ = _key(live.url, "globex")
    a, b = _client(live.url, key_a), _client(live.url, key_b)
    refund = Path(__file__).resolve().parents[2] / "src/calypso/demo/refund_policy_2026.md"
    doc = a.post("/v1/documents", files={"file": (refund.name, refund.read_bytes())}, params=WAIT).json()
    pdf = data_dir / "ingestion-docs/pdf/federal-register-2020-17221.pdf"
    pdf_doc = a.post("/v1/documents", files={"file": (pdf.name, pdf.read_bytes())}, params=WAIT).json()
    response = a.post("/v1/responses", json={"input": QUESTION, "include": ["inline_citations"]}).json()
    conversation = a.post("/v1/conversations", json={}).json()
    bot = a.post("/v1/bots", json={"id": "acme-bot", "namespace": "general"})
    assert bot.status_code == 201, bot.text
    yield {
        "live": live,
        "app": app,
        "a": a,
        "b": b,
        "key_a": key_a,
        "key_id_a": id_a,
        "doc": doc,
        "pdf": pdf_doc,
        "response": response,
        "conversation": conversation,
        "refund_bytes": refund.read_bytes(),
    }
    a.close()
    b.close()


def test_foreign_ids_answer_404_never_data(two_workspaces) -> None:
    w = two_workspaces
    b, doc, resp, conv = w["b"], w["doc"], w["response"], w["conversation"]
    attempts = [
        ("GET", f"/v1/documents/{doc['id']}", None),
        ("GET", f"/v1/documents/{doc['id']}/chunks", None),
        ("DELETE", f"/v1/documents/{doc['id']}", None),
        ("GET", f"/v1/files/{doc['file_id']}", None),
        ("GET", f"/v1/files/{doc['file_id']}/content", None),
        ("DELETE", f"/v1/files/{doc['file_id']}", None),
        ("GET", f"/v1/responses/{resp['id']}", None),
        ("DELETE", f"/v1/responses/{resp['id']}", None),
        ("GET", f"/v1/conversations/{conv['id']}", None),
        ("POST", f"/v1/conversations/{conv['id']}/messages", {"content": QUESTION}),
        ("DELETE", f"/v1/conversations/{conv['id']}", None),
        ("GET", "/v1/bots/acme-bot", None),
        ("GET", "/v1/models/acme-bot", None),
        ("POST", "/v1/chat/completions", {"model": "acme-bot", "messages": [{"role": "user", "content": QUESTION}]}),
        ("POST", "/v1/responses", {"model": "acme-bot", "input": QUESTION}),
    ]
    for method, path, body in attempts:
        response = b.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.status_code, response.text)
        assert set(response.json()) == {"error"}
    # OpenAI answers an unknown previous_response_id with a 400: another workspace's is unknown.
    follow_up = b.post("/v1/responses", json={"input": "and then?", "previous_response_id": resp["id"]})
    assert follow_up.status_code == 400 and follow_up.json()["error"]["code"] == "previous_response_not_found"
    # Lists and searches show nothing of the other workspace.
    assert b.get("/v1/documents").json()["data"] == []
    assert b.get("/v1/files").json()["data"] == []
    assert b.get("/v1/conversations").json()["data"] == []
    assert "acme-bot" not in [m["id"] for m in b.get("/v1/models").json()["data"]]
    assert b.post("/v1/search", json={"query": "refund"}).json()["data"] == []
    assert b.post("/v1/search", json={"query": "refund", "document_ids": [doc["id"]]}).json()["data"] == []
    answer = b.post(
        "/v1/chat/completions", json={"model": "calypso-rag-agent", "messages": [{"role": "user", "content": QUESTION}]}
    )
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["citations"] == []
    # And the owner still has everything.
    assert w["a"].get(f"/v1/documents/{doc['id']}").status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer not-a-key"},
        {"Authorization": "Bearer two words"},
    ],
)
def test_missing_malformed_and_unknown_keys_get_401(two_workspaces, headers: dict) -> None:
    base = two_workspaces["live"].url
    for method, path in [
        ("GET", "/v1/documents"),
        ("POST", "/v1/search"),
        ("GET", "/v1/models"),
        ("POST", "/v1/responses"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/conversations"),
        ("GET", "/v1/files"),
        ("GET", "/v1/bots"),
    ]:
        response = httpx.request(method, base + path, headers=headers, json={})
        assert response.status_code == 401, (method, path, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"


def test_revoked_key_fails_at_once(two_workspaces) -> None:
    w = two_workspaces
    assert w["a"].get("/v1/documents").status_code == 200
    revoked = httpx.delete(
        f"{w['live'].url}/v1/admin/keys/{w['key_id_a']}", headers={"Authorization": f"Bearer {ADMIN}"}
    )
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    assert w["a"].get("/v1/documents").status_code == 401


def test_admin_api_needs_the_admin_key(two_workspaces) -> None:
    base = two_workspaces["live"].url
    assert httpx.get(f"{base}/v1/admin/keys").status_code == 401
    assert (
        httpx.get(f"{base}/v1/admin/keys", headers={"Authorization": f"Bearer {two_workspaces['key_a']}"}).status_code
        == 401
    )
    listing = httpx.get(f"{base}/v1/admin/keys", headers={"Authorization": f"Bearer {ADMIN}"}).json()["data"]
    assert {k["workspace"] for k in listing} == {"acme", "globex"}
    assert all("key" not in k and "hash" not in str(k) for k in listing)


def test_openai_sdk_with_a_workspace_key(two_workspaces) -> None:
    w = two_workspaces
    client = openai.OpenAI(base_url=f"{w['live'].url}/v1", api_key=w["key_a"], max_retries=0)
    response = client.responses.create(model="calypso-rag-agent", input=QUESTION)
    assert "30 days" in response.output_text
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{w['live'].url}/v1", api_key="wrong", max_retries=0).models.list()


def test_signed_link_opens_without_a_key_and_rejects_tampering(two_workspaces) -> None:
    w = two_workspaces
    annotations = w["response"]["output"][-1]["content"][0]["annotations"]
    url = annotations[0]["url"]
    assert "signature=" in url and "expires=" in url and "/view?" in url
    opened = httpx.get(url)  # no Authorization header: the passage viewer
    assert opened.status_code == 200 and '<mark id="quote">' in opened.text

    parts = urlsplit(url)
    query = parse_qs(parts.query)
    expires, sig = int(query["expires"][0]), query["signature"][0]
    # The same access opens the original bytes ("download the original").
    content = f"{parts.scheme}://{parts.netloc}{parts.path.replace('/view', '/content')}"
    original = httpx.get(content, params={"expires": expires, "signature": sig})
    assert original.status_code == 200 and original.content == w["refund_bytes"]
    for base in (f"{parts.scheme}://{parts.netloc}{parts.path}", content):
        _refuses_tampering(w, base, expires, sig)


def _refuses_tampering(w, base: str, expires: int, sig: str) -> None:
    tampered_sig = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    for params in (
        {"expires": expires, "signature": tampered_sig},
        {"expires": expires + 3600, "signature": sig},
        {"expires": expires},
        {"signature": sig},
    ):
        response = httpx.get(base, params=params)
        assert response.status_code == 403, params
        assert response.json()["error"]["type"] == "permission_error"
    # Another file's id with this signature fails too.
    other = base.replace(w["doc"]["file_id"], w["pdf"]["file_id"])
    assert httpx.get(other, params={"expires": expires, "signature": sig}).status_code == 403
    # An expired link, correctly signed, is refused.
    secret = w["app"].state.services.signing_secret
    past = int(time.time()) - 10
    expired_sig = signature(secret, w["doc"]["file_id"], "acme", past)
    assert httpx.get(base, params={"expires": past, "signature": expired_sig}).status_code == 403
    # Without a signature the content route needs a key.
    assert httpx.get(base).status_code == 401


def test_pdf_link_points_at_the_cited_page(two_workspaces) -> None:
    w = two_workspaces
    response = (
        w["a"]
        .post(
            "/v1/responses",
            json={
                "input": "What does the Federal Register rule amend?",
                "include": ["inline_citations"],
                "tools": [
                    {
                        "type": "file_search",
                        "vector_store_ids": ["general"],
                        "filters": {"type": "eq", "key": "document_id", "value": w["pdf"]["id"]},
                    }
                ],
            },
        )
        .json()
    )
    annotations = response["output"][-1]["content"][0]["annotations"]
    assert annotations, response["output"][-1]["content"][0]["text"]
    url = annotations[0]["url"]
    assert url.endswith(f"&page={annotations[0]['_aicore']['page_number']}")
    viewer = httpx.get(url)
    assert viewer.headers["content-type"].startswith("text/html") and "data:image/png;base64," in viewer.text
    assert f"#page={annotations[0]['_aicore']['page_number']}" in viewer.text  # its "download" / "open" links
    content = url.split("?")[0].replace("/view", "/content")
    query = parse_qs(urlsplit(url).query)
    opened = httpx.get(content, params={"expires": query["expires"][0], "signature": query["signature"][0]})
    assert opened.headers["content-type"] == "application/pdf"


def test_public_base_url_is_used_for_links(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "h", public_base_url="https://calypso.example.org/")
    services = open_services(settings)
    from calypso.demo import ingest_demo

    ingest_demo(services.ingestion)
    with LiveServer(create_app(settings, services), free_port()) as live:
        body = httpx.post(f"{live.url}/v1/responses", json={"input": QUESTION}).json()
    services.close()
    assert body["citations"] and all(u.startswith("https://calypso.example.org/v1/files/") for u in body["citations"])


def test_auth_auto_is_off_only_on_loopback() -> None:
    from calypso.api.auth import auth_enabled

    assert not auth_enabled(Settings(host="127.0.0.1"))
    assert not auth_enabled(Settings(host="localhost"))
    assert auth_enabled(Settings(host="0.0.0.0"))
    assert auth_enabled(Settings(host="192.168.1.5"))
    assert auth_enabled(Settings(host="127.0.0.1", auth="on"))
    assert not auth_enabled(Settings(host="0.0.0.0", auth="off"))


def test_another_workspaces_vector_stores_and_files_answer_404(two_workspaces) -> None:
    w = two_workspaces
    a, b, doc = w["a"], w["b"], w["doc"]
    store = a.post("/v1/vector_stores", json={"name": "acme"}).json()
    attached = a.post(f"/v1/vector_stores/{store['id']}/files", json={"file_id": doc["file_id"]})
    assert attached.status_code == 200, attached.text
    own = b.post("/v1/vector_stores", json={"name": "globex"}).json()
    attempts = [
        ("GET", f"/v1/vector_stores/{store['id']}", None),
        ("POST", f"/v1/vector_stores/{store['id']}", {"name": "mine"}),
        ("DELETE", f"/v1/vector_stores/{store['id']}", None),
        ("GET", f"/v1/vector_stores/{store['id']}/files", None),
        ("GET", f"/v1/vector_stores/{store['id']}/files/{doc['file_id']}", None),
        ("GET", f"/v1/vector_stores/{store['id']}/files/{doc['file_id']}/content", None),
        ("DELETE", f"/v1/vector_stores/{store['id']}/files/{doc['file_id']}", None),
        ("POST", f"/v1/vector_stores/{store['id']}/search", {"query": "refund"}),
        ("GET", "/v1/vector_stores/general", None),  # acme's namespace, not globex's
        ("POST", f"/v1/vector_stores/{own['id']}/files", {"file_id": doc["file_id"]}),
        (
            "POST",
            "/v1/responses",
            {"input": QUESTION, "tools": [{"type": "file_search", "vector_store_ids": [store["id"]]}]},
        ),
    ]
    for method, path, body in attempts:
        response = b.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.status_code, response.text)
        assert set(response.json()) == {"error"}
    assert [s["id"] for s in b.get("/v1/vector_stores").json()["data"]] == [own["id"]]
    assert a.get(f"/v1/vector_stores/{store['id']}").json()["file_counts"]["total"] == 1
