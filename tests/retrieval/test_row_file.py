"""Float32 rows read from a .npy file by position (retrieval/row_file.py): the rows the file holds, in the
order asked, whether scattered or in runs; a file of other rows refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from calypso.retrieval.row_file import RowFile


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, np.ndarray]:
    rows = np.random.default_rng(0).standard_normal((500, 24)).astype(np.float32)
    path = tmp_path / "rows.npy"
    np.save(path, rows)
    return path, rows


def test_reads_the_rows_asked_for(saved: tuple[Path, np.ndarray]) -> None:
    path, rows = saved
    reader = RowFile(path, *rows.shape)
    scattered = np.array([0, 3, 17, 250, 499])
    runs = np.array([1, 2, 3, 40, 41, 90, 300, 301, 302, 303, 499])
    for positions in (scattered, runs, np.arange(500), np.array([7])):
        assert np.array_equal(reader.read(positions), rows[positions])
    assert reader.read(np.zeros(0, dtype=np.int64)).shape == (0, 24)


def test_reads_on_after_the_file_is_unlinked(saved: tuple[Path, np.ndarray]) -> None:
    path, rows = saved
    reader = RowFile(path, *rows.shape)
    path.unlink()  # an older snapshot removed under a search: the open file stays readable
    assert np.array_equal(reader.read(np.array([5, 6, 400])), rows[[5, 6, 400]])
    reader.close()


def test_a_file_of_other_rows_is_refused(saved: tuple[Path, np.ndarray], tmp_path: Path) -> None:
    path, rows = saved
    with pytest.raises(ValueError, match="not 400 rows"):
        RowFile(path, 400, 24)
    np.save(tmp_path / "half.npy", rows.astype(np.float16))
    with pytest.raises(ValueError, match="float32"):
        RowFile(tmp_path / "half.npy", *rows.shape)


def test_a_read_past_the_end_fails(saved: tuple[Path, np.ndarray]) -> None:
    path, rows = saved
    with pytest.raises(OSError, match="short read"):
        RowFile(path, *rows.shape).read(np.array([499, 500]))
