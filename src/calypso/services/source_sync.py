"""One sync of one source: what its connector finds against what it brought before; a job under a lease.

An item whose version is unchanged is not fetched; one fetched again with the same bytes is unchanged; a
changed one is ingested as a new document and, once that is completed, the old document is deleted (its
passages leave retrieval as the new ones enter); an item gone from the source has its document deleted.
A document is deleted only when the source brought it (its ``source_id`` attribute) and no other item of
the source still gives it (a renamed file with the same bytes keeps its document). A failing item is
reported and counted; the rest go on. Each item is recorded as it is done, so a sync a crash cut short is
resumed by the next claimer: what was done is found unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from calypso.errors import CalypsoError, NotFound
from calypso.models import Document
from calypso.services.documents import DocumentService
from calypso.services.ingestion import IngestionService, Upload
from calypso.sources.model import MAX_REPORTED_ERRORS, Connector, Fetched, Found, Gone, ItemFailed, Known, Scan
from calypso.store.sources import SourceItem, SourceStore, StoredSource

log = logging.getLogger("calypso.sources")


class SourceLost(Exception):
    """The source was deleted, or its lease taken, while it synced: the sync stops."""


class LeaseKeeper:
    """Renews a sync's lease every third of its length on a thread of its own; ``lost`` once it is not ours."""

    def __init__(self, store: SourceStore[Any], source_id: str, owner: str, lease_seconds: float) -> None:
        self._store, self._id, self._owner, self._seconds = store, source_id, owner, lease_seconds
        self.lost = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"source-lease-{source_id}", daemon=True)

    def _run(self) -> None:
        while not self._done.wait(self._seconds / 3):
            try:
                if not self._store.renew(self._id, self._owner, self._seconds):
                    self.lost.set()
                    return
            except CalypsoError as exc:  # the database is away: keep trying until the lease runs out
                log.warning("renewing the lease of source %s failed: %s", self._id, exc.message)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._done.set()
        self._thread.join()


class SyncRun:
    """The counts and errors of one sync, and the bookkeeping of which documents the source's items give."""

    def __init__(self, source: StoredSource, items: dict[str, SourceItem], documents: dict[str, Document]) -> None:
        self.source = source
        self.items = items
        self.documents = documents
        self.started_at = time.time()
        self.counts = dict.fromkeys(
            ("added", "updated", "removed", "unchanged", "failed", "pending", "passages_added", "passages_removed"), 0
        )
        self.errors: list[dict[str, str]] = []
        self.full = False  # every item read again, whatever its version

    def error(self, item: str, message: str) -> None:
        self.counts["failed"] += 1
        if len(self.errors) < MAX_REPORTED_ERRORS:
            self.errors.append({"item": item[:300], "message": message[:500]})

    def given_by_others(self, document_id: str, external_id: str) -> bool:
        return any(i.document_id == document_id and e != external_id for e, i in self.items.items())

    def report(self, scan: Scan, status: str) -> dict[str, Any]:
        errors = (scan.errors + self.errors)[:MAX_REPORTED_ERRORS]
        return {
            "status": status,
            "started_at": self.started_at,
            "finished_at": time.time(),
            **self.counts,
            "complete": scan.complete,
            "errors": errors,
        }


class SourceSyncer:
    """Runs claimed syncs: a connector's findings into documents, recorded item by item."""

    def __init__(
        self,
        store: SourceStore[Any],
        ingestion: IngestionService,
        documents: DocumentService,
        connector: Callable[[StoredSource], Connector],
        lease_seconds: float,
    ) -> None:
        self._store, self._ingestion, self._documents = store, ingestion, documents
        self._connector, self._lease_seconds = connector, lease_seconds

    def run(self, source: StoredSource, owner: str, *, full: bool = False) -> dict[str, Any]:
        """Sync one source whose lease ``owner`` holds; record and return its report (``last_sync``).

        ``full``: no item is taken as unchanged by its version, nor asked for conditionally."""
        items = self._store.items(source.id)
        ids = sorted({item.document_id for item in items.values()})
        present = self._documents.by_id(source.workspace, ids) if ids else {}
        # An item whose document was deleted by hand is brought again, as if never seen.
        items = {e: i for e, i in items.items() if i.document_id in present}
        run = SyncRun(source, items, present)
        run.full = full
        scan = Scan()
        status = "completed"
        with LeaseKeeper(self._store, source.id, owner, self._lease_seconds) as lease:
            seen: set[str] = set()
            try:
                connector = self._connector(source)
                known = {} if full else {e: Known(i.version, i.state) for e, i in items.items()}
                for found in connector.scan(known, scan):
                    if lease.lost.is_set():
                        raise SourceLost
                    seen.add(found.external_id)
                    self._item(run, found, known.get(found.external_id))
                if scan.complete:
                    for external_id in sorted(set(run.items) - seen):
                        self._remove(run, external_id)
            except SourceLost:
                log.warning("source %s: the sync stopped (deleted, or its lease taken)", source.id)
                return run.report(scan, "cancelled")
            except (CalypsoError, ItemFailed) as exc:  # the listing itself failed (unreachable site, unreadable folder)
                scan.complete = False
                origin = source.settings.get("url") or source.settings.get("path") or source.settings.get("host")
                scan.error(str(origin or source.type), str(getattr(exc, "message", exc)))
                status = "failed"
            except Exception as exc:  # noqa: BLE001 - a connector's bug ends this sync, not the worker
                log.exception("source %s: the sync failed", source.id)
                scan.complete = False
                scan.error(source.type, f"The sync failed on the server ({type(exc).__name__}); see the log.")
                status = "failed"
        report = run.report(scan, status)
        self._store.finish(source.id, owner, report, "failed" if status == "failed" else "idle")
        return report

    # -- one item ------------------------------------------------------------
    def _item(self, run: SyncRun, found: Found, known: Known | None) -> None:
        old = run.items.get(found.external_id)
        if found.pending:
            run.counts["pending"] += 1
            return
        if not run.full and old is not None and found.version is not None and found.version == old.version:
            run.counts["unchanged"] += 1
            return
        try:
            fetched = found.load(known)
        except Gone:
            if old is not None:
                self._remove(run, found.external_id)
            return
        except (ItemFailed, CalypsoError) as exc:
            run.error(found.external_id, str(getattr(exc, "message", exc)))
            return
        except Exception as exc:  # noqa: BLE001 - one item's fault must not stop the others
            log.exception("source %s: reading %s failed", run.source.id, found.external_id)
            run.error(found.external_id, f"Reading it failed on the server ({type(exc).__name__}).")
            return
        if not isinstance(fetched, Fetched):  # not modified: the origin's own answer
            run.counts["unchanged"] += 1
            if old is not None and fetched.state != old.state:
                self._record(
                    run, found.external_id, SourceItem(found.external_id, old.version, old.document_id, fetched.state)
                )
            return
        self._store_fetched(run, found.external_id, fetched, old)

    def _store_fetched(self, run: SyncRun, external_id: str, fetched: Fetched, old: SourceItem | None) -> None:
        source = run.source
        if old is not None:
            current = run.documents.get(old.document_id)
            if current is not None and current.sha256 == hashlib.sha256(fetched.data).hexdigest():
                run.counts["unchanged"] += 1  # touched, not changed: same bytes
                self._record(run, external_id, SourceItem(external_id, fetched.version, old.document_id, fetched.state))
                return
        metadata = {**fetched.metadata, "source_id": source.id, "external_id": external_id[:512]}
        upload = Upload(
            fetched.data,
            fetched.filename,
            source.namespace,
            media_type=fetched.media_type,
            metadata=metadata,
            source_url=fetched.source_url,
            workspace=source.workspace,
        )
        try:
            result = self._ingestion.ingest(upload, wait=True)
        except CalypsoError as exc:
            run.error(external_id, exc.message)
            return
        document = result.document
        run.documents[document.id] = document
        if not self._record(run, external_id, SourceItem(external_id, fetched.version, document.id, fetched.state)):
            if result.created:  # the source went while this item was read: nothing of it stays
                self._delete(document.workspace, document.id)
            raise SourceLost
        if old is None:
            run.counts["added"] += 1
        else:
            run.counts["updated"] += 1
            if old.document_id != document.id:
                self._drop(run, old.document_id, external_id)
        if result.created:
            run.counts["passages_added"] += document.chunk_count

    def _record(self, run: SyncRun, external_id: str, item: SourceItem) -> bool:
        if not self._store.put_item(run.source.id, item):
            return False
        run.items[external_id] = item
        return True

    def _remove(self, run: SyncRun, external_id: str) -> None:
        item = run.items.pop(external_id)
        self._store.remove_items(run.source.id, [external_id])
        self._drop(run, item.document_id, external_id)
        run.counts["removed"] += 1

    def _drop(self, run: SyncRun, document_id: str, external_id: str) -> None:
        """Delete a document an item no longer gives, if this source brought it and no other item gives it."""
        document = run.documents.get(document_id)
        if document is None or document.metadata.get("source_id") != run.source.id:
            return
        if run.given_by_others(document_id, external_id):
            return
        run.documents.pop(document_id, None)
        run.counts["passages_removed"] += document.chunk_count
        self._delete(document.workspace, document_id)

    def _delete(self, workspace: str, document_id: str) -> None:
        with contextlib.suppress(NotFound):  # deleted by hand meanwhile
            self._documents.delete(document_id, workspace)
