"""Uploads that arrived without a key, held until an authenticated call adds them to a collection.

Why this exists: on an insecure channel (``use_insecure_channel=True``, how a
client reaches a self-hosted server without TLS) xai-sdk adds the API key
through client interceptors that cover unary calls only, so its streamed
``UploadFile`` carries no ``authorization`` at all, while the
``AddDocumentToCollection`` that follows does. With keys required, such an
upload is held here under an unguessable file id (a capability, like a signed
link) and nothing is stored or ingested until a keyed ``AddDocumentToCollection``
names it; it is then ingested straight into that collection, in the caller's
workspace. Entries expire, and the bytes held at once are bounded, so a caller
without a key can do no more than briefly fill this buffer.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class StagedFile:
    id: str
    filename: str
    data: bytes
    created_at: int


class StagingFull(Exception):
    """Too many bytes of unclaimed uploads are held; the caller should add its files or retry later."""


class StagedUploads:
    def __init__(self, max_bytes: int, ttl_seconds: float = 600.0) -> None:
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._files: dict[str, tuple[float, StagedFile]] = {}
        self._lock = threading.Lock()

    def _expire(self, now: float) -> None:
        for file_id in [k for k, (at, _) in self._files.items() if now - at > self.ttl_seconds]:
            del self._files[file_id]

    def put(self, filename: str, data: bytes) -> StagedFile:
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            held = sum(len(f.data) for _, f in self._files.values())
            if held + len(data) > self.max_bytes:
                raise StagingFull
            staged = StagedFile(f"file-{secrets.token_hex(16)}", filename, data, int(time.time()))
            self._files[staged.id] = (now, staged)
            return staged

    def take(self, file_id: str) -> StagedFile | None:
        """The unclaimed upload with this id, removed; None when there is none (or it expired)."""
        with self._lock:
            self._expire(time.monotonic())
            entry = self._files.pop(file_id, None)
        return entry[1] if entry is not None else None

    def restore(self, staged: StagedFile) -> None:
        """Put back an upload whose claim failed (an unknown collection, say), so the client can retry."""
        with self._lock:
            self._files[staged.id] = (time.monotonic(), staged)
