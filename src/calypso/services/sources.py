"""The sources service: add, list, read and delete synced sources; ask for a sync, or run one and wait for it.

Syncs are jobs: a source asked to sync (or whose schedule came round) is claimed under a lease by a sync
worker (``SourceWorkers``, inside `calypso serve` and `calypso worker`) or by the request that waits for it,
one sync per source at a time on either backend (``store/sources.py``). Secrets are sealed with the signing
secret before they are stored (``sources/secrets.py``) and never leave the service.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from calypso.config import Settings
from calypso.errors import CalypsoError, InvalidRequest, NotFound, UpstreamTimeout
from calypso.scope import DEFAULT_WORKSPACE, check_namespace
from calypso.services.documents import DocumentService
from calypso.services.ingest_worker import worker_id
from calypso.services.ingestion import IngestionService
from calypso.services.source_sync import SourceSyncer
from calypso.services.source_watch import FolderWatch
from calypso.sources.connectors import build_connector
from calypso.sources.model import ConnectorOptions
from calypso.sources.secrets import seal, unseal
from calypso.sources.settings import parse
from calypso.store.sources import SourceStore, StoredSource

__all__ = ["SourceService", "SourceWorkers", "StoredSource"]
log = logging.getLogger("calypso.sources")
WAIT_SECONDS = 3600.0  # the longest a request waits for a sync another worker runs


def source_roots(settings: Settings) -> list[Path]:
    return [Path(p.strip()).resolve() for p in settings.source_roots.split(",") if p.strip()]


class SourceService:
    """Sources of one storage, and the syncs that keep their documents current."""

    def __init__(
        self,
        settings: Settings,
        store: SourceStore[Any],
        ingestion: IngestionService,
        documents: DocumentService,
        signing_secret: bytes,
    ) -> None:
        self.settings = settings
        self._store = store
        self._documents = documents
        self._secret = signing_secret
        self.waiting = threading.Event()  # set when a sync is asked for: wakes this process's sync workers
        self.generation = 0  # bumped when this process adds or removes a source: the folder watch looks again
        self.syncer = SourceSyncer(store, ingestion, documents, self._connector, settings.job_lease_seconds)

    def _connector(self, source: StoredSource) -> Any:
        options = ConnectorOptions(
            allow_private=self.settings.crawl_allow_private,
            timeout=self.settings.crawl_timeout_seconds,
            max_bytes=self.settings.max_upload_bytes,
            cache_dir=self.settings.home / "sources" / source.id,
        )
        return build_connector(source.type, source.settings, unseal(self._secret, source.secret), options)

    # -- the sources -------------------------------------------------------------
    def create(self, body: dict[str, Any], workspace: str = DEFAULT_WORKSPACE) -> StoredSource:
        """Check and store a new source; its first sync is queued at once."""
        namespace = check_namespace(self.settings.namespace_or_default(body.get("namespace")))
        parsed = parse(body, source_roots(self.settings))
        now = time.time()
        source = StoredSource(
            id=f"src_{uuid.uuid4().hex[:24]}",
            workspace=workspace,
            namespace=namespace,
            type=parsed.type,
            settings=parsed.settings,
            secret=seal(self._secret, parsed.secrets),
            schedule_seconds=parsed.schedule_seconds,
            status="queued",
            last_sync=None,
            created_at=int(now),
            sync_requested_at=now,
        )
        self._store.insert(source)
        self.generation += 1
        self.waiting.set()
        return source

    def get(self, source_id: str, workspace: str = DEFAULT_WORKSPACE) -> StoredSource:
        source = self._store.get(workspace, source_id)
        if source is None:
            raise NotFound(f"No source with id {source_id!r}.", param="source_id")
        return source

    def list_sources(self, workspace: str = DEFAULT_WORKSPACE) -> list[StoredSource]:
        return self._store.list_sources(workspace)

    def folder_sources(self) -> list[StoredSource]:
        """Every workspace's folder sources (the folder watch)."""
        return self._store.of_type("folder")

    def delete(self, source_id: str, workspace: str = DEFAULT_WORKSPACE) -> StoredSource:
        """Delete the source and the documents it brought (a sync running now stops at its next item)."""
        source = self.get(source_id, workspace)
        items = self._store.items(source.id)
        self._store.delete(workspace, source_id)
        self.generation += 1
        for document_id in sorted({item.document_id for item in items.values()}):
            try:
                document = self._documents.get(document_id, workspace)
                if document.metadata.get("source_id") == source.id:
                    self._documents.delete(document_id, workspace)
            except NotFound:
                pass
        return source

    # -- syncs ---------------------------------------------------------------------
    def sync(
        self, source_id: str, workspace: str = DEFAULT_WORKSPACE, *, wait: bool = False, full: bool = False
    ) -> StoredSource:
        """Ask for a sync; with ``wait``, run it here (or follow the worker running it) and return once it ended.

        ``full``: read every item again whatever its version (only a sync run here: a queued one is not told).
        """
        if full and not wait:
            raise InvalidRequest("A full sync runs in the request: ask with ?wait=true.", param="full")
        self.get(source_id, workspace)
        asked = time.time()
        if not self._store.request_sync(workspace, source_id, asked):
            raise NotFound(f"No source with id {source_id!r}.", param="source_id")
        if not wait:
            self.waiting.set()
            return self.get(source_id, workspace)
        owner = worker_id("sync-inline")
        delay, deadline = 0.05, time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            claimed = self._store.claim(owner, self.settings.job_lease_seconds, source_id)
            if claimed is not None:
                self.syncer.run(claimed, owner, full=full)
                return self.get(source_id, workspace)
            current = self.get(source_id, workspace)  # someone else syncs it: a sync started after we asked?
            started = float((current.last_sync or {}).get("started_at", 0))
            if current.lease_owner is None and started >= asked:
                return current
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        raise UpstreamTimeout(f"Source {source_id}'s sync did not end within {WAIT_SECONDS:g} s; it goes on.")

    def run_one(self, owner: str) -> StoredSource | None:
        """Claim a due source and sync it; the source as it was claimed, or None when none was due."""
        source = self._store.claim(owner, self.settings.job_lease_seconds)
        if source is not None:
            self.syncer.run(source, owner)
        return source

    def workers(self, count: int, role: str) -> SourceWorkers:
        return SourceWorkers(self, count, role)


class SourceWorkers:
    """``count`` threads that run due syncs until ``stop``."""

    def __init__(self, service: SourceService, count: int, role: str) -> None:
        self.service, self.count, self.role = service, count, role
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watch = FolderWatch(service, self.stopping) if count > 0 else None

    def start(self) -> None:
        if self._watch is not None:
            self._watch.start()
        for n in range(self.count):
            thread = threading.Thread(target=self._loop, args=(worker_id(f"sync-{self.role}{n}"),), daemon=True)
            thread.name = f"source-sync-{self.role}-{n}"
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float | None = None) -> None:
        self.stopping.set()
        self.service.waiting.set()
        for thread in self._threads:
            thread.join(timeout)
        if self._watch is not None:
            self._watch.join(timeout)

    def _loop(self, owner: str) -> None:
        poll = self.service.settings.job_poll_seconds
        while not self.stopping.is_set():
            try:
                source = self.service.run_one(owner)
            except CalypsoError as exc:  # the database is away: try again later
                log.warning("claiming a source sync failed: %s", exc.message)
                source = None
            except Exception:  # a bug must not end the thread: logged, tried again
                log.exception("a source sync failed")
                source = None
            if source is None and self.service.waiting.wait(poll):
                self.service.waiting.clear()
