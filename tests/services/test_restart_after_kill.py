"""After a SIGKILL, the restarted SQLite server takes up the dead process's jobs at once.

The dead owner is a real process that holds the data-directory lock and a live 30 s lease on an
ingestion job and an embedding job, then is killed with SIGKILL. The lock file still names its PID,
which proves it gone: the next exclusive owner frees those leases instead of waiting them out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from calypso.config import Settings
from calypso.services import open_services
from calypso.services.ingest_worker import worker_id
from calypso.services.ingestion import Upload

MODEL = "test-model"

DEAD_OWNER = """
import sys, time
from pathlib import Path
from calypso.config import Settings
from calypso.services import open_services
from calypso.services.ingest_worker import worker_id
from calypso.services.ingestion import Upload

home = Path(sys.argv[1])
services = open_services(Settings(home=home, embedding_model="none"), exclusive=True)
storage = services.storage
queued = services.ingestion.submit(Upload(b"Queued text that a worker was parsing.", "queued.txt"), wake_workers=False)
done = services.ingestion.ingest(Upload(b"Finished text that a worker was embedding.", "done.txt"))
db = storage.database
key = storage.documents.document_key("default", done.document.id)
db.write(lambda c: c.execute(
    "INSERT INTO embedding_jobs (document_key, model, created_at) VALUES (?, ?, 0)", (key, sys.argv[2])))
queued_key = storage.documents.document_key("default", queued.document.id)
assert storage.jobs.claim_document(queued_key, worker_id("ingest0"), 30) is not None
assert storage.embeddings.claim(worker_id("embed0"), 30, sys.argv[2]) is not None
print("holding", flush=True)
time.sleep(600)
"""


@pytest.mark.backends("sqlite")
def test_a_restart_after_sigkill_frees_the_dead_owner_s_leases(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("CALYPSO_DATABASE_URL", None)
    owner = subprocess.Popen(
        [sys.executable, "-c", DEAD_OWNER, str(home), MODEL], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "holding"
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
    assert (home / "calypso.sqlite3.lock").read_text().strip() == str(owner.pid)  # what a kill leaves

    services = open_services(Settings(home=home, embedding_model="none"), exclusive=True)
    try:
        storage = services.storage
        # Both 30 s leases are still live by the clock; the restart claims the jobs anyway.
        job = storage.jobs.claim(worker_id("ingest0"), 30)
        assert job is not None and job.attempts == 2  # the dead owner's try still counts
        assert storage.embeddings.claim(worker_id("embed0"), 30, MODEL) is not None
    finally:
        services.close()


@pytest.mark.backends("sqlite")
def test_a_clean_stop_leaves_nothing_to_free(tmp_path: Path) -> None:
    """A live lease of a process that is not the lock's dead owner is left alone."""
    home = tmp_path / "home"
    services = open_services(Settings(home=home, embedding_model="none"), exclusive=True)
    queued = services.ingestion.submit(Upload(b"Some queued text.", "queued.txt"), wake_workers=False)
    key = services.storage.documents.document_key("default", queued.document.id)
    assert key is not None and services.storage.jobs.claim_document(key, "other-host:1:ingest0:x", 30) is not None
    services.close()
    assert (home / "calypso.sqlite3.lock").read_text() == ""  # a clean release empties the file
    services = open_services(Settings(home=home, embedding_model="none"), exclusive=True)
    try:
        assert services.storage.jobs.claim(worker_id("ingest0"), 30) is None  # still leased
    finally:
        services.close()
