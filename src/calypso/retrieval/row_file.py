"""Float32 rows of a ``.npy`` matrix read by position with ``pread``: exact rows, and no page stays mapped.

A search reranks its graph candidates from the float32 rows of the index snapshot (``retrieval/vectors.py``).
Gathered from a memory map, each candidate's page fault maps about 64 KB of the file around it (the kernel's
fault-around), and after a few hundred queries every page of the 293 MB rows file at 200k passages is
resident: clean page cache, but VmRSS. Read with one ``pread`` per run of consecutive rows, the rows come
from the page cache into a buffer of their own and nothing stays mapped. Measured at 200k x 384, page cache
warm: 150 of a search's candidate rows 0.20-0.23 ms (~1.6 us a read, as from C: the page-cache lookup, not
the syscall, which costs 0.08 us), against 0.04 ms gathered from a resident map; unmapping the map after
each gather (``madvise(MADV_DONTNEED)``, 1.2 ms) and faulting the rows in again costs more than reading.
"""

from __future__ import annotations

import mmap
import os
import weakref
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np


def npy_layout(path: Path) -> tuple[tuple[int, ...], bool, np.dtype[Any], int]:
    """(shape, Fortran order, dtype, offset of the data) of the ``.npy`` file at ``path``."""
    with open(path, "rb") as file:
        version = np.lib.format.read_magic(file)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(file)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(file)
        return shape, fortran, np.dtype(dtype), file.tell()


def link_saved(source: Path, target: Path) -> bool:
    """Hard-link an earlier snapshot's file into a new one (saved files never change); False when it is gone."""
    try:
        os.link(source, target)
    except OSError:
        return False
    return True


class SliceFile:
    """The flat array saved at ``path`` (a ``.npy`` file), read by slice with ``pread``: a copy from the page
    cache, which the kernel shares between processes and counts in none's RSS (a map's touched pages it does).
    A read of one slice costs a few microseconds plus the copy."""

    def __init__(self, path: Path) -> None:
        shape, fortran, dtype, self.offset = npy_layout(path)
        if fortran or len(shape) != 1:
            raise ValueError(f"{path} holds a {shape} array, not a flat one")
        self.path, self.dtype, self.length = path, dtype, int(shape[0])
        fd = self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self._closer = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        self._closer()

    def read(self, start: int, stop: int) -> np.ndarray:
        """Items [start, stop) as a new array."""
        out = np.empty(stop - start, self.dtype)
        view, at = out.view(np.uint8).data, self.offset + start * self.dtype.itemsize
        while view:
            got = os.preadv(self._fd, [view], at)
            if got <= 0:
                raise OSError(f"{self.path}: short read at byte {at}")
            view, at = view[got:], at + got
        return out


class RowFile:
    """Rows ``[0, rows)`` of the float32 ``(rows, dimension)`` matrix saved at ``path``.

    The file is opened once and read by offset (``pread`` moves no shared position, so searches on several
    threads read at once); it stays readable when the path is unlinked, as a memory map would.
    """

    def __init__(self, path: Path, rows: int, dimension: int) -> None:
        shape, fortran, dtype, offset = npy_layout(path)
        if dtype != np.float32 or fortran or shape != (rows, dimension):
            raise ValueError(f"{path} holds {shape} {dtype}, not {rows} rows of {dimension} float32")
        self.path, self.rows, self.dimension = path, rows, dimension
        self._offset = offset
        self._row_bytes = 4 * dimension
        fd = os.open(path, os.O_RDONLY)
        self._fd = fd
        self._read_row = partial(os.pread, fd, self._row_bytes)
        self._closer = weakref.finalize(self, os.close, fd)

    def read(self, positions: np.ndarray) -> np.ndarray:
        """The rows at ``positions`` (ascending, each below ``rows``), as a new ``(len, dimension)`` array."""
        positions = np.asarray(positions, dtype=np.int64)
        if not len(positions):
            return np.zeros((0, self.dimension), dtype=np.float32)
        breaks = np.flatnonzero(np.diff(positions) != 1) + 1
        if len(breaks) == len(positions) - 1:  # no two consecutive: one fixed-size read a row (the usual case)
            data = b"".join(map(self._read_row, (positions * self._row_bytes + self._offset).tolist()))
        else:  # runs of consecutive rows (a document's): one read a run
            starts = positions[np.concatenate(([0], breaks))]
            lengths = np.diff(np.concatenate(([0], breaks, [len(positions)])))
            data = b"".join(
                map(
                    os.pread,
                    [self._fd] * len(starts),
                    (lengths * self._row_bytes).tolist(),
                    (starts * self._row_bytes + self._offset).tolist(),
                )
            )
        if len(data) != len(positions) * self._row_bytes:
            raise OSError(f"{self.path}: short read ({len(data)} of {len(positions) * self._row_bytes} bytes)")
        return np.frombuffer(data, dtype=np.float32).reshape(len(positions), self.dimension)

    def close(self) -> None:
        self._closer()


def release_pages(rows: np.ndarray) -> bool:
    """Unmap the pages a memory map holding ``rows`` has mapped (``madvise(MADV_DONTNEED)``: they stay in the
    page cache, and a later access maps them again), after a pass over every row; False when ``rows`` is not
    memory-mapped. 1.2 ms for the 293 MB of rows at 200k passages."""
    array: object = rows
    while isinstance(array, np.ndarray) and not isinstance(array, np.memmap):
        array = array.base
    mapping = getattr(array, "_mmap", None)  # numpy keeps the mmap object of a memmap there
    if not isinstance(mapping, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return False
    mapping.madvise(mmap.MADV_DONTNEED)
    return True
