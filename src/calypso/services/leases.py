"""Ingestion job leases, renewed while their jobs run by one thread per process.

A running job's lease is renewed every third of its length (``Heartbeat``), so it outlives its worker by
at most one lease. One keeper thread renews every running job of the process, started on first use
and left running: a thread of its own per job cost a start and a join per upload (0.14 ms on the
reference machine, against under 2 ms for a whole one-page upload; issue 30).
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType

from calypso.errors import CalypsoError
from calypso.models import IngestJob
from calypso.store.base import JobStore

log = logging.getLogger("calypso.ingest.worker")


class Heartbeat:
    """Keeps a job's lease alive while the ``with`` block runs; ``lost`` is set once the lease is someone else's.

    A renewal in flight when the block ends finishes before ``__exit__`` returns: none starts after it.
    """

    def __init__(self, jobs: JobStore, job: IngestJob, owner: str, lease_seconds: float) -> None:
        self._jobs, self.key, self._owner, self.lease_seconds = jobs, job.document_key, owner, lease_seconds
        self.lost = threading.Event()
        self.due = 0.0  # monotonic time of the next renewal (the keeper's)

    def renew(self) -> bool:
        """One renewal; False once the lease is lost (then ``lost`` is set). A store error is logged and retried."""
        try:
            if not self._jobs.renew(self.key, self._owner, self.lease_seconds):
                self.lost.set()
                return False
        except CalypsoError as exc:  # the database is away: keep trying until the lease runs out
            log.warning("renewing the lease on job %s failed: %s", self.key, exc.message)
        return True

    def __enter__(self) -> Heartbeat:
        _KEEPER.add(self)
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        _KEEPER.remove(self)


class _Keeper:
    """The thread that renews every held ``Heartbeat`` when it is due."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._beats: set[Heartbeat] = set()
        self._renewing: Heartbeat | None = None
        self._thread: threading.Thread | None = None

    def add(self, beat: Heartbeat) -> None:
        with self._cond:
            beat.due = time.monotonic() + beat.lease_seconds / 3
            self._beats.add(beat)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="ingest-lease-keeper", daemon=True)
                self._thread.start()
            else:
                self._cond.notify_all()  # this lease may fall due before the one the keeper sleeps towards

    def remove(self, beat: Heartbeat) -> None:
        with self._cond:
            self._beats.discard(beat)
            while self._renewing is beat:
                self._cond.wait()

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                beat = min(self._beats, key=lambda b: b.due, default=None)
                if beat is None or beat.due > now:
                    self._cond.wait(None if beat is None else beat.due - now)
                    continue
                self._renewing = beat
                self._cond.release()
                try:  # outside the lock: a slow database must not hold up jobs starting and ending
                    kept = beat.renew()
                except Exception:  # a bug must not end every job's renewals with this thread: retried
                    log.exception("renewing the lease on job %s failed", beat.key)
                    kept = True
                finally:
                    self._cond.acquire()
                    self._renewing = None
                    self._cond.notify_all()
                beat.due = time.monotonic() + beat.lease_seconds / 3
                if not kept:
                    self._beats.discard(beat)


_KEEPER = _Keeper()
