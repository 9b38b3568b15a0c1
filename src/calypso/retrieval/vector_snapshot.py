"""A namespace's vector index saved in its index snapshot (``snap-*/vectors/``), restored memory-mapped.

The files, all on disk (fsynced) before the snapshot's ``CURRENT`` names the directory:

- ``manifest.json``: format, model, dimension, rows, live rows, the row files and the rows each holds,
  the graph file and the rows it covers, a CRC-32 of every other file, and the caller's ``meta`` (the
  feed position the vectors reflect and its fingerprint: ``services/index_sync.py`` checks those).
- ``rows-<id>.npy``: float32 rows, at most two files. A base file that an earlier save wrote and the
  index still maps is hard-linked, not rewritten (rows never change in place), and the rows since go
  to a second file; once those pass ``TAIL_FILE_ROWS``, one new file holds every row.
- ``chunk_keys.npy``, ``doc_keys.npy``, ``live.npy``, ``ranges.npy`` (document, start, end).
- ``graph-<id>.usearch``: the HNSW graph (``retrieval/ann.py``), linked too while unchanged.

``load`` maps the base rows (``np.load(mmap_mode="r")``: page cache the kernel can reclaim, not
anonymous memory; searches read their candidates from the file, ``retrieval/row_file.py``) and the graph
(usearch ``view``), and checks that the parts agree: the model and
dimension, every array's length against the row count, the ranges against the keys and the live
mask, the graph's own header against the rows it should cover, a sample of rows finding themselves
in the graph, and the checksums. Row files are checked by shape, not checksummed: reading 300 MB at
every start would cost what mapping saves, and wrong rows cannot crash a search (a torn graph file
could crash usearch, hence its checksum). Rows that fail a check raise ``SnapshotMismatch`` (the
caller loads the vectors from the store); a graph that fails is dropped and rebuilt in the background.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from calypso.retrieval import ann
from calypso.retrieval.row_file import link_saved
from calypso.retrieval.vectors import ExactVectorIndex, Frozen

log = logging.getLogger("calypso.index")

FORMAT = 1
DIRECTORY = "vectors"  # inside a snapshot directory
TAIL_FILE_ROWS = 32_768  # rows past a linked base file written beside it; more: one new file of every row
WRITE_ROWS = 8192  # rows written per call (bounded temporaries when a part is a memory map)
SELF_CHECK_ROWS = 8  # rows searched in a restored graph: each should find itself


class SnapshotMismatch(ValueError):
    """Saved vectors that do not belong to this index (other model or dimension) or do not agree."""


@dataclass(frozen=True)
class Saved:
    """What a save wrote: ``base_file`` holds rows ``[0, base_rows)`` (``linked``: the frozen base's own file,
    linked); ``graph_file`` the graph of ``graph_rows`` rows (None: none saved)."""

    frozen: Frozen
    base_file: Path
    base_rows: int
    linked: bool
    graph_file: Path | None
    graph_rows: int


def settle(index: ExactVectorIndex, saved: Saved) -> None:
    """After the snapshot is committed: read the rows and the graph from its files instead of memory (or
    from the files' new names, when they were linked), so the older snapshot can go."""
    if saved.linked:
        index.rebase(saved.frozen, saved.frozen.base, saved.base_file)
    else:
        rows = np.asarray(np.load(saved.base_file, mmap_mode="r", allow_pickle=False))
        index.rebase(saved.frozen, rows, saved.base_file)
    if saved.graph_file is not None and saved.frozen.graph is not None:
        try:
            saved.frozen.graph.remap(saved.graph_file, saved.graph_rows)
        except (OSError, ValueError) as exc:  # the graph stays in memory
            log.warning("vector graph not mapped from %s: %s", saved.graph_file, exc)


def save(frozen: Frozen, snapshot: Path, model: str, dimension: int, meta: dict[str, object]) -> Saved:
    """Write ``frozen`` (see ``ExactVectorIndex.freeze``; its graph must still be pinned) into ``snapshot``."""
    directory = snapshot / DIRECTORY
    directory.mkdir(parents=True)
    crc: dict[str, int] = {}
    graph_name, graph_file = None, None
    if frozen.graph is not None:
        graph_name = f"graph-{uuid.uuid4().hex[:12]}.usearch"
        graph_file = directory / graph_name
        mapped = frozen.graph.mapped
        linked = link_saved(mapped, graph_file) if mapped is not None else False
        old_crc = _previous_crc(mapped) if linked and mapped is not None else None
        if old_crc is None:
            graph_file.unlink(missing_ok=True)
            frozen.graph.save(graph_file)
            crc[graph_name] = _crc(graph_file)
        else:
            crc[graph_name] = old_crc
    n, b = frozen.rows, len(frozen.base)
    row_files: list[list[object]] = []
    base_name = f"rows-{uuid.uuid4().hex[:12]}.npy"
    base_file = directory / base_name
    linked = (
        frozen.base_file is not None and b > 0 and n - b <= TAIL_FILE_ROWS and link_saved(frozen.base_file, base_file)
    )
    if linked:
        row_files.append([base_name, 0, b])
        if n > b:
            tail_name = f"rows-{uuid.uuid4().hex[:12]}.npy"
            _write_rows(directory / tail_name, [frozen.tail], dimension)
            row_files.append([tail_name, b, n])
    else:
        _write_rows(base_file, [frozen.base, frozen.tail], dimension)
        row_files.append([base_name, 0, n])
    ranges = np.array([(d, s, e) for d, (s, e) in frozen.ranges.items()], dtype=np.int64).reshape(-1, 3)
    for name, array in (
        ("chunk_keys", frozen.chunk_keys),
        ("doc_keys", frozen.doc_keys),
        ("live", frozen.live),
        ("ranges", ranges),
    ):
        np.save(directory / f"{name}.npy", np.ascontiguousarray(array))
        crc[f"{name}.npy"] = _crc(directory / f"{name}.npy")
    manifest = {
        "format": FORMAT,
        "model": model,
        "dimension": dimension,
        "rows": n,
        "live": int(np.count_nonzero(frozen.live)),
        "row_files": row_files,
        "graph_file": graph_name,
        "graph_rows": frozen.graph_rows if graph_name else 0,
        "crc": crc,
        "meta": meta,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for path in directory.iterdir():  # on disk before anyone points at it
        _fsync(path)
    _fsync(directory)
    graph_rows = frozen.graph_rows if graph_name else 0
    return Saved(frozen, base_file, b if linked else n, linked, graph_file, graph_rows)


def manifest(snapshot: Path) -> dict[str, Any] | None:
    """The vectors' manifest in ``snapshot`` (None: it holds no vectors); OSError/ValueError when unreadable."""
    path = snapshot / DIRECTORY / "manifest.json"
    if not path.is_file():
        return None
    found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return found


def load(
    snapshot: Path,
    model: str,
    dimension: int,
    *,
    ann_min_vectors: int = 0,
    absorb_rows: int | None = None,
    graph_threads: int = ann.BUILD_THREADS,
) -> tuple[ExactVectorIndex, dict[str, Any]]:
    """The index saved in ``snapshot`` and its ``meta``; raises SnapshotMismatch (or OSError) when it is missing,
    of another model or dimension, or its parts disagree. The graph is restored only when ``ann_min_vectors``."""
    directory = snapshot / DIRECTORY
    found = manifest(snapshot)
    if found is None:
        raise SnapshotMismatch(f"{snapshot} holds no vectors")
    if found.get("format") != FORMAT:
        raise SnapshotMismatch(f"vectors in {directory} are of another format")
    if found.get("model") != model or found.get("dimension") != dimension:
        raise SnapshotMismatch(
            f"vectors in {directory} were made by {found.get('model')!r} ({found.get('dimension')} dimensions), "
            f"not {model!r} ({dimension})"
        )
    n = int(found["rows"])
    crc: dict[str, int] = found["crc"]
    base, base_file, tail = _rows(directory, found["row_files"], n, dimension)

    def array(name: str, dtype: type) -> np.ndarray:
        path = directory / f"{name}.npy"
        if _crc(path) != crc.get(f"{name}.npy"):
            raise SnapshotMismatch(f"{path} does not match its checksum")
        loaded: np.ndarray = np.load(path, allow_pickle=False)
        if loaded.dtype != dtype or (name != "ranges" and loaded.shape != (n,)):
            raise SnapshotMismatch(f"{path} holds {loaded.shape} {loaded.dtype}, not {n} rows")
        return loaded

    chunk_keys, doc_keys, live = array("chunk_keys", np.int64), array("doc_keys", np.int64), array("live", np.bool_)
    ranges = _ranges(array("ranges", np.int64), doc_keys, live, int(found["live"]))
    graph = None
    if ann_min_vectors and found.get("graph_file") and ann.available():
        graph = _graph(directory, found, crc, base, tail, dimension, n)
    index = ExactVectorIndex.restored(
        dimension,
        model,
        base=base,
        base_file=base_file,
        tail=tail,
        chunk_keys=chunk_keys,
        doc_keys=doc_keys,
        live=live,
        ranges=ranges,
        graph=graph,
        ann_min_vectors=ann_min_vectors,
        graph_threads=graph_threads,
        **({"absorb_rows": absorb_rows} if absorb_rows is not None else {}),
    )
    meta: dict[str, Any] = found.get("meta", {})
    return index, meta


def _rows(directory: Path, files: list[list[Any]], n: int, dimension: int) -> tuple[np.ndarray, Path, np.ndarray]:
    """The base rows (memory-mapped), its file, and the rows past it (read into memory)."""
    if (
        not 1 <= len(files) <= 2
        or files[0][1] != 0
        or files[-1][2] != n
        or (len(files) == 2 and files[0][2] != files[1][1])
    ):
        raise SnapshotMismatch(f"row files in {directory} do not cover its {n} rows: {files}")
    parts = []
    for i, (name, start, end) in enumerate(files):
        path = directory / str(name)
        part = np.load(path, mmap_mode="r" if i == 0 else None, allow_pickle=False)
        if part.dtype != np.float32 or part.shape != (int(end) - int(start), dimension):
            raise SnapshotMismatch(f"{path} holds {part.shape} {part.dtype}, not rows {start}-{end} of {dimension}")
        parts.append(np.asarray(part))
    tail = parts[1] if len(parts) == 2 else np.zeros((0, dimension), dtype=np.float32)
    return parts[0], directory / str(files[0][0]), tail


def _ranges(table: np.ndarray, doc_keys: np.ndarray, live: np.ndarray, live_rows: int) -> dict[int, tuple[int, int]]:
    """Each live document's rows; SnapshotMismatch unless they are exactly the live rows, each its document's."""
    if table.ndim != 2 or table.shape[1] != 3:
        raise SnapshotMismatch(f"ranges of shape {table.shape}")
    if int(np.count_nonzero(live)) != live_rows:
        raise SnapshotMismatch(f"{int(np.count_nonzero(live))} live rows, the manifest says {live_rows}")
    table = table[np.argsort(table[:, 1], kind="stable")]
    docs, starts, ends = table[:, 0], table[:, 1], table[:, 2]
    n = len(doc_keys)
    if len(table) and (
        (starts < 0).any() or (ends > n).any() or (ends <= starts).any() or (starts[1:] < ends[:-1]).any()
    ):
        raise SnapshotMismatch("document ranges overlap or fall outside the rows")
    if int((ends - starts).sum()) != live_rows or len(np.unique(docs)) != len(docs):
        raise SnapshotMismatch("document ranges do not cover the live rows once each")
    lengths = ends - starts
    positions = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
    if not live[positions].all() or not (doc_keys[positions] == np.repeat(docs, lengths)).all():
        raise SnapshotMismatch("document ranges do not match the rows' documents")
    return {int(d): (int(s), int(e)) for d, s, e in table.tolist()}


def _graph(
    directory: Path,
    found: dict[str, Any],
    crc: dict[str, int],
    base: np.ndarray,
    tail: np.ndarray,
    dimension: int,
    n: int,
) -> ann.GraphIndex | None:
    """The saved graph, memory-mapped; None (logged: it is rebuilt) when it fails a check."""
    name, covered = str(found["graph_file"]), int(found["graph_rows"])
    path = directory / name
    try:
        if not 0 < covered <= n:
            raise ValueError(f"it covers {covered} rows of {n}")
        if _crc(path) != crc.get(name):
            raise ValueError("it does not match its checksum")
        graph = ann.GraphIndex.restore(path, dimension, covered)
        sample = np.unique(np.linspace(0, covered - 1, min(SELF_CHECK_ROWS, covered)).astype(np.int64))
        b = len(base)
        found_self = 0
        for p in sample.tolist():
            row = base[p] if p < b else tail[p - b]
            hit = graph.candidates(np.asarray(row, dtype=np.float32), min(10, covered))
            found_self += hit is not None and p in hit[0]
        if found_self < max(1, (3 * len(sample)) // 4):
            raise ValueError(f"only {found_self} of {len(sample)} rows find themselves in it")
    except (OSError, ValueError) as exc:
        log.warning("vector graph in %s not used (%s): rebuilding it in the background", directory, exc)
        return None
    return graph


def _write_rows(path: Path, parts: list[np.ndarray], dimension: int) -> None:
    n = sum(len(p) for p in parts)
    header = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
        "fortran_order": False,
        "shape": (n, dimension),
    }
    with open(path, "wb") as file:
        np.lib.format.write_array_header_1_0(file, header)
        for part in parts:
            for at in range(0, len(part), WRITE_ROWS):
                file.write(np.ascontiguousarray(part[at : at + WRITE_ROWS], dtype=np.float32).data)


def _previous_crc(mapped: Path) -> int | None:
    try:
        found = manifest(mapped.parent.parent)
        value = (found or {}).get("crc", {}).get(mapped.name)
    except (OSError, ValueError):
        return None
    return int(value) if value is not None else None


def _crc(path: Path) -> int:
    value = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 22):
            value = zlib.crc32(chunk, value)
    return value


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
