"""Bots: /v1/bots CRUD, the bots file, the built-in default, /v1/models, workspaces, and retrieval scope.

In process (the ``api`` fixture) and, for the official openai SDK, over real HTTP on loopback. The app is built
over the test's services.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from calypso.api.app import create_app
from calypso.bots import DEFAULT_BOT_ID, Bot, BotsFileError
from calypso.config import Settings
from calypso.errors import NotFound, StorageError
from calypso.services import Services, open_services
from calypso.services.bots import BotService
from calypso.services.ingestion import Upload

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests_support import eval_data_dir

from testkit.live_server import LiveServer
from testkit.live_server import free_port as _free_port  # noqa: E402

BOTS_TOML = """
[[bots]]
id = "fee-schedule"
namespace = "fees"
passage_count = 3
marker_style = "source"
system_prompt = "Answer only about fees."

[bots.generator_options]
temperature = 0.2

[[bots]]
id = "chit-chat"
namespace = ""          # no knowledge base

[[bots]]
id = "team-a-only"
workspace = "a"
"""


def start(services: Services) -> tuple[LiveServer, object]:
    app = create_app(services.settings, services)
    live = LiveServer(app, _free_port()).__enter__()
    return live, app


@pytest.fixture
def live(services: Services) -> Iterator[LiveServer]:
    server, _ = start(services)
    try:
        yield server
    finally:
        server.__exit__(None, None, None)


@pytest.fixture
def client(api: httpx.Client) -> httpx.Client:
    """The app in process: CRUD and validation need no socket (the SDK tests use ``live``)."""
    return api


@pytest.fixture
def sdk(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live.url}/v1", api_key="test-key", max_retries=0)


def assert_error(response: httpx.Response, status: int, param: str | None, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param, error
    if code is not None:
        assert error["code"] == code, error
    return error


# -- CRUD -------------------------------------------------------------------------------------


def test_crud_round_trip(client: httpx.Client) -> None:
    created = client.post(
        "/v1/bots",
        json={
            "id": "fees",
            "namespace": "fees",
            "passage_count": 3,
            "generator_options": {"temperature": 0.1, "max_tokens": 200},
        },
    )
    assert created.status_code == 201, created.text
    bot = created.json()
    assert bot["object"] == "bot" and bot["id"] == "fees" and bot["source"] == "api"
    assert bot["namespace"] == "fees" and bot["passage_count"] == 3 and bot["created_at"] > 0
    # Defaults filled in for everything not sent.
    assert bot["include_citations"] is True and bot["marker_style"] == "numeric" and bot["sources_policy"] == "visible"
    assert bot["inline_citations"] is False and bot["document_ids"] is None and bot["generator"] is None
    assert bot["generator_options"] == {"temperature": 0.1, "max_tokens": 200}

    assert client.get("/v1/bots/fees").json() == bot
    listing = client.get("/v1/bots").json()
    assert listing["object"] == "list" and listing["has_more"] is False
    assert [b["id"] for b in listing["data"]] == [DEFAULT_BOT_ID, "fees"]

    patched = client.patch("/v1/bots/fees", json={"marker_style": "source", "document_ids": ["d1", "d2"]})
    assert patched.status_code == 200, patched.text
    after = patched.json()
    assert after["marker_style"] == "source" and after["document_ids"] == ["d1", "d2"]
    assert after["passage_count"] == 3 and after["namespace"] == "fees"  # untouched fields kept
    assert after["created_at"] == bot["created_at"]
    assert client.patch("/v1/bots/fees", json={"namespace": None}).json()["namespace"] is None

    deleted = client.delete("/v1/bots/fees")
    assert deleted.json() == {"id": "fees", "object": "bot.deleted", "deleted": True}
    assert_error(client.get("/v1/bots/fees"), 404, "bot_id", "bot_not_found")
    assert_error(client.delete("/v1/bots/fees"), 404, "id", "bot_not_found")
    assert_error(client.patch("/v1/bots/fees", json={"passage_count": 2}), 404, "id", "bot_not_found")


def test_omitted_namespace_is_the_default_and_null_means_no_knowledge_base(client: httpx.Client) -> None:
    assert client.post("/v1/bots", json={"id": "plain"}).json()["namespace"] == "general"
    assert client.post("/v1/bots", json={"id": "no-kb", "namespace": None}).json()["namespace"] is None


@pytest.mark.parametrize(
    "body, param, code",
    [
        ({"id": "x", "marker_style": "footnote"}, "marker_style", "invalid_value"),
        ({"id": "x", "passage_count": 0}, "passage_count", "integer_below_min_value"),
        ({"id": "x", "passage_count": 51}, "passage_count", "integer_above_max_value"),
        ({"id": "x", "passage_count": "5"}, "passage_count", "invalid_type"),
        ({"id": "x", "namespace": "bad namespace!"}, "namespace", "invalid_namespace"),
        ({"id": "x", "sources_policy": "secret"}, "sources_policy", "invalid_value"),
        ({"id": "x", "include_citations": "yes"}, "include_citations", "invalid_type"),
        ({"id": "x", "generator": "gpt-nonsense"}, "generator", "invalid_value"),
        ({"id": "x", "generator_options": {"temperature": 7}}, "generator_options", "invalid_value"),
        ({"id": "x", "document_ids": []}, "document_ids", "invalid_value"),
        ({"id": "x", "document_ids": ["ok", 3]}, "document_ids[1]", "invalid_type"),
        ({"id": "-starts-with-dash"}, "id", "invalid_value"),
        ({"id": "x" * 65}, "id", "invalid_value"),
        ({"namespace": "general"}, "id", "missing_required_parameter"),
        ({"id": "x", "source": "file"}, "source", "unknown_parameter"),
    ],
)
def test_validation_errors_name_the_param(client: httpx.Client, body: dict, param: str, code: str) -> None:
    error = assert_error(client.post("/v1/bots", json=body), 400, param, code)
    assert error["type"] == "invalid_request_error" and error["message"]
    assert client.get("/v1/bots/x").status_code == 404  # nothing half-created


def test_patch_validation_errors_name_the_param(client: httpx.Client) -> None:
    assert client.post("/v1/bots", json={"id": "b"}).status_code == 201
    assert_error(client.patch("/v1/bots/b", json={"passage_count": 0}), 400, "passage_count")
    assert_error(client.patch("/v1/bots/b", json={"marker_style": "bold"}), 400, "marker_style")
    assert_error(client.patch("/v1/bots/b", json={"id": "renamed"}), 400, "id")
    assert_error(client.patch("/v1/bots/b", content=b"[1, 2]"), 400, None)
    assert_error(client.post("/v1/bots", content=b"{not json"), 400, None)
    assert client.get("/v1/bots/b").json()["passage_count"] == 5  # a refused PATCH changes nothing


def test_duplicate_id_is_409(client: httpx.Client) -> None:
    assert client.post("/v1/bots", json={"id": "dup"}).status_code == 201
    error = assert_error(client.post("/v1/bots", json={"id": "dup"}), 409, "id", "bot_exists")
    assert "PATCH" in error["message"]


# -- the built-in default ---------------------------------------------------------------------


def test_default_bot_present_and_overridable(client: httpx.Client) -> None:
    default = client.get(f"/v1/bots/{DEFAULT_BOT_ID}").json()
    assert default["source"] == "default" and default["namespace"] == "general"
    assert_error(client.delete(f"/v1/bots/{DEFAULT_BOT_ID}"), 409, "id", "bot_read_only")

    patched = client.patch(f"/v1/bots/{DEFAULT_BOT_ID}", json={"marker_style": "source"}).json()
    assert patched["source"] == "api" and patched["marker_style"] == "source" and patched["namespace"] == "general"
    assert [b["id"] for b in client.get("/v1/bots").json()["data"]] == [DEFAULT_BOT_ID]  # replaced, not doubled

    # Deleting the override brings the built-in back.
    assert client.delete(f"/v1/bots/{DEFAULT_BOT_ID}").json()["deleted"] is True
    assert client.get(f"/v1/bots/{DEFAULT_BOT_ID}").json()["source"] == "default"

    # Creating a bot with the built-in's id overrides it too.
    created = client.post("/v1/bots", json={"id": DEFAULT_BOT_ID, "namespace": "other"})
    assert created.status_code == 201 and created.json()["namespace"] == "other"


# -- the bots file ----------------------------------------------------------------------------


@pytest.fixture
def file_settings(settings: Settings, tmp_path: Path) -> Settings:
    path = tmp_path / "bots.toml"
    path.write_text(BOTS_TOML)
    settings.bots_file = path
    return settings


def test_toml_bots_are_loaded_and_read_only(file_settings: Settings) -> None:
    services = open_services(file_settings)
    server, _ = start(services)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            listing = client.get("/v1/bots").json()["data"]
            assert [b["id"] for b in listing] == ["calypso-rag-agent", "chit-chat", "fee-schedule"]
            fee = next(b for b in listing if b["id"] == "fee-schedule")
            assert fee["source"] == "file" and fee["namespace"] == "fees" and fee["passage_count"] == 3
            assert fee["marker_style"] == "source" and fee["generator_options"] == {"temperature": 0.2}
            assert client.get("/v1/bots/chit-chat").json()["namespace"] is None

            for response in (
                client.patch("/v1/bots/fee-schedule", json={"passage_count": 4}),
                client.delete("/v1/bots/fee-schedule"),
                client.post("/v1/bots", json={"id": "fee-schedule"}),
            ):
                error = assert_error(response, 409, "id", "bot_read_only")
                assert "bots.toml" in error["message"]
            assert client.get("/v1/bots/fee-schedule").json()["passage_count"] == 3
    finally:
        server.__exit__(None, None, None)
        services.close()


def test_toml_bot_workspace(file_settings: Settings, services: Services) -> None:
    directory = BotService(file_settings, services.storage.bots)
    assert "team-a-only" in [b.id for b in directory.all("a")]
    assert "team-a-only" not in [b.id for b in directory.all("default")]
    assert "fee-schedule" not in [b.id for b in directory.all("a")]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("[[bots]]\nid = 'a'\nnamespace = 'x'\n[[bots", "not valid TOML"),
        ("[[bots]]\nid = 'a'\npassage_count = 0\n", "passage_count"),
        ("[[bots]]\nid = 'a'\nmarker_style = 'bold'\n", "marker_style"),
        ("[[bots]]\nnamespace = 'x'\n", "Missing required parameter: id"),
        ("[[bots]]\nid = 'a'\n[[bots]]\nid = 'a'\n", "declared twice"),
        ("[[bots]]\nid = 'a'\ncolour = 'red'\n", "colour"),
        ("[[bot]]\nid = 'a'\n", "unknown top-level key 'bot'"),
        ("bots = 3\n", "array of tables"),
    ],
)
def test_bad_bots_file_fails_at_start_naming_file_and_problem(
    settings: Settings, tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "broken-bots.toml"
    path.write_text(text)
    settings.bots_file = path
    with pytest.raises(BotsFileError) as caught:
        BotService(settings)
    assert str(path) in str(caught.value) and problem in str(caught.value)


def test_missing_bots_file_fails_at_start(settings: Settings, tmp_path: Path) -> None:
    settings.bots_file = tmp_path / "nope.toml"
    with pytest.raises(BotsFileError, match="does not exist"):
        BotService(settings)


# -- /v1/models and workspaces ----------------------------------------------------------------


def test_models_list_is_exactly_the_workspace_bots(client: httpx.Client, sdk: openai.OpenAI) -> None:
    for bot_id in ("alpha", "beta"):
        assert client.post("/v1/bots", json={"id": bot_id}).status_code == 201
    models = sdk.models.list()
    assert [m.id for m in models.data] == ["alpha", "beta", DEFAULT_BOT_ID]
    assert all(m.object == "model" and m.owned_by == "calypso" and isinstance(m.created, int) for m in models.data)
    assert [m.id for m in models.data] == sorted(b["id"] for b in client.get("/v1/bots").json()["data"])

    assert sdk.models.retrieve("alpha").id == "alpha"
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.models.retrieve("gamma")
    assert caught.value.code == "model_not_found" and caught.value.param == "model"


def test_workspaces_do_not_see_each_other(settings: Settings, services: Services) -> None:
    directory = BotService(settings, services.storage.bots)
    directory.create("a", {"id": "secret-bot", "namespace": "hr"})
    assert "secret-bot" in [b.id for b in directory.all("a")]
    assert [b.id for b in directory.all("b")] == [DEFAULT_BOT_ID]  # the default exists in every workspace
    assert directory.get(None, "b").id == DEFAULT_BOT_ID
    with pytest.raises(NotFound) as caught:
        directory.get("secret-bot", "b")
    assert caught.value.code == "model_not_found" and "secret-bot" not in caught.value.message.split("use one of:")[1]
    with pytest.raises(NotFound):
        directory.update("b", "secret-bot", {"passage_count": 2})
    with pytest.raises(NotFound):
        directory.delete("b", "secret-bot")
    # The same id may exist independently in another workspace.
    directory.create("b", {"id": "secret-bot", "namespace": "other"})
    assert directory.get("secret-bot", "a").namespace == "hr"
    assert directory.get("secret-bot", "b").namespace == "other"
    # Overriding the default in one workspace leaves the others alone.
    directory.update("a", DEFAULT_BOT_ID, {"passage_count": 9})
    assert directory.get(DEFAULT_BOT_ID, "a").passage_count == 9
    assert directory.get(DEFAULT_BOT_ID, "b").passage_count == settings.passage_count


def test_bot_model_validates_directly() -> None:
    assert Bot(id="seam", namespace="general").document_ids is None  # keyword construction, as test seams do
    with pytest.raises(StorageError, match="needs a store"):
        BotService(Settings()).create("default", {"id": "no-store"})  # no store: refused, clearly


# -- retrieval scope: a bot restricted to documents never cites any other ----------------------


QUESTION = "How does GitHub share personal data with third parties and what are my rights to access or delete it?"


def test_document_restricted_bot_never_cites_an_excluded_document(settings: Settings, services: Services) -> None:
    kb = services.ingestion
    docs = eval_data_dir() / "ingestion-docs" / "md"
    privacy = kb.ingest(Upload((docs / "github-general-privacy-statement.md").read_bytes(), "privacy.md")).document
    terms = kb.ingest(Upload((docs / "github-terms-of-service.md").read_bytes(), "terms.md")).document
    # The test only proves something if the best passage sits in the excluded document.
    best = services.search.search(QUESTION, services.search.scope(max_results=settings.passage_count))
    assert best[0].document.id == privacy.id

    server, _ = start(services)
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for bot in ({"id": "terms-only", "document_ids": [terms.id]}, {"id": "everything"}):
                assert client.post("/v1/bots", json=bot).status_code == 201
        sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)

        def chat_cited(model: str) -> set[str]:
            completion = sdk.chat.completions.create(model=model, messages=[{"role": "user", "content": QUESTION}])
            message = completion.choices[0].message
            citations = message.model_extra["citations"]
            assert citations, message
            return {c["document_id"] for c in citations}

        def responses_cited(model: str) -> set[str]:
            response = sdk.responses.create(model=model, input=QUESTION)
            files = {
                a.file_id
                for item in response.output
                if item.type == "message"
                for part in item.content
                for a in part.annotations
            }
            searched = {
                r.file_id for item in response.output if item.type == "file_search_call" for r in (item.results or [])
            }
            assert files, response
            return files | searched

        assert privacy.id in chat_cited("everything")  # unrestricted, the privacy statement is cited
        assert chat_cited("terms-only") == {terms.id}
        assert privacy.file_id in responses_cited("everything")
        assert responses_cited("terms-only") == {terms.file_id}
    finally:
        server.__exit__(None, None, None)
