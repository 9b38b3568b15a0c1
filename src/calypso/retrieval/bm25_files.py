"""A BM25 index on disk: the files ``BM25Index.save`` writes into a directory and ``BM25Index.load`` maps.

A directory holds the row tables (``row_key``, ``row_len``, ``row_live``, ``df``, ``docs``: ``.npy``), the
vocabulary (``vocab.txt``, one term a line in term id order), each saved segment's arrays (``seg{i}.*.npy``,
``bm25_segments.py``) and ``manifest.json`` (format, analyzer version, k1/b, counts, where each segment's rows
start, the sampled languages and the caller's ``meta``). A segment read from an earlier save's files is
hard-linked from them (they never change) where it can be; the segments held in memory are written as one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calypso.retrieval.bm25_segments import PostingFiles, _Segment, write_merged
from calypso.retrieval.row_file import link_saved
from calypso.text.tokenize import ANALYZER_VERSION

_FILE_POSTINGS_MIN = 1 << 16  # a saved segment with fewer postings is loaded into memory, not read from its files
_FILE_FORMAT = 1  # of save/load; bump when the layout of the files changes

# What ``save`` wrote: one group of segments a saved segment, in order (more than one: merged on the way).
Saved = tuple[tuple[_Segment, ...], ...]


def saved_groups(segs: Sequence[_Segment], merge_ratio: int) -> Saved:
    """How ``segs`` are saved: each segment read from files alone, then the run written as one segment (the newest
    ones, held in memory, and the saved ones before them while each is under ``merge_ratio`` times the run so far)."""
    start = len(segs)
    while start and segs[start - 1].files is None:
        start -= 1
    if start < len(segs):  # else nothing new: every segment is linked
        size = sum(s.n_postings for s in segs[start:])
        while start and segs[start - 1].n_postings < merge_ratio * size:
            start -= 1
            size += segs[start].n_postings
    return tuple((seg,) for seg in segs[:start]) + ((tuple(segs[start:]),) if start < len(segs) else ())


def write(
    directory: Path, tables: dict[str, NDArray[Any]], groups: Saved, vocab: list[str], manifest: dict[str, Any]
) -> None:
    """Write an index into ``directory`` (created; files in it are replaced) and fsync every file: the row
    ``tables``, the segments as ``groups`` says, the ``vocab`` in term id order, and ``manifest`` after the
    format and analyzer version."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, array in tables.items():
        np.save(directory / f"{name}.npy", array)
    for i, group in enumerate(groups):
        for name in _Segment._ARRAYS:
            (directory / f"seg{i}.{name}.npy").unlink(missing_ok=True)
        if len(group) > 1:
            write_merged(group, directory / f"seg{i}")
            continue
        seg = group[0]
        for name in _Segment._ARRAYS:
            target = directory / f"seg{i}.{name}.npy"
            if seg.files is None or not link_saved(seg.files.path(name), target):
                np.save(target, getattr(seg, name))
    (directory / "vocab.txt").write_text("\n".join(vocab), encoding="utf-8")
    manifest = {"format": _FILE_FORMAT, "analyzer": ANALYZER_VERSION, **manifest}
    (directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for path in directory.iterdir():  # on disk before anyone points at it
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest ``write`` wrote (with the caller's ``meta``); OSError/ValueError when unreadable."""
    manifest: dict[str, Any] = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    return manifest


def check_version(directory: Path, manifest: dict[str, Any]) -> None:
    """ValueError when the files come from another format or analyzer version (build afresh then)."""
    if manifest.get("format") != _FILE_FORMAT or manifest.get("analyzer") != ANALYZER_VERSION:
        raise ValueError(f"index files in {directory} are of another format or analyzer version")


def read_array(directory: Path, name: str) -> NDArray[Any]:
    """One of the row tables, in memory."""
    return np.asarray(np.load(directory / f"{name}.npy", allow_pickle=False))


def read_vocab(directory: Path) -> list[str]:
    """The terms in term id order."""
    vocab_text = (directory / "vocab.txt").read_text(encoding="utf-8")
    return vocab_text.split("\n") if vocab_text else []


def open_segment(directory: Path, i: int, row_start: int) -> _Segment:
    """Segment ``i`` of a saved index, its arrays mapped and its postings read from the files; a small one is read
    into memory whole (it costs under 0.7 MB, and keeps no files open: a namespace's large segments hold three)."""
    files = PostingFiles(directory / f"seg{i}")
    if files.n_postings < _FILE_POSTINGS_MIN:
        files.close()
        fields = {name: np.load(files.path(name), allow_pickle=False) for name in _Segment._ARRAYS}
        return _Segment(row_start, **fields)
    # Plain ndarrays over the mappings: every slice of an ``np.memmap`` builds another memmap
    # (``__array_finalize__``), about 80 slices and 0.2 ms a search at 200k passages.
    fields = {
        name: np.asarray(np.load(files.path(name), mmap_mode="r", allow_pickle=False)) for name in _Segment._ARRAYS
    }
    return _Segment(row_start, files=files, **fields)
