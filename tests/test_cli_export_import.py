"""`calypso export` and `calypso import`, run as real subprocesses: what they print and their exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

DOCS = {
    "hut.md": "# The hut\n\nThe mountain hut opens in June and closes at the end of September.\n",
    "冰川.md": "# 冰川\n\n阿尔卑斯山的冰川在过去一百年中明显退缩。\n",
}


def _calypso(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "CALYPSO_HOME": str(home), "CALYPSO_EMBEDDING_MODEL": "none", **env}
    environ.pop("CALYPSO_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "calypso.cli", *args], capture_output=True, text=True, env=environ, timeout=300
    )


def test_export_then_import_twice_then_refuse_bad_archives(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    source, target = tmp_path / "source", tmp_path / "target"
    assert _calypso("ingest", str(folder), home=source).returncode == 0

    archive = tmp_path / "kb.zip"
    exported = _calypso("export", str(archive), home=source)
    assert exported.returncode == 0, exported.stderr
    assert "exported 2 documents" in exported.stdout and "kb.zip" in exported.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left

    imported = _calypso("import", str(archive), home=target)
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 documents" in imported.stdout
    again = _calypso("import", str(archive), home=target)
    assert again.returncode == 0 and "imported nothing new" in again.stdout and "left as they are" in again.stdout
    found = _calypso("search", "mountain hut", home=target)
    assert found.returncode == 0 and "hut.md" in found.stdout

    truncated = tmp_path / "truncated.zip"
    truncated.write_bytes(archive.read_bytes()[:-200])
    refused = _calypso("import", str(truncated), home=tmp_path / "other")
    assert refused.returncode == 3 and "not a complete Calypso archive" in refused.stderr

    newer = tmp_path / "newer.zip"
    with zipfile.ZipFile(archive) as zin, zipfile.ZipFile(newer, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "manifest.json":
                manifest = json.loads(data)
                manifest.update(format_version=manifest["format_version"] + 1, calypso_version="99.0.0")
                data = json.dumps(manifest).encode()
            zout.writestr(info.filename, data)
    too_new = _calypso("import", str(newer), home=tmp_path / "other")
    assert too_new.returncode == 3 and "Calypso 99.0.0" in too_new.stderr and "Upgrade Calypso" in too_new.stderr

    missing = _calypso("import", str(tmp_path / "nowhere.zip"), home=tmp_path / "other")
    assert missing.returncode == 2 and "No archive at" in missing.stderr


def test_export_of_one_namespace(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "hut.md").write_text(DOCS["hut.md"], encoding="utf-8")
    source = tmp_path / "source"
    assert _calypso("ingest", str(folder), "--namespace", "huts", home=source).returncode == 0
    assert _calypso("ingest", str(folder / "hut.md"), home=source).returncode == 0  # also in "general"
    exported = _calypso("export", str(tmp_path / "huts.zip"), "--namespace", "huts", home=source)
    assert exported.returncode == 0, exported.stderr
    assert "exported 1 documents" in exported.stdout
    bad = _calypso("export", str(tmp_path / "x.zip"), "--namespace", "bad name", home=source)
    assert bad.returncode == 2 and "namespace" in bad.stderr.lower()
