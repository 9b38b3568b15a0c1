"""`calypso sources add|list|sync|remove` on a data directory, in process: a folder added, synced, changed, removed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from calypso.cli import main


def test_sources_commands_keep_a_folder_in_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CALYPSO_SOURCE_ROOTS", str(tmp_path))
    folder = tmp_path / "notes"
    folder.mkdir()
    old = time.time() - 60
    for n in range(3):
        (folder / f"n{n}.txt").write_text(f"The tapir{n} note.")
        os.utime(folder / f"n{n}.txt", (old, old))
    home = ["--home", str(tmp_path / "kb")]

    assert main(["sources", "add", "folder", "--path", str(folder), "--namespace", "notes", *home]) == 0
    added = capsys.readouterr().out
    source_id = added.split()[0]
    assert source_id.startswith("src_") and "3 added" in added

    (folder / "n1.txt").unlink()
    assert main(["sources", "sync", source_id, *home]) == 0
    assert "1 removed, 2 unchanged" in capsys.readouterr().out
    assert main(["sources", "list", *home]) == 0
    assert source_id in capsys.readouterr().out

    assert main(["sources", "add", "folder", "--path", "/etc", *home]) == 1
    assert "CALYPSO_SOURCE_ROOTS" in capsys.readouterr().err
    assert main(["sources", "remove", source_id, *home]) == 0
    assert "removed" in capsys.readouterr().out
    assert main(["sources", "list", *home]) == 0
    assert source_id not in capsys.readouterr().out
