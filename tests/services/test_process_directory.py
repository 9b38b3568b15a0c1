"""A directory owned by one running process (services/process_directory.py): removed at close, and by a later
start when its process died; never while its process lives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from calypso.services.process_directory import ProcessDirectory

HOLD = """
import sys, time
from pathlib import Path
from calypso.services.process_directory import ProcessDirectory
own = ProcessDirectory(Path(sys.argv[1]))
(own.path / "postings.npy").write_bytes(b"x")
print(own.path, flush=True)
time.sleep(60)
"""


def test_a_live_owner_keeps_its_directory_and_a_dead_one_loses_it(tmp_path: Path) -> None:
    root = tmp_path / "own"
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        theirs = Path(child.stdout.readline().strip())
        mine = ProcessDirectory(root)  # the other process lives: its directory stays
        assert theirs.is_dir() and (theirs / "postings.npy").is_file() and mine.path.is_dir()
        assert mine.path != theirs and mine.path.name.startswith(f"{os.getpid()}-")
    finally:
        child.send_signal(signal.SIGKILL)  # dies without closing
        child.wait()
    later = ProcessDirectory(root)
    assert not theirs.exists() and mine.path.is_dir()  # the dead one's is swept, a live one's never
    stranger = root / "not-ours"
    stranger.mkdir()
    later.remove()
    mine.remove()
    assert sorted(p.name for p in root.iterdir()) == ["not-ours"]  # left alone: no owner file
