"""The in-memory indexes of one process (BM25, and passage vectors when an embedding model is set), following the
store's document change feed.

Every index update goes one way: a write lands in the store and appends an ``added`` or ``deleted`` change to the
feed in the same transaction; each process applies the feed to the indexes it holds. Applying is idempotent
(``added`` indexes a document only when it is absent; ``deleted`` removes it only when present) and document keys
are never reused, so replaying changes an index already reflects is harmless. Hence:

- an index starts at the feed position read *before* it was built (or at the position its snapshot covers), and
  everything after that is replayed onto it;
- a process reads its own writes: the service calls ``catch_up`` right after each local write;
- other processes' writes arrive through a follower thread: it waits on the store's notifications (PostgreSQL
  ``LISTEN``; SQLite cannot notify, so it polls) and catches up; a lost connection is reopened, then the feed is
  read from the last position, so nothing is missed.

Vector indexes (``retrieval.vectors.ExactVectorIndex``) follow the same feed: an ``embedded`` change (a batch of a
document's vectors landed) reloads that document's vectors; ``deleted`` removes them. From ``ann_min_vectors``
vectors on, a namespace's index builds an ANN graph in the background (``retrieval/ann.py``).

Snapshots: an index is saved under ``{home}/index`` with the feed position it covers and the database's identity,
loaded memory-mapped at the next start and caught up from that position. On PostgreSQL the API processes of a host
share them: the first to need a namespace builds it (streaming its postings to files, so its peak stays flat) and
saves it under the namespace's lock, the others wait for that snapshot and load it; a process that later finds a
newer snapshot than its own loads it (one copy of the files in the page cache for all). A save writes a new
directory and then atomically replaces the ``CURRENT`` pointer, so a crash leaves the previous snapshot, which the
feed still brings up to date. The same directory holds the namespace's vectors and graph
(``retrieval/vector_snapshot.py``) with their own feed position (``seq`` of ``vectors/manifest.json``; the vectors
are captured before the BM25 index, so it is at or before the BM25 one): at start both are loaded, each caught up
from its own position. Vectors that fail a check (another model or dimension, parts that disagree, a position the
feed does not hold) are loaded from the store's vectors table instead; a graph that fails one is rebuilt in the
background. After a save the vector index reads its rows and graph from the files just written (page cache).
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from calypso.errors import StorageError
from calypso.heap import return_freed_memory
from calypso.models import DocumentChange
from calypso.retrieval import vector_snapshot
from calypso.retrieval.bm25 import DEFAULT_B, DEFAULT_K1, BM25Index
from calypso.retrieval.vectors import ExactVectorIndex
from calypso.services.index_changes import apply_change, fingerprint, index_rows
from calypso.services.snapshot_directory import SnapshotDirectory, SnapshotLock
from calypso.store.base import ChangeFeed
from calypso.store.vectors import EmbeddingStore, VectorSearch

log = logging.getLogger("calypso.index")

Key = tuple[str, str]  # (workspace, namespace)

FEED_BATCH = 1000  # changes read per query while catching up
WAIT_SECONDS = 0.25  # longest block in the store's wait (bounds how long close() takes)
POLL_SECONDS = 0.5  # catch up at least this often when the store cannot notify (SQLite)
FALLBACK_POLL_SECONDS = 5.0  # ... and this often when it can (a safety net; notifications do the work)
SAVE_AFTER_CHANGES = 500  # changes applied to an index since its snapshot before it is saved again
RETRY_SAVE_SECONDS = 60.0  # after a failed save (a full disk, say), before the follower tries again


class NamespaceIndexes:
    """One BM25 index per (workspace, namespace), loaded or built on first use, kept equal to the store.

    ``snapshots``: the directory for index snapshots, or None to always build from the store and keep
    every index in memory. Every process on a host given the same directory shares one snapshot per
    namespace (``SnapshotDirectory``): the first builds and saves it, the others load it and follow the
    feed; one that finds a newer snapshot than its own loads that one. ``identity``: the feed's database
    (``ChangeFeed.identity``), stamped on every snapshot: one of another database is rebuilt, never
    trusted. ``follow``: start the follower thread with the first index (off: only ``catch_up`` applies
    changes).
    """

    def __init__(
        self,
        store: ChangeFeed,
        snapshots: Path | None = None,
        *,
        identity: str = "",
        follow: bool = True,
        embeddings: EmbeddingStore | None = None,
        model: str | None = None,
        dimension: int = 0,
        vector_search: Callable[[str, str], VectorSearch] | None = None,
        ann_min_vectors: int = 0,
    ) -> None:
        self.store = store
        # (workspace, namespace) -> a search the database runs (pgvector HNSW): nothing loaded, nothing to follow.
        self.vector_search = vector_search
        self._searches: dict[Key, VectorSearch] = {}  # vector_search's, one per namespace asked
        self.snapshots = snapshots
        self.identity = identity
        self._origin: dict[Key, Path] = {}  # the snapshot directory each index was loaded from or last saved to
        self._extra_savers: list[threading.Thread] = []  # builds' savers (each holds its namespace's lock)
        self.follow = follow
        # Vectors of ``model`` are indexed beside BM25 when both are given.
        self.embeddings = embeddings if model else None
        self.model = model or ""
        self.dimension = dimension
        self.ann_min_vectors = ann_min_vectors  # a namespace with this many vectors gets an ANN graph (0: never)
        self._indexes: dict[Key, BM25Index] = {}
        self._vectors: dict[Key, ExactVectorIndex] = {}
        self._vectors_seq: dict[Key, int] = {}  # feed position each vector index's load already covers
        self._vectors_saved: dict[Key, tuple[int, int, int, int]] = {}  # signature of each one's last snapshot
        self._position = 0  # every index in _indexes reflects the feed up to here
        self._lock = threading.RLock()  # applying changes; publishing an index
        self._build_locks: dict[Key, threading.Lock] = {}
        self._unsaved: dict[Key, int] = {}  # changes applied since the index's snapshot
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        self._saver: threading.Thread | None = None
        self._save_failed_at = -RETRY_SAVE_SECONDS  # monotonic time of the last failed save

    @property
    def position(self) -> int:
        return self._position

    def sizes(self) -> dict[Key, tuple[int, int]]:
        """(passages in the keyword index, vectors held) of every namespace this process has loaded."""
        with self._lock:
            return {
                key: (len(index), len(self._vectors[key]) if key in self._vectors else 0)
                for key, index in self._indexes.items()
            }

    @property
    def following(self) -> bool:
        """Whether the follower thread runs (or was never needed yet: no index loaded, or following is off)."""
        return self._follower is None or self._follower.is_alive()

    def replay_from(self, position: int) -> None:
        """Read the feed again from ``position`` at the next ``catch_up``: a change read twice applies once."""
        with self._lock:
            self._position = min(self._position, max(0, position))

    # -- loading -------------------------------------------------------------
    def get(self, workspace: str, namespace: str) -> BM25Index:
        """The namespace's index: from its snapshot, else built from the store (and saved: the other processes of
        the host wait for that snapshot and load it instead of building their own), then caught up."""
        key = (workspace, namespace)
        index = self._indexes.get(key)
        if index is not None:
            return index
        with self._lock:
            build_lock = self._build_locks.setdefault(key, threading.Lock())
        with build_lock:  # one build per namespace; other namespaces and catch-ups go on meanwhile
            index = self._indexes.get(key)
            if index is not None:
                return index
            held: SnapshotLock | None = None
            snapshots = SnapshotDirectory(self.snapshots, key) if self.snapshots is not None else None
            loaded, loaded_vectors = self._load_both(key, snapshots, shared=True)
            if loaded is None and snapshots is not None:
                # Nothing to load: build under the exclusive lock, held until the saver has written the snapshot.
                held = snapshots.lock()
                loaded, loaded_vectors = self._load_both(key, snapshots, shared=False)  # built while we waited?
                if loaded is not None and held is not None:
                    held.release()
                    held = None
            spill: Path | None = None
            try:
                if loaded is not None:
                    index, seq = loaded
                else:
                    seq = self.store.change_position()  # before reading: later changes are replayed
                    started = time.perf_counter()
                    index = BM25Index()
                    spill = snapshots.build_directory() if snapshots is not None else None
                    index.add_many(
                        (
                            (doc_key, index_rows(self.store, doc_key, chunks))
                            for doc_key, chunks in self.store.namespace_chunks(workspace, namespace)
                        ),
                        spill=spill,
                    )
                    log.info("index %s/%s: %d passages built in %.1fs", *key, len(index), time.perf_counter() - started)
                restored = loaded_vectors is not None
                if loaded_vectors is None:
                    loaded_vectors = self._build_vectors(key)
                return_freed_memory()  # what the build or the snapshot's load let go
                with self._lock:
                    if not self._indexes:
                        self._position = seq if loaded_vectors is None else min(seq, loaded_vectors[1])
                    if seq < self._position:
                        self._apply_to(key, index, self._changes(seq, self._position))
                    if loaded_vectors is not None:
                        vectors, vseq = loaded_vectors
                        if vseq < self._position:
                            for change in self._changes(vseq, self._position):
                                if (change.workspace, change.namespace) == key:
                                    self._apply_vectors(vectors, change)
                        self._vectors[key] = vectors
                        self._vectors_seq[key] = vseq
                        if restored:
                            self._vectors_saved[key] = vectors.signature()
                    # seq > position: the next catch-up replays (position, seq] onto it, harmlessly
                    self._indexes[key] = index
                    self._unsaved[key] = 0 if loaded is not None else SAVE_AFTER_CHANGES
                    self.catch_up()  # what was written since the snapshot or during the build
            except BaseException:
                if held is not None:
                    held.release()
                if spill is not None:
                    shutil.rmtree(spill, ignore_errors=True)
                raise
        self._start_follower()
        if held is not None:  # the saver writes the built index under the lock, then lets the others load it
            self._save_built(key, held, spill)
        elif self.snapshots is not None and loaded_vectors is not None and not restored:
            self._save_in_background()
        return index

    def _load_both(
        self, key: Key, snapshots: SnapshotDirectory | None, *, shared: bool
    ) -> tuple[tuple[BM25Index, int] | None, tuple[ExactVectorIndex, int] | None]:
        """The namespace's BM25 index and vectors from its snapshot where usable, under the shared lock (``shared``;
        else the caller holds the exclusive one): no writer removes it meanwhile."""
        if snapshots is None:
            return None, None
        lock = snapshots.lock(shared=True) if shared else None
        try:
            directory = snapshots.current()
            if directory is None:
                return None, None
            loaded = self._load(key, directory)
            if loaded is not None:
                self._origin[key] = directory
            return loaded, self._restore_vectors(key, directory)
        finally:
            if lock is not None:
                lock.release()

    def loaded(self, workspace: str, namespace: str) -> BM25Index | None:
        """The namespace's index if this process holds it already (never loads or builds: does not block)."""
        return self._indexes.get((workspace, namespace))

    @property
    def vectors_in_database(self) -> bool:
        """Whether vector searches run in the database (pgvector HNSW) rather than on this process's memory."""
        return self.vector_search is not None

    def vectors(self, workspace: str, namespace: str) -> VectorSearch | None:
        """The namespace's vector search: the database's (``vector_search``), else its in-memory index (built
        with its BM25 index); None without an embedding model."""
        if self.embeddings is None:
            return None
        key = (workspace, namespace)
        if self.vector_search is not None:
            with self._lock:
                search = self._searches.get(key)
                if search is None:
                    search = self._searches[key] = self.vector_search(*key)
            return search
        self.get(workspace, namespace)
        return self._vectors.get(key)

    def _build_vectors(self, key: Key) -> tuple[ExactVectorIndex, int] | None:
        """The namespace's in-memory vector index and the feed position its load covers; None when vectors
        are not searched in memory (no embedding model, or the database searches them)."""
        if self.embeddings is None or self.vector_search is not None:
            return None
        seq = self.store.change_position()
        started = time.perf_counter()
        vectors = ExactVectorIndex(self.dimension, self.model, ann_min_vectors=self.ann_min_vectors)
        with vectors.bulk():  # its ANN graph (if any) is built once the rows are in
            for doc_key, chunk_keys, matrix in self.embeddings.namespace_vectors(*key, self.model):
                vectors.add(doc_key, chunk_keys, matrix)
            vectors.trim()  # 384 MB held for 293 MB of vectors at 200k passages before this
        log.info("vectors %s/%s: %d loaded in %.1fs", *key, len(vectors), time.perf_counter() - started)
        return vectors, seq

    def _restore_vectors(self, key: Key, directory: Path) -> tuple[ExactVectorIndex, int] | None:
        """The namespace's vector index from its snapshot (rows and graph memory-mapped) and the feed position it
        covers; None when there is none to use (logged when one was refused)."""
        if self.embeddings is None or self.vector_search is not None:
            return None
        started = time.perf_counter()
        try:
            found = vector_snapshot.manifest(directory)
            if found is None:
                return None
            seq = int(found["meta"]["seq"])
            if not self._ours(found["meta"]):
                log.warning("vector snapshot %s belongs to another database; loading the vectors from it", directory)
                return None
            vectors, _ = vector_snapshot.load(
                directory, self.model, self.dimension, ann_min_vectors=self.ann_min_vectors
            )
        except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
            log.warning("vector snapshot %s unusable (%s); loading the vectors from the store", directory, exc)
            return None
        log.info(
            "vectors %s/%s: %d restored (%d rows mapped, graph of %d rows) in %.2fs",
            *key,
            len(vectors),
            vectors.mapped_rows,
            vectors.graph_rows,
            time.perf_counter() - started,
        )
        return vectors, seq

    def _apply_vectors(self, vectors: ExactVectorIndex, change: DocumentChange) -> bool:
        """Apply one change to a vector index; True when it changed it."""
        if change.kind == "deleted":
            return vectors.remove(change.document_key)
        if change.kind == "embedded" and self.embeddings is not None:
            chunk_keys, matrix = self.embeddings.document_vectors(change.document_key, self.model)
            if matrix is not None:  # none: deleted since, and its own change follows
                vectors.add(change.document_key, chunk_keys, matrix)
                return True
        return False

    def _load(self, key: Key, directory: Path) -> tuple[BM25Index, int] | None:
        started = time.perf_counter()
        try:
            meta = BM25Index.manifest(directory)["meta"]
            seq = int(meta["seq"])
            if not self._ours(meta):
                log.warning("index snapshot %s belongs to another database; building afresh", directory)
                return None
            index = BM25Index.load(directory)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("index snapshot %s unusable (%s); building afresh", directory, exc)
            return None
        if (index.k1, index.b) != (DEFAULT_K1, DEFAULT_B):
            return None
        log.info("index %s/%s: %d passages loaded in %.2fs", *key, len(index), time.perf_counter() - started)
        return index, seq

    def _ours(self, meta: dict[str, Any]) -> bool:
        """Whether a snapshot's ``meta`` describes this feed's database: its identity (PostgreSQL's system identifier
        and database oid) and the change the feed holds at the snapshot's position."""
        if meta.get("database", "") != self.identity:
            return False
        return self._covers(int(meta["seq"]), meta.get("change"))

    def _covers(self, seq: int, change: object) -> bool:
        """Whether the store's feed holds, at ``seq``, the change the snapshot recorded there."""
        if seq == 0:
            return True
        found = self.store.changes_since(seq - 1, 1)
        return bool(found) and found[0].seq == seq and fingerprint(self.store, found[0]) == change

    # -- following the feed ----------------------------------------------------
    def catch_up(self) -> int:
        """Apply every change after the current position to the loaded indexes; returns how many were read."""
        with self._lock:
            if not self._indexes:
                return 0
            read = 0
            while True:
                changes = self.store.changes_since(self._position, FEED_BATCH)
                for change in changes:
                    key = (change.workspace, change.namespace)
                    index = self._indexes.get(key)
                    if index is not None and apply_change(self.store, index, change):
                        self._unsaved[key] = self._unsaved.get(key, 0) + 1
                    vectors = self._vectors.get(key)
                    # A BM25 snapshot older than the vectors (the usual restart once embedding is done)
                    # moves the position back before them: re-reading every embedded document again
                    # would double the start-up load and leave the matrix half dead rows.
                    applies = vectors is not None and change.seq > self._vectors_seq.get(key, 0)
                    if applies and vectors is not None and self._apply_vectors(vectors, change):
                        self._unsaved[key] = self._unsaved.get(key, 0) + 1
                    self._position = change.seq
                read += len(changes)
                if len(changes) < FEED_BATCH:
                    return read

    def _changes(self, after: int, upto: int) -> Iterable[DocumentChange]:
        while after < upto:
            changes = self.store.changes_since(after, FEED_BATCH)
            for change in changes:
                if change.seq > upto:
                    return
                yield change
            if len(changes) < FEED_BATCH:
                return
            after = changes[-1].seq

    def _apply_to(self, key: Key, index: BM25Index, changes: Iterable[DocumentChange]) -> int:
        """Apply the namespace's changes among ``changes``; returns how many changed the index."""
        return sum(
            apply_change(self.store, index, change) for change in changes if (change.workspace, change.namespace) == key
        )

    def _start_follower(self) -> None:
        with self._lock:
            if self.follow and self._follower is None and not self._stop.is_set():
                self._follower = threading.Thread(target=self._follow, name="index-follower", daemon=True)
                self._follower.start()

    def _follow(self) -> None:
        next_poll = 0.0
        failing = False
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                notified = self.store.wait_for_changes(WAIT_SECONDS)
                can_notify = notified or time.monotonic() - started >= WAIT_SECONDS / 2
                if notified or time.monotonic() >= next_poll:
                    self.catch_up()
                    next_poll = time.monotonic() + (FALLBACK_POLL_SECONDS if can_notify else POLL_SECONDS)
                    self._maybe_save()
                if failing:
                    log.warning("index follower: caught up again at change %d", self._position)
                    failing = False
            except StorageError as exc:  # the database went away: retry, then catch up from the position
                if self._stop.is_set():
                    return
                if not failing:
                    log.warning("index follower: %s; retrying", exc)
                    failing = True
                self._stop.wait(1.0)
                continue
            except Exception:  # noqa: BLE001 - the follower must outlive a bug in one change
                log.exception("index follower failed; retrying")
                self._stop.wait(1.0)
                continue
            if not notified:
                self._stop.wait(max(0.0, WAIT_SECONDS - (time.monotonic() - started)))

    # -- saving ------------------------------------------------------------------
    def save(self, *, only_changed: bool = False) -> int:
        """Snapshot every loaded index (or those changed since their snapshot); returns how many were written."""
        if self.snapshots is None:
            return 0
        saved = 0
        for key in list(self._indexes):
            vectors = self._vectors.get(key)
            vectors_changed = vectors is not None and self._vectors_saved.get(key) != vectors.signature()
            if only_changed and self._unsaved.get(key, 0) == 0 and not vectors_changed:
                continue
            try:
                written = self._save_one(key, vectors)
            except OSError as exc:
                log.warning("could not save the index of %s/%s: %s", *key, exc)
                self._save_failed_at = time.monotonic()
                continue
            saved += written
        return saved

    def _save_one(self, key: Key, vectors: ExactVectorIndex | None, held: SnapshotLock | None = None) -> int:
        """One namespace's snapshot: its vectors first (outside the lock: the rows never change in place),
        then the BM25 index and the position it reflects, together under the lock. ``held``: the namespace's
        exclusive lock, already the caller's (a build's); without it a save gives way to another process's
        newer snapshot (this one loads that instead, ``_adopt_newer``)."""
        assert self.snapshots is not None
        snapshots = SnapshotDirectory(self.snapshots, key)
        vectors_saved: vector_snapshot.Saved | None = None
        with snapshots.writing(held) as directory:
            if directory is None:
                return 0  # another saver holds the directory: this index stays marked unsaved
            current = snapshots.current()
            if held is None and current is not None and current != self._origin.get(key):
                return 0  # another process saved since this one loaded: adopted at the next follower round
            if vectors is not None:
                with vectors.pinned_graph() as graph:
                    with self._lock:  # the vectors and the position they reflect, together
                        frozen = vectors.freeze(graph)
                        vmeta = self._meta()
                    vectors_saved = vector_snapshot.save(frozen, directory, self.model, self.dimension, vmeta)
            with self._lock:  # the index and the position it reflects, together
                index = self._indexes[key]
                meta = self._meta()
                unsaved = self._unsaved.get(key, 0)
                segments = index.save(directory, meta, whole=held is not None)
            self._origin[key] = directory  # before the lock goes: the follower must not take it for another's
        assert directory is not None  # committed: its files stay until a later save's are
        index.settle(directory, segments)
        del segments  # the last reference to the segments held in memory: freed here, then given back
        return_freed_memory()
        with self._lock:
            self._unsaved[key] = self._unsaved.get(key, 0) - unsaved
        if vectors is not None and vectors_saved is not None:
            self._vectors_saved[key] = vectors_saved.frozen.signature
            vector_snapshot.settle(vectors, vectors_saved)
        log.info("index %s/%s: saved at change %s", *key, meta["seq"])
        return 1

    def _meta(self) -> dict[str, object]:
        """What a snapshot taken now records (under the lock): the feed position, the change there, the database."""
        return {"seq": self._position, "change": self._fingerprint_at(self._position), "database": self.identity}

    def _save_built(self, key: Key, held: SnapshotLock, spill: Path | None) -> None:
        """Save a namespace's freshly built index in the background under ``held``, then release it: the processes
        waiting on the lock load this snapshot; the build's spilled postings go once the index reads the saved ones."""

        def run() -> None:
            try:
                self._save_one(key, self._vectors.get(key), held)
            except (OSError, StorageError) as exc:
                log.warning("could not save the index of %s/%s: %s", *key, exc)
                self._save_failed_at = time.monotonic()
            finally:
                held.release()
                if spill is not None:
                    shutil.rmtree(spill, ignore_errors=True)

        thread = threading.Thread(target=run, name="index-save-built", daemon=True)
        with self._lock:
            self._extra_savers = [t for t in self._extra_savers if t.is_alive()] + [thread]
        thread.start()

    def _adopt_newer(self) -> None:
        """Load the snapshot another process saved since this one loaded or saved its own, caught up to this
        process's position: the host's processes then read one copy of the files, not one each."""
        if self.snapshots is None:
            return
        for key in list(self._indexes):
            snapshots = SnapshotDirectory(self.snapshots, key)
            current = snapshots.current()
            if current is None or current == self._origin.get(key):
                continue
            lock = snapshots.lock(shared=True, wait=False)
            if lock is None:
                continue  # being written: next round
            with lock:
                current = snapshots.current()
                loaded = self._load(key, current) if current is not None else None
            if loaded is None or current is None:
                continue
            index, seq = loaded
            with self._lock:
                self._unsaved[key] = self._apply_to(key, index, self._changes(seq, self._position))
                self._indexes[key] = index  # searches that hold the old one finish on it
                self._origin[key] = current

    def _fingerprint_at(self, seq: int) -> list[object] | None:
        found = self.store.changes_since(seq - 1, 1) if seq else []
        return fingerprint(self.store, found[0]) if found and found[0].seq == seq else None

    def _maybe_save(self) -> None:
        if self.snapshots is None or time.monotonic() - self._save_failed_at < RETRY_SAVE_SECONDS:
            return
        self._adopt_newer()
        if any(n >= SAVE_AFTER_CHANGES for n in self._unsaved.values()) or any(
            self._graph_unsaved(key, vectors) for key, vectors in list(self._vectors.items())
        ):
            self._save_in_background()

    def _graph_unsaved(self, key: Key, vectors: ExactVectorIndex) -> bool:
        """A graph built or extended since the last snapshot, now idle: worth saving (a restart then maps it)."""
        saved = self._vectors_saved.get(key)
        return not vectors.building and vectors.graph_rows > 0 and (saved is None or saved[3] != vectors.graph_rows)

    def wait_saved(self, timeout: float) -> bool:
        """Wait until no snapshot save runs or is due for a built graph; False on timeout. The settle point that
        tests check saved files at and benchmarks time searches from (a save writes ~400 MB at 200k passages)."""
        end = time.monotonic() + timeout
        while self.snapshots is not None and time.monotonic() < end:
            with self._lock:
                saver = self._saver
                due = any(self._graph_unsaved(key, vectors) for key, vectors in self._vectors.items())
                busy = [t for t in (saver, *self._extra_savers) if t is not None and t.is_alive()]
            if busy:
                busy[0].join(timeout=max(0.0, end - time.monotonic()))
            elif not due:
                return True
            else:
                time.sleep(0.2)
        return self.snapshots is None

    def _save_in_background(self) -> None:
        with self._lock:
            if self._saver is not None and self._saver.is_alive() or self._stop.is_set():
                return

            def run() -> None:
                try:
                    self.save(only_changed=True)
                except StorageError as exc:
                    log.warning("could not save the indexes: %s", exc)

            self._saver = threading.Thread(target=run, name="index-save", daemon=True)
            self._saver.start()

    def close(self, *, save: bool = True) -> None:
        """Stop following the feed and (snapshots on) save the indexes that changed since their snapshot."""
        self._stop.set()
        for vectors in list(self._vectors.values()):
            vectors.close()
        for thread in (self._follower, self._saver, *self._extra_savers):
            if thread is not None:
                thread.join(timeout=30)
        if save:
            try:
                self.save(only_changed=True)
            except StorageError as exc:
                log.warning("could not save the indexes at close: %s", exc)
