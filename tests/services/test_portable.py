"""A knowledge base moved SQLite → PostgreSQL → SQLite through `calypso export`'s archive (issue 44).

The source holds the Alps PDF, a DOCX, a Chinese document, a vector store whose files carry attributes, a
bot, a conversation of two turns, an API key and a policy, with the real embedding model's vectors. After
each move the same questions get the same answers and citations over the HTTP API, every carried table
holds the same rows (ids kept), the vectors are equal, the key still opens the API, and importing twice
changes nothing. A truncated, corrupt, short or newer archive leaves the target as it was.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from tests_support import eval_data_dir

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.errors import ArchiveTooNew, ArchiveUnreadable, Conflict
from calypso.services import Services, open_services, open_storage
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload
from calypso.services.portable import read_archive, write_archive
from calypso.store.base import Storage
from calypso.store.portable import NOT_CARRIED, TABLES, Scope
from testkit.postgres import PgServer

pytest.importorskip("onnxruntime")

MODEL = "minilm-l6-v2-int8"
SECRET = "portable-test-signing-secret-0123456789"
ALPS = "alps-wiki-qa/alps_wiki.pdf"
DOCX = "ingestion-docs/docx/word_sample.docx"
CHINESE = (
    "# 阿尔卑斯山\n\n阿尔卑斯山是欧洲最高、延伸最广的山脉，横跨八个国家。\n\n"
    "## 勃朗峰\n\n勃朗峰位于法国和意大利边境，海拔4808米，是阿尔卑斯山的最高峰。\n\n"
    "## 冰川\n\n阿尔卑斯山的冰川在过去一百年中明显退缩，夏季融水供给莱茵河和罗讷河。\n"
)
QUESTIONS = [
    ("calypso-rag-agent", "How high is Mont Blanc?"),
    ("calypso-rag-agent", "Which tectonic plates collided to form the Alps?"),
    ("calypso-rag-agent", "勃朗峰海拔多少米？"),
    ("alps-bot", "What happened to the glaciers?"),
]


def _settings(home: Path, database_url: str = "") -> Settings:
    return Settings(
        home=home, database_url=database_url, embedding_model=MODEL, signing_secret=SECRET, auth="on", chunk_size=800
    )


def _client(settings: Settings, services: Services) -> TestClient:
    return TestClient(create_app(settings, services), raise_server_exceptions=False)


def _wait_completed(services: Services) -> None:
    import time

    deadline = time.monotonic() + 120
    while services.storage.jobs.queue_stats().queued + services.storage.jobs.queue_stats().running:
        assert time.monotonic() < deadline, "ingestion did not finish"
        time.sleep(0.1)


def _build_source(settings: Settings) -> dict[str, Any]:
    """The source knowledge base, built as a user would (services for the files, the API for the rest)."""
    made: dict[str, Any] = {}
    services = open_services(settings)
    try:
        for path in (eval_data_dir() / ALPS, eval_data_dir() / DOCX):
            services.ingestion.ingest(Upload(path.read_bytes(), path.name, "general"))
        services.ingestion.ingest(Upload(CHINESE.encode(), "阿尔卑斯山.md", "general"))
        record, made["key"] = services.keys.create("default", "ops")
        auth = {"Authorization": f"Bearer {made['key']}"}
        with _client(settings, services) as api:
            files = api.get("/v1/files", headers=auth).json()["data"]
            by_name = {f["filename"]: f["id"] for f in files}
            store = api.post(
                "/v1/vector_stores", headers=auth, json={"name": "alps", "metadata": {"team": "geo"}}
            ).json()
            made["store"] = store["id"]
            for name, attributes in (
                ("alps_wiki.pdf", {"region": "europe", "year": 2024}),
                ("阿尔卑斯山.md", {"lang": "zh"}),
            ):
                attached = api.post(
                    f"/v1/vector_stores/{store['id']}/files",
                    headers=auth,
                    json={"file_id": by_name[name], "attributes": attributes},
                )
                assert attached.status_code == 200, attached.text
            _wait_completed(services)
            bot = api.post("/v1/bots", headers=auth, json={"id": "alps-bot", "namespace": store["id"]})
            assert bot.status_code == 201, bot.text
            embed_all(services.vectors)
            conversation = api.post("/v1/conversations", headers=auth, json={"bot": "calypso-rag-agent"}).json()
            made["conversation"] = conversation["id"]
            for question in ("How high is Mont Blanc?", "And which plates formed the Alps?"):
                turn = api.post(
                    f"/v1/conversations/{conversation['id']}/messages", headers=auth, json={"content": question}
                )
                assert turn.status_code == 200, turn.text
        services.policies.set_sources_policy("default", services.policies.sources_policy("default"))
    finally:
        services.close()
    return made


def _observe(settings: Settings, made: dict[str, Any]) -> dict[str, Any]:
    """What a user sees: answers with citations, the store's search with attributes, the conversation."""
    services = open_services(settings)
    seen: dict[str, Any] = {}
    try:
        auth = {"Authorization": f"Bearer {made['key']}"}
        with _client(settings, services) as api:
            for bot, question in QUESTIONS:
                body = {"model": bot, "messages": [{"role": "user", "content": question}]}
                answer = api.post("/v1/chat/completions", headers=auth, json=body)
                assert answer.status_code == 200, answer.text
                message = answer.json()["choices"][0]["message"]
                assert message["citations"], (bot, question)
                seen[question] = {k: message[k] for k in ("content", "annotations", "citations")}
            search = api.post(f"/v1/vector_stores/{made['store']}/search", headers=auth, json={"query": "冰川退缩"})
            assert search.status_code == 200, search.text
            seen["search"] = search.json()["data"]
            assert any(hit["attributes"].get("lang") == "zh" for hit in seen["search"])
            seen["conversation"] = api.get(f"/v1/conversations/{made['conversation']}", headers=auth).json()
            seen["store_files"] = api.get(f"/v1/vector_stores/{made['store']}/files", headers=auth).json()["data"]
            seen["bot"] = api.get("/v1/bots/alps-bot", headers=auth).json()
    finally:
        services.close()
    return seen


def _dump(storage: Storage) -> dict[str, list[dict[str, Any]]]:
    """Every carried row, comparable: vectors as lists."""
    out: dict[str, list[dict[str, Any]]] = {}
    with storage.portable.reading(Scope()) as reader:
        for table in TABLES:
            rows = list(reader.rows(table.name))
            for row in rows:
                if isinstance(row.get("vector"), np.ndarray):
                    row["vector"] = row["vector"].tolist()
            out[table.name] = rows
    return out


def _counts(storage: Storage) -> dict[str, int]:
    with storage.portable.reading(Scope()) as reader:
        return {name: sum(1 for _ in reader.rows(name)) for name in (t.name for t in TABLES)}


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer) -> Iterator[dict[str, Any]]:
    """Source (SQLite) → archive → PostgreSQL → archive → SQLite, and what each looked like."""
    root = tmp_path_factory.mktemp("portable")
    source = _settings(root / "source")
    made = _build_source(source)
    url = pg_server.create_database()
    middle = _settings(root / "middle", url)
    back = _settings(root / "back")
    state: dict[str, Any] = {"made": made, "root": root, "settings": (source, middle, back)}
    for settings in (source,):
        state["before"] = _observe(settings, made)
    storage = open_storage(source)
    state["export_1"] = write_archive(storage, root / "one.zip", embedding_model=MODEL)
    state["dump_source"] = _dump(storage)
    storage.close()
    storage = open_storage(middle)
    state["import_1"] = read_archive(storage, root / "one.zip", model=(MODEL, 384))
    state["dump_middle"] = _dump(storage)
    state["export_2"] = write_archive(storage, root / "two.zip", embedding_model=MODEL)
    storage.close()
    storage = open_storage(back)
    state["import_2"] = read_archive(storage, root / "two.zip", model=(MODEL, 384))
    state["dump_back"] = _dump(storage)
    storage.close()
    state["middle"] = _observe(middle, made)
    state["back"] = _observe(back, made)
    yield state
    pg_server.drop_database(url)


def test_every_table_and_column_is_carried_or_said_why_not(moved: dict[str, Any]) -> None:
    _, middle, back = moved["settings"]
    for settings in (middle, back):
        storage = open_storage(settings)
        with storage.portable.reading(Scope()) as reader:
            schema = reader.schema()
        storage.close()
        assert set(schema) == {t.name for t in TABLES} | (set(NOT_CARRIED) & set(schema)), settings.database_url
        for table in TABLES:
            carried = {c for c in table.columns if c not in ("document", "conversation")}
            if table.name == "chunk_embeddings":
                carried -= {"chunk_index"}
            assert schema[table.name] - carried <= set(table.dropped), (table.name, schema[table.name] - carried)
            assert carried <= schema[table.name], (table.name, carried - schema[table.name])


def test_every_row_survives_both_ways(moved: dict[str, Any]) -> None:
    source, middle, back = moved["dump_source"], moved["dump_middle"], moved["dump_back"]
    counts = {name: len(rows) for name, rows in source.items()}
    assert counts["documents"] >= 5 and counts["chunks"] > 80 and counts["chunk_embeddings"] == counts["chunks"]
    assert counts["conversation_messages"] == 4 and counts["bots"] == 1 and counts["api_keys"] == 1
    assert counts["vector_stores"] == 1 and counts["vector_store_files"] == 2
    assert {name: len(rows) for name, rows in middle.items()} == counts
    assert middle == source
    assert back == source
    assert moved["import_1"].counts.added == {n: c for n, c in counts.items()}
    assert moved["import_1"].counts.vectors_dropped == 0 and moved["import_1"].counts.queued == 0


def test_vectors_are_equal_bit_for_bit(moved: dict[str, Any]) -> None:
    def vectors(dump: dict[str, list[dict[str, Any]]]) -> dict[tuple[str, int], np.ndarray]:
        return {(r["document"], r["chunk_index"]): np.asarray(r["vector"], "<f4") for r in dump["chunk_embeddings"]}

    source, back = vectors(moved["dump_source"]), vectors(moved["dump_back"])
    assert source.keys() == back.keys()
    assert all(np.array_equal(source[k], back[k]) for k in source)


def test_the_same_questions_get_the_same_answers_and_citations(moved: dict[str, Any]) -> None:
    before = moved["before"]
    for stage in ("middle", "back"):
        after = moved[stage]
        for _, question in QUESTIONS:
            assert after[question] == before[question], (stage, question)
        assert after["search"] == before["search"], stage
        assert after["conversation"] == before["conversation"], stage
        assert after["store_files"] == before["store_files"], stage
        assert after["bot"] == before["bot"], stage


def test_importing_twice_changes_nothing(moved: dict[str, Any]) -> None:
    _, middle, back = moved["settings"]
    for settings, archive in ((middle, "one.zip"), (back, "two.zip")):
        storage = open_storage(settings)
        before = _dump(storage)
        report = read_archive(storage, moved["root"] / archive, model=(MODEL, 384))
        assert sum(report.counts.added.values()) == 0 and report.counts.queued == 0
        assert sum(report.counts.present.values()) == sum(len(rows) for rows in before.values())
        assert _dump(storage) == before
        storage.close()


def _rewrite(source: Path, target: Path, change: Any) -> None:
    """A copy of the archive with members changed by ``change(name, data) -> data | None`` (None: left out)."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = change(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info.filename, data)


def _newer(name: str, data: bytes) -> bytes:
    if name != "manifest.json":
        return data
    manifest = json.loads(data)
    manifest.update(format_version=manifest["format_version"] + 1, calypso_version="99.0.0")
    return json.dumps(manifest).encode()


def _short(name: str, data: bytes) -> bytes:
    # The last passage left out, the manifest as written: found only after every document went in.
    return data.rsplit(b"\n", 2)[0] + b"\n" if name == "tables/chunks.jsonl" else data


def _flip_a_bit(path: Path) -> bytes:
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("tables/chunks.jsonl")
    data[info.header_offset + 30 + len(info.filename) + 40] ^= 0x01  # inside the member's compressed data
    return bytes(data)


@pytest.mark.parametrize("target", ["postgres", "sqlite"])
def test_a_bad_archive_leaves_the_target_unchanged(
    moved: dict[str, Any], pg_server: PgServer, tmp_path: Path, target: str
) -> None:
    one = moved["root"] / "one.zip"
    url = pg_server.create_database() if target == "postgres" else ""
    settings = _settings(tmp_path / "target", url)
    storage = open_storage(settings)
    services = open_services(settings, storage)
    try:
        # A target that already holds something of its own.
        services.ingestion.ingest(Upload(b"The hut opens in June and closes in September.", "hut.txt", "general"))
        before = _dump(storage)

        truncated = tmp_path / "truncated.zip"
        truncated.write_bytes(one.read_bytes()[: one.stat().st_size // 2])
        newer, short, corrupt = tmp_path / "newer.zip", tmp_path / "short.zip", tmp_path / "corrupt.zip"
        _rewrite(one, newer, _newer)
        _rewrite(one, short, _short)
        corrupt.write_bytes(_flip_a_bit(one))
        for archive, error in (
            (truncated, ArchiveUnreadable),
            (newer, ArchiveTooNew),
            (short, ArchiveUnreadable),
            (corrupt, ArchiveUnreadable),
        ):
            with pytest.raises(error) as raised:
                read_archive(storage, archive, model=(MODEL, 384))
            assert str(archive) in raised.value.message
            assert _dump(storage) == before, archive.name
        assert "99.0.0" in str(pytest.raises(ArchiveTooNew, read_archive, storage, newer, model=None).value)

        clash = tmp_path / "clash.zip"
        hut = before["documents"][0]

        def steal_id(name: str, data: bytes) -> bytes:
            if name != "tables/documents.jsonl":
                return data
            rows = [json.loads(line) for line in data.splitlines()]
            rows[-1]["id"] = hut["id"]  # the target's own document's id on another document
            return b"".join(json.dumps(r).encode() + b"\n" for r in rows)

        _rewrite(one, clash, steal_id)
        with pytest.raises(Conflict):
            read_archive(storage, clash, model=(MODEL, 384))
        assert _dump(storage) == before
    finally:
        services.close()
        if url:
            pg_server.drop_database(url)


def test_vectors_of_another_model_are_queued_for_the_targets(moved: dict[str, Any], tmp_path: Path) -> None:
    storage = open_storage(_settings(tmp_path / "other"))
    report = read_archive(storage, moved["root"] / "one.zip", model=("another-model", 8))
    dump = _dump(storage)
    completed = [d for d in dump["documents"] if d["status"] == "completed"]
    assert report.counts.vectors_dropped == len(moved["dump_source"]["chunk_embeddings"])
    assert dump["chunk_embeddings"] == []
    assert {(j["document"], j["model"]) for j in dump["embedding_jobs"]} == {
        (d["id"], "another-model") for d in completed
    }
    assert report.counts.queued == len(completed)
    storage.close()


def test_an_export_that_fails_leaves_no_archive(
    moved: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import calypso.services.portable as portable

    target = tmp_path / "kb.zip"
    target.write_bytes(b"the previous archive")
    calls = {"n": 0}
    line = portable._line

    def failing(row: dict[str, Any]) -> bytes:
        calls["n"] += 1
        if calls["n"] > 50:
            raise OSError("disk full")
        return line(row)

    monkeypatch.setattr(portable, "_line", failing)
    storage = open_storage(moved["settings"][0])
    with pytest.raises(OSError):
        write_archive(storage, target)
    storage.close()
    assert target.read_bytes() == b"the previous archive"
    assert [p.name for p in tmp_path.iterdir()] == ["kb.zip"]


def test_a_namespace_export_carries_its_documents_and_stores_only(moved: dict[str, Any], tmp_path: Path) -> None:
    storage = open_storage(moved["settings"][0])
    store = moved["made"]["store"]
    report = write_archive(storage, tmp_path / "ns.zip", Scope("default", store))
    storage.close()
    with zipfile.ZipFile(tmp_path / "ns.zip") as zf:
        manifest = json.loads(zf.read("manifest.json"))
        documents = [json.loads(line) for line in io.TextIOWrapper(zf.open("tables/documents.jsonl"), "utf-8")]
    assert {d["namespace"] for d in documents} == {store} and len(documents) == 2
    assert "conversations" not in manifest["tables"] and "api_keys" not in manifest["tables"]
    assert report.rows["vector_stores"] == 1 and report.rows["vector_store_files"] == 2
    assert manifest["embedding"]["vectors"][0]["model"] == MODEL
