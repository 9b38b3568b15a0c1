"""On PostgreSQL the API processes of one host share one keyword snapshot per namespace: one builds it, the others
load it; a snapshot of another database is refused and rebuilt; a stale one is caught up from the feed."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from calypso.config import Settings
from calypso.retrieval.bm25 import BM25Index
from calypso.services import open_services
from calypso.services.ingestion import Upload
from calypso.services.snapshot_directory import SnapshotDirectory

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)  # PostgreSQL only
KEY = ("default", "general")

# One API process, as `calypso serve` opens its services: search once, wait for the snapshot, report what happened.
PROCESS = """
import json, logging, sys
from pathlib import Path
from calypso.config import Settings
from calypso.services import open_services
lines = []
handler = logging.Handler()
handler.emit = lambda record: lines.append(record.getMessage())
logging.getLogger("calypso.index").addHandler(handler)
logging.getLogger("calypso.index").setLevel(logging.INFO)
services = open_services(Settings(home=Path(sys.argv[1])))
hits = [p.document.filename for p in services.search.search("harbour crane lamp", services.search.scope())]
services.search.indexes.wait_saved(timeout=60)
origin = services.search.indexes._origin.get(("default", "general"))
print(json.dumps({"lines": lines, "hits": hits, "origin": str(origin)}))
services.close()
"""


def _ingest(home: Path, texts: dict[str, str]) -> None:
    services = open_services(Settings(home=home))
    for name, text in texts.items():
        services.ingestion.ingest(Upload(text.encode(), name))
    services.close()


def _built(lines: list[str]) -> bool:
    return any("passages built" in line for line in lines)


def test_the_processes_of_a_host_build_one_snapshot_and_share_it(tmp_path: Path, database_url: str) -> None:
    _ingest(tmp_path, {f"d{i}.txt": f"Harbour crane {i} is inspected; the lamp is cleaned." for i in range(12)})
    env = {**os.environ, "CALYPSO_DATABASE_URL": database_url}
    # Two processes started together: one builds under the namespace's lock, the other waits and loads its files.
    children = [
        subprocess.Popen([sys.executable, "-c", PROCESS, str(tmp_path)], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    reports = [json.loads(child.communicate(timeout=120)[0].strip().splitlines()[-1]) for child in children]
    assert all(child.returncode == 0 for child in children)
    assert sorted(_built(r["lines"]) for r in reports) == [False, True], [r["lines"] for r in reports]
    current = SnapshotDirectory(tmp_path / "index", KEY).current()
    assert current is not None and {r["origin"] for r in reports} == {str(current)}  # one copy of the files
    assert reports[0]["hits"] == reports[1]["hits"] and len(reports[0]["hits"]) == 10
    assert not list(current.parent.glob(".build-*"))  # the build's spilled postings went with its save
    assert BM25Index.manifest(current)["meta"]["database"].startswith("postgresql:")


def test_a_snapshot_of_another_database_is_refused_and_rebuilt(
    tmp_path: Path, database_url: str, pg_server, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    _ingest(tmp_path, {"cranes.txt": "Harbour cranes are inspected every spring."})
    first = open_services(Settings(home=tmp_path))
    assert first.search.search("harbour cranes", first.search.scope())
    assert first.search.indexes.wait_saved(timeout=60)
    first.close()
    theirs = SnapshotDirectory(tmp_path / "index", KEY).current()
    assert theirs is not None
    their_stamp = BM25Index.manifest(theirs)["meta"]["database"]

    other = pg_server.create_database()  # same server, same names and keys from 1: only the identity differs
    try:
        monkeypatch.setenv("CALYPSO_DATABASE_URL", other)
        _ingest(tmp_path, {"lamps.txt": "Lighthouse lamps are cleaned weekly."})
        with caplog.at_level(logging.INFO, logger="calypso.index"):
            services = open_services(Settings(home=tmp_path))
            hits = services.search.search("harbour cranes lighthouse lamps", services.search.scope())
            assert services.search.indexes.wait_saved(timeout=60)
        assert [p.document.filename for p in hits] == ["lamps.txt"]
        assert "another database" in caplog.text and "passages built" in caplog.text
        mine = SnapshotDirectory(tmp_path / "index", KEY).current()
        assert mine is not None and mine != theirs
        stamp = BM25Index.manifest(mine)["meta"]["database"]
        assert stamp == services.storage.feed.identity() != their_stamp
        services.close()
    finally:
        pg_server.drop_database(other)
