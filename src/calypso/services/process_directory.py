"""A directory that belongs to one running process: made at start, removed at close, and removed by a later
start when its process died without closing.

On PostgreSQL every API process builds its keyword index from the database and writes it here, then searches
it from these files (``retrieval/bm25.py``, ``settle``): the postings stay in the page cache, which the kernel
can reclaim, instead of the process's own memory (861 MB at 1M passages). Nothing here is ever read by another
process or after a restart: a file beside one process cannot tell which database it describes.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import uuid
from pathlib import Path

log = logging.getLogger("calypso.index")

_OWNER = ".owner"  # locked by the owning process for as long as it lives (the kernel drops the lock at its exit)


class ProcessDirectory:
    """``root/<pid>-<random>``, owned by this process until :meth:`remove`."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        _remove_orphans(root)
        # Made and locked under a dot name, then renamed: a sweeping process never sees it unlocked.
        name = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        making = root / f".{name}"
        making.mkdir()
        self._owner = open(making / _OWNER, "wb")  # noqa: SIM115 - held open (and locked) for the process's life
        fcntl.flock(self._owner.fileno(), fcntl.LOCK_EX)
        self.path = root / name
        os.rename(making, self.path)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self._owner.close()


def _remove_orphans(root: Path) -> None:
    """Remove the directories of processes that are gone (their owner file no longer locked)."""
    for entry in root.iterdir():
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            with open(entry / _OWNER, "rb") as owner:
                fcntl.flock(owner.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(entry, ignore_errors=True)
                log.info("removed %s, left by a process that is gone", entry)
        except BlockingIOError:
            continue  # its process is alive
        except OSError:
            continue  # no owner file: not one of these directories, left alone
