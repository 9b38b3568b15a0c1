"""A knowledge base in one portable file: ``calypso export`` writes it, ``calypso import`` reads it into either backend.

The archive is a zip file:

    manifest.json             format, format_version, calypso_version, created_at, scope, the embedding
                              model and the vectors' models, and per table its member and row count
    tables/<table>.jsonl      one JSON object a row (``store/portable.py`` names the tables and columns),
                              in the order an import writes them; a vector is base64 of little-endian float32
    files/<sha256>            a document's original bytes (documents with the same bytes share one)

An export reads one snapshot of the database (a server may keep writing meanwhile) into a temporary file
beside the target and renames it when complete: a half-written archive never has the archive's name, and
a zip without its closing directory does not open anyway. An import checks the manifest (a newer format is
``ArchiveTooNew``) and every member's checksum first, then writes every row in one transaction: a truncated
or corrupt archive, a row count that disagrees with the manifest or a conflicting id rolls it all back.
Ids are kept, and rows the target has already are left as they are, so a second import changes nothing.
Vectors stay when the target's embedding model has the archive's name and dimension; otherwise their
documents are queued for the target's model (``store/portable.py``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import os
import tempfile
import time
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from calypso import __version__
from calypso.config import Settings
from calypso.errors import ArchiveTooNew, ArchiveUnreadable, InvalidRequest
from calypso.store.base import Storage
from calypso.store.portable import NOT_CARRIED, TABLE, TABLES, LoadCounts, Scope

FORMAT = "calypso-knowledge-base"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
_UNREADABLE = (zipfile.BadZipFile, zlib.error, EOFError, OSError, UnicodeDecodeError, ValueError, KeyError, TypeError)


@dataclass
class ExportReport:
    path: Path
    size: int  # bytes of the archive
    rows: dict[str, int]
    files: int
    seconds: float


@dataclass
class ImportReport:
    manifest: dict[str, Any]
    counts: LoadCounts
    seconds: float
    rows: dict[str, int] = field(default_factory=dict)  # rows the archive held, per table


def member(table: str) -> str:
    return f"tables/{table}.jsonl"


def _entry(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _encode(row: dict[str, Any]) -> dict[str, Any]:
    vector = row.get("vector")
    if isinstance(vector, np.ndarray):
        row["vector"] = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return row


def _line(row: dict[str, Any]) -> bytes:
    return (json.dumps(_encode(row), ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def write_archive(
    storage: Storage, path: Path, scope: Scope = Scope(), *, embedding_model: str | None = None
) -> ExportReport:
    """Write the scope's knowledge base to ``path`` (replaced only once the new archive is complete)."""
    started = time.monotonic()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    rows: dict[str, int] = {}
    models: Counter[tuple[str, int]] = Counter()
    files: set[str] = set()
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            with storage.portable.reading(scope) as reader:
                for table in TABLES:
                    if not scope.carries(table):
                        continue
                    source = reader.rows(table.name)
                    if table.name == "documents":
                        rows[table.name] = _write_documents(zf, source, files)
                        continue
                    count = 0
                    with zf.open(_entry(member(table.name)), "w", force_zip64=True) as out:
                        for row in source:
                            if table.name == "chunk_embeddings":
                                models[(row["model"], int(row["dimension"]))] += 1
                            out.write(_line(row))
                            count += 1
                    rows[table.name] = count
            manifest = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "calypso_version": __version__,
                "created_at": int(time.time()),
                "scope": {"workspace": scope.workspace, "namespace": scope.namespace},
                "embedding": {"configured_model": embedding_model, "vectors": _models(models)},
                "tables": {name: {"member": member(name), "rows": n} for name, n in rows.items()},
                "files": len(files),
            }
            zf.writestr(MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False))
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return ExportReport(path, path.stat().st_size, rows, len(files), time.monotonic() - started)


def _models(models: Counter[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"model": m, "dimension": d, "vectors": n} for (m, d), n in sorted(models.items())]


def _write_documents(zf: zipfile.ZipFile, source: Iterable[dict[str, Any]], files: set[str]) -> int:
    """The documents' rows (spooled: a zip writes one member at a time) and each one's bytes as a file."""
    count = 0
    with tempfile.SpooledTemporaryFile(max_size=16 << 20) as lines:
        for row in source:
            content: bytes = row.pop("content")
            name = "files/" + hashlib.sha256(content).hexdigest()
            if name not in files:
                zf.writestr(name, content)
                files.add(name)
            row["file"] = name
            lines.write(_line(row))
            count += 1
        lines.seek(0)
        with zf.open(_entry(member("documents")), "w", force_zip64=True) as out:
            while block := lines.read(1 << 20):
                out.write(block)
    return count


def read_manifest(zf: zipfile.ZipFile, path: Path) -> dict[str, Any]:
    """The archive's manifest; ArchiveUnreadable when it is not a Calypso archive, ArchiveTooNew when newer."""
    try:
        manifest = json.loads(zf.read(MANIFEST))
    except _UNREADABLE as exc:
        raise ArchiveUnreadable(f"{path} has no readable {MANIFEST}: it is not a Calypso archive ({exc}).") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveUnreadable(
            f"{path} is not a Calypso knowledge-base archive (no format {FORMAT!r} in its manifest)."
        )
    version = manifest.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise ArchiveUnreadable(f"{path} names no valid archive format version ({version!r}).")
    if version > FORMAT_VERSION:
        raise ArchiveTooNew(
            f"{path} was written by Calypso {manifest.get('calypso_version', '?')} in archive format {version}; "
            f"this Calypso ({__version__}) reads format {FORMAT_VERSION} at most. Upgrade Calypso here, or export "
            "again with this version, then import."
        )
    tables = manifest.get("tables")
    unknown = sorted(set(tables) - set(TABLE)) if isinstance(tables, dict) else ["(no tables)"]
    if unknown:
        raise ArchiveUnreadable(f"{path} holds tables this Calypso does not know: {', '.join(unknown)}.")
    return manifest


def _open(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError as exc:
        raise InvalidRequest(f"No archive at {path}; give the path `calypso export` wrote.") from exc
    except _UNREADABLE as exc:
        raise ArchiveUnreadable(
            f"{path} is not a complete Calypso archive: truncated, corrupt or not a zip file ({exc}). "
            "Nothing was imported; export it again."
        ) from exc


def _check(zf: zipfile.ZipFile, path: Path) -> None:
    """Every member's checksum, before the target is touched."""
    try:
        bad = zf.testzip()
    except _UNREADABLE as exc:
        bad = f"? ({exc})"
    if bad is not None:
        raise ArchiveUnreadable(f"{path} is corrupt: its member {bad} fails its checksum. Nothing was imported.")


def _rows(zf: zipfile.ZipFile, path: Path, table: str, expected: int, seen: dict[str, int]) -> Iterator[dict[str, Any]]:
    """A table's rows, decoded; ArchiveUnreadable (raised inside the import's transaction) when they are not whole."""
    count = 0
    try:
        with zf.open(member(table)) as raw:
            for line in io.TextIOWrapper(raw, encoding="utf-8"):
                row = json.loads(line)
                if table == "documents":
                    row["content"] = _content(zf, row.pop("file"))
                elif table == "chunk_embeddings":
                    row["vector"] = np.frombuffer(base64.b64decode(row["vector"]), dtype="<f4")
                count += 1
                yield row
    except ArchiveUnreadable:
        raise
    except _UNREADABLE as exc:
        raise ArchiveUnreadable(f"{path} is corrupt in {member(table)} ({exc}); nothing was imported.") from exc
    seen[table] = count
    if count != expected:
        raise ArchiveUnreadable(
            f"{path} holds {count} rows of {table} where its manifest says {expected}: it is incomplete. "
            "Nothing was imported; export it again."
        )


def _content(zf: zipfile.ZipFile, name: str) -> bytes:
    content = zf.read(name)
    if "files/" + hashlib.sha256(content).hexdigest() != name:
        raise ArchiveUnreadable(f"the archive's file {name} does not hold the bytes its name says")
    return content


def read_archive(storage: Storage, path: Path, *, model: tuple[str, int] | None) -> ImportReport:
    """Import the archive at ``path`` into ``storage``, all of it or nothing (see the module's docstring).

    ``model``: the target's embedding model (name, dimension), None when it has none (vectors kept as they are).
    """
    started = time.monotonic()
    path = Path(path)
    with _open(path) as zf:
        manifest = read_manifest(zf, path)
        _check(zf, path)
        tables = manifest["tables"]
        seen: dict[str, int] = {}
        needs = sum(info.file_size for info in zf.infolist())

        def source() -> Iterator[tuple[str, Iterator[dict[str, Any]]]]:
            for table in TABLES:
                if table.name in tables:
                    yield table.name, _rows(zf, path, table.name, int(tables[table.name]["rows"]), seen)

        counts = storage.portable.load(source(), model, needs)
    return ImportReport(manifest, counts, time.monotonic() - started, seen)


def target_model(settings: Settings) -> tuple[str, int] | None:
    """The configured embedding model's name and dimension (loading it), or None when search is keyword-only."""
    from calypso.services import open_embedding_model

    embedder = open_embedding_model(settings)
    return None if embedder is None else (embedder.name, embedder.dimension)


def export_knowledge_base(settings: Settings, path: Path, scope: Scope = Scope()) -> ExportReport:
    """``calypso export``: the configured knowledge base (or the scope of it) to ``path``."""
    from calypso.services import open_storage

    storage = open_storage(settings)
    try:
        return write_archive(storage, path, scope, embedding_model=settings.embedding_model)
    finally:
        storage.close()


def import_knowledge_base(settings: Settings, path: Path) -> ImportReport:
    """``calypso import``: the archive into the configured backend; on SQLite, no server may hold it meanwhile."""
    from calypso.services import open_storage

    with _open(Path(path)) as zf:  # a bad archive is refused before the model loads or the database opens
        read_manifest(zf, Path(path))
    storage = open_storage(settings, exclusive=True)
    try:
        return read_archive(storage, path, model=target_model(settings))
    finally:
        storage.close()


__all__ = [
    "FORMAT_VERSION",
    "NOT_CARRIED",
    "ExportReport",
    "ImportReport",
    "Scope",
    "export_knowledge_base",
    "import_knowledge_base",
    "read_archive",
    "target_model",
    "write_archive",
]
