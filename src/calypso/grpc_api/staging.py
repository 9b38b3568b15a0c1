"""Uploads that arrived without a key, held until an authenticated call adds them to a collection.

Why this exists: on an insecure channel (``use_insecure_channel=True``, how a
client reaches a self-hosted server without TLS) xai-sdk adds the API key
through client interceptors that cover unary calls only, so its streamed
``UploadFile`` carries no ``authorization`` at all, while the
``AddDocumentToCollection`` that follows does. With keys required, such an
upload is held here under an unguessable file id (a capability, like a signed
link) and nothing is stored or ingested until a keyed ``AddDocumentToCollection``
names it; it is then ingested straight into that collection, in the caller's
workspace.

Bytes without a key must not buy memory or deny the callers who hold keys, so:

* bytes count from the first chunk received (``Intake.add``), not once a file is
  whole: four streams of 48 MB cannot buffer 192 MB before any check;
* each peer address may hold ``per_peer_bytes`` (received and staged), all
  peers together ``max_bytes``, of which ``reserved_bytes`` only peers that made a
  keyed call in the last ``vouch_seconds`` (an xai-sdk client that created or
  listed a collection, or added an earlier upload) may use;
* a staged upload expires after ``ttl_seconds`` (the SDK claims it milliseconds
  later), and when room is short the oldest staged uploads of unvouched peers
  go first: only bytes still being received can refuse a newcomer, and a
  keyless stream has ``receive_seconds`` to finish.

The trade-off (docs/xai.md): peers are told apart by address, so clients behind
one proxy or NAT share one peer's room; there, send keys over TLS, which
bypasses this buffer.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class StagedFile:
    id: str
    filename: str
    data: bytes
    created_at: int
    host: str = ""


class StagingFull(Exception):
    """No room for more bytes without a key; the message says whose limit and what to do."""


def peer_host(peer: str) -> str:
    """The address of a gRPC peer string (``ipv4:127.0.0.1:50432``, ``ipv6:[::1]:50432``), without its port."""
    return peer.rsplit(":", 1)[0] if peer.count(":") >= 2 else peer


@dataclass
class _Staged:
    at: float
    file: StagedFile


@dataclass
class _Host:
    receiving: int = 0  # bytes of unfinished streams: not evictable
    staged: int = 0
    vouched_at: float = field(default=-1e18)


class StagedUploads:
    def __init__(
        self,
        max_bytes: int,
        *,
        per_peer_bytes: int | None = None,
        reserved_bytes: int = 0,
        ttl_seconds: float = 60.0,
        receive_seconds: float = 120.0,
        vouch_seconds: float = 600.0,
    ) -> None:
        self.max_bytes = max_bytes
        self.per_peer_bytes = per_peer_bytes if per_peer_bytes is not None else max_bytes
        self.reserved_bytes = min(reserved_bytes, max_bytes)
        self.ttl_seconds, self.receive_seconds, self.vouch_seconds = ttl_seconds, receive_seconds, vouch_seconds
        self._files: dict[str, _Staged] = {}  # insertion order is age order
        self._hosts: dict[str, _Host] = {}
        self._receiving = 0
        self._staged = 0
        self._lock = threading.Lock()

    # -- who holds a key ------------------------------------------------------------------
    def vouch(self, peer: str) -> None:
        """A keyed call came from this peer: its address may use the reserved room for a while."""
        with self._lock:
            self._host(peer_host(peer)).vouched_at = time.monotonic()

    def _vouched(self, host: str, now: float) -> bool:
        entry = self._hosts.get(host)
        return entry is not None and now - entry.vouched_at <= self.vouch_seconds

    def _host(self, host: str) -> _Host:
        return self._hosts.setdefault(host, _Host())

    # -- bookkeeping ----------------------------------------------------------------------
    def held(self) -> int:
        """Bytes held now, received and staged (for tests and metrics)."""
        with self._lock:
            return self._receiving + self._staged

    def _drop(self, file_id: str) -> _Staged | None:
        entry = self._files.pop(file_id, None)
        if entry is not None:
            size = len(entry.file.data)
            self._staged -= size
            self._host(entry.file.host).staged -= size
        return entry

    def _expire(self, now: float) -> None:
        for file_id in [k for k, e in self._files.items() if now - e.at > self.ttl_seconds]:
            self._drop(file_id)
        for host in [h for h, e in self._hosts.items() if not e.receiving and not e.staged]:
            if now - self._hosts[host].vouched_at > self.vouch_seconds:
                del self._hosts[host]

    def _admit(self, host: str, size: int) -> None:
        """Count ``size`` more bytes for ``host``, evicting the oldest unvouched staged uploads if needed."""
        now = time.monotonic()
        self._expire(now)
        vouched = self._vouched(host, now)
        total_room = self.max_bytes if vouched else self.max_bytes - self.reserved_bytes
        entry = self._host(host)

        def fits() -> bool:
            own = entry.receiving + entry.staged + size <= self.per_peer_bytes
            return own and self._receiving + self._staged + size <= total_room

        for file_id in list(self._files):
            if fits():
                break
            staged = self._files[file_id].file
            if staged.host == host or not self._vouched(staged.host, now):
                self._drop(file_id)  # oldest first; a vouched peer's upload is never evicted for another's
        if not fits():
            if entry.receiving + size > self.per_peer_bytes:
                raise StagingFull(
                    f"This address is already sending {entry.receiving:,} bytes of uploads without a key "
                    f"(at most {self.per_peer_bytes:,}); wait for them to finish, or send the API key with the "
                    "upload (a TLS channel)."
                )
            raise StagingFull(
                "Too many uploads without a key are being received; retry in a minute, or send the API key "
                "with the upload (a TLS channel)."
            )
        entry.receiving += size
        self._receiving += size

    # -- receiving and claiming -----------------------------------------------------------
    def receiving(self, peer: str) -> Intake:
        """An intake counting a keyless stream's bytes as they arrive; close it however the stream ends."""
        return Intake(self, peer_host(peer))

    def take(self, file_id: str) -> StagedFile | None:
        """The unclaimed upload with this id, removed; None when there is none (or it expired)."""
        with self._lock:
            self._expire(time.monotonic())
            entry = self._drop(file_id)
        return entry.file if entry is not None else None

    def restore(self, staged: StagedFile) -> None:
        """Put back an upload whose claim failed (an unknown collection, say), so the client can retry."""
        with self._lock:
            self._files[staged.id] = _Staged(time.monotonic(), staged)
            self._staged += len(staged.data)
            self._host(staged.host).staged += len(staged.data)


class Intake:
    """One keyless stream's bytes: ``add`` as chunks arrive, ``finish`` to stage the file, ``close`` always."""

    def __init__(self, uploads: StagedUploads, host: str) -> None:
        self.uploads, self.host = uploads, host
        self.counted = 0

    def add(self, size: int) -> None:
        with self.uploads._lock:
            self.uploads._admit(self.host, size)
        self.counted += size

    def _release(self) -> None:
        uploads = self.uploads
        entry = uploads._host(self.host)
        entry.receiving -= self.counted
        uploads._receiving -= self.counted
        self.counted = 0

    def finish(self, filename: str, data: bytes) -> StagedFile:
        staged = StagedFile(f"file-{secrets.token_hex(16)}", filename, data, int(time.time()), self.host)
        uploads = self.uploads
        with uploads._lock:
            self._release()
            uploads._files[staged.id] = _Staged(time.monotonic(), staged)
            uploads._staged += len(data)
            uploads._host(self.host).staged += len(data)
        return staged

    def close(self) -> None:
        with self.uploads._lock:
            self._release()
