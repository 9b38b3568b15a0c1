"""Embeddings cached by content: re-embedding unchanged text costs nothing.

The key is sha256(model name, NUL, text): the same text under another model is
another key, so a model change never serves stale vectors. ``CachedEmbedder`` wraps
any ``Embedder`` and embeds only the texts the cache does not hold (each distinct
text once per call). ``SQLiteVectorCache`` keeps vectors in a SQLite file
(float32 blobs), safe to share between threads of one process.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from calypso.embeddings.base import Embedder

log = logging.getLogger("calypso.embeddings")


def content_key(model: str, text: str) -> bytes:
    """The cache key of ``text`` embedded by ``model``."""
    return hashlib.sha256(model.encode() + b"\0" + text.encode("utf-8", "surrogatepass")).digest()


class VectorCache(Protocol):
    """Vectors by content key; ``get_many`` returns only the keys it holds."""

    def get_many(self, keys: Sequence[bytes]) -> Mapping[bytes, np.ndarray]: ...

    def put_many(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None: ...


class MemoryVectorCache:
    """A dict; for tests and short-lived tools."""

    def __init__(self) -> None:
        self._d: dict[bytes, np.ndarray] = {}

    def get_many(self, keys: Sequence[bytes]) -> Mapping[bytes, np.ndarray]:
        return {k: self._d[k] for k in keys if k in self._d}

    def put_many(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        self._d.update(items)

    def __len__(self) -> int:
        return len(self._d)


class SQLiteVectorCache:
    """A table ``embedding_cache(key BLOB PRIMARY KEY, dim, vector BLOB)`` in its own file."""

    def __init__(self, path: Path | str) -> None:
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS embedding_cache (key BLOB PRIMARY KEY, dim INTEGER NOT NULL, "
                "vector BLOB NOT NULL) WITHOUT ROWID"
            )

    def get_many(self, keys: Sequence[bytes]) -> Mapping[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        with self._lock:
            for i in range(0, len(keys), 500):
                part = list(keys[i : i + 500])
                marks = ",".join("?" * len(part))
                for key, _dim, blob in self._conn.execute(
                    f"SELECT key, dim, vector FROM embedding_cache WHERE key IN ({marks})", part
                ):
                    out[bytes(key)] = np.frombuffer(blob, dtype=np.float32).copy()
        return out

    def put_many(self, items: Iterable[tuple[bytes, np.ndarray]]) -> None:
        rows = [(k, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes()) for k, v in items]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany("INSERT OR REPLACE INTO embedding_cache VALUES (?, ?, ?)", rows)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # SQLite already rolled back on SQLITE_FULL
                    self._conn.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def open_sqlite_cache(path: Path) -> SQLiteVectorCache | None:
    """The cache file at ``path``, or None (logged) when it cannot be opened: a full disk, say.

    A cache is an optimisation: without it every text is embedded again, and the server still starts.
    """
    try:
        return SQLiteVectorCache(path)
    except (sqlite3.Error, OSError) as exc:
        log.warning("embedding cache %s cannot be opened (%s): embedding without a cache", path, exc)
        return None


class CachedEmbedder:
    """An ``Embedder`` that asks ``inner`` only for texts ``cache`` does not hold.

    A cache that fails to store (a full disk) costs only the saving: the vectors are still returned.
    """

    def __init__(self, inner: Embedder, cache: VectorCache) -> None:
        self.inner = inner
        self.cache = cache
        self.embedded = 0  # texts actually sent to the model, for reports and tests

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    @property
    def languages(self) -> frozenset[str] | None:
        return self.inner.languages

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [content_key(self.inner.name, t) for t in texts]
        found = dict(self.cache.get_many(list(dict.fromkeys(keys))))
        missing: dict[bytes, str] = {}
        for k, t in zip(keys, texts):
            if k not in found:
                missing.setdefault(k, t)
        if missing:
            vectors = self.inner.embed(list(missing.values()))
            fresh = list(zip(missing.keys(), vectors))
            try:
                self.cache.put_many(fresh)
            except sqlite3.Error as exc:
                log.warning("could not store %d vectors in the embedding cache: %s", len(fresh), exc)
            found.update(fresh)
            self.embedded += len(missing)
        if not texts:
            return np.zeros((0, self.inner.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
