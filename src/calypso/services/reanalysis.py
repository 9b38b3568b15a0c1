"""Re-analyse stored terms written by an older analyzer, online, with progress.

When the keyword analyzer changes (``text.tokenize.ANALYZER_VERSION``), chunks keep the terms
the older one derived. Indexes never trust those (``decode_terms`` returns None and the text is
analysed instead), so search is right from the first start, but every index build pays for the
analysis again. This background thread rewrites the stale terms in key order, ``BATCH`` chunks per
short transaction, logging its progress, until none is left. Several processes over one PostgreSQL
may run it at once: each batch is idempotent, so the worst case is work done twice.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from calypso.errors import CalypsoError
from calypso.store.base import StoredTerms
from calypso.text.tokenize import ANALYZER_VERSION, analyze_many, encode_terms

log = logging.getLogger("calypso.reanalysis")

BATCH = 500
LOG_EVERY_SECONDS = 10.0
RETRY_SECONDS = 30.0  # after a storage error (a full disk, PostgreSQL away): try again later


@dataclass
class Progress:
    """Chunks re-analysed so far of those found stale when the run began."""

    done: int = 0
    total: int = 0
    finished: bool = False


class TermsReanalysis:
    """Rewrites the stale stored terms of ``store``; ``start`` runs it in a daemon thread."""

    def __init__(self, store: StoredTerms, batch: int = BATCH) -> None:
        self.store = store
        self.batch = batch
        self.progress = Progress()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def current(self) -> str:
        """The prefix every up-to-date stored terms value starts with."""
        return f"{ANALYZER_VERSION} "

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run_until_done, name="calypso-reanalysis", daemon=True)
            self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background rewrite (``start``) to end; True when it has (or was never started)."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self._thread is None or not self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self) -> Progress:
        """Re-analyse every stale chunk now (in this thread); returns the progress made."""
        current = self.current
        self.progress = Progress(total=self.store.count_stale_terms(current))
        if self.progress.total:
            log.info(
                "re-analysing the stored terms of %d passages (analyzer %s)", self.progress.total, ANALYZER_VERSION
            )
        after, logged = 0, time.monotonic()
        while not self._stop.is_set():
            stale = self.store.stale_terms(current, after, self.batch)
            if not stale:
                break
            analysed = analyze_many(text for _, text in stale)
            self.store.write_terms(
                [(key, encode_terms(t, language)) for (key, _), (language, t) in zip(stale, analysed, strict=True)]
            )
            after = stale[-1][0]
            self.progress.done += len(stale)
            if time.monotonic() - logged >= LOG_EVERY_SECONDS:
                logged = time.monotonic()
                log.info("re-analysed %d of %d passages", self.progress.done, self.progress.total)
        self.progress.finished = not self._stop.is_set()
        if self.progress.total and self.progress.finished:
            log.info("stored terms are current: %d passages re-analysed", self.progress.done)
        return self.progress

    def _run_until_done(self) -> None:
        while not self._stop.is_set():
            try:
                self.run()
                return
            except CalypsoError as exc:  # the store refused: the terms already stored keep working
                log.warning("re-analysing stored terms paused: %s; retrying in %.0f s", exc, RETRY_SECONDS)
                self._stop.wait(RETRY_SECONDS)
