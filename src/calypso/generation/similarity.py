"""Embedding similarity for the extractive answerer's sentence choice.

``EmbeddingSimilarity(embedder)`` is a ``SentenceSimilarity``: given the question and the
candidate sentences it embeds them in one ``embed`` call (question first) and returns each
sentence's cosine to the question, clipped to [0, 1]. Given the server's embedder (a ``CachedEmbedder``), the
question's vector is the one search already stored under its content hash, and a sentence
seen in an earlier answer costs a cache read, not a model run.

An embedding failure (an embeddings server down, a model that cannot load) never fails the
answer: the call returns None, so the picker scores lexically, one log line says why, and the
model is not asked again for ``retry_after`` seconds (an unreachable server would otherwise
cost every answer its timeout). A model that has not answered after ``timeout`` seconds (a hung
server, a queue of answers on a saturated machine) counts as failed: the embedding runs on a
small pool of its own threads, and the answer goes on without waiting for it.

A question in a language the model does not cover gets no semantic score (None: by words only):
the bundled MiniLM was trained on English, and its cosines between Chinese sentences are noise
that cost the Chinese answers of ``bench/multilingual_answers.py`` 3-4 gold answers in 100. An
embedder declares what it covers (``Embedder.languages``: ISO 639-1 codes; None: any language).

Cosines are read on MiniLM's scale (``embeddings/calibration.py``): the cuts that use them were tuned there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import numpy as np

from calypso.embeddings import calibration
from calypso.embeddings.base import Embedder
from calypso.text import languages as language_detection

log = logging.getLogger("calypso.generation")

RETRY_AFTER_SECONDS = 30.0
# Cold (no sentence cached), 30-70 sentences take 0.1-0.9 s on 2 busy cores (docs/benchmarks/answers.md); beyond
# this the answer is not worth the wait.
TIMEOUT_SECONDS = 3.0
THREADS = 2  # the local model cannot go faster with more on 2 cores; more queue, then time out to lexical


def pairing(asked_in: str, sentence: str) -> calibration.Pairing:
    """Whether ``sentence`` is in the question's language ``asked_in`` ("": unknown), in another, or in another
    script family (Chinese, Japanese or Korean against the rest); a sentence too short to tell counts as in it."""
    if not asked_in:
        return "same"
    written_in = language_detection.detect(sentence, asked_in)
    if written_in == asked_in:
        return "same"
    cjk = language_detection.CJK_LANGUAGES
    return "across_cjk" if (asked_in in cjk) != (written_in in cjk) else "across"


class EmbeddingSimilarity:
    """Cosine of each sentence to the question under ``embedder``; None (lexical only) when it fails."""

    def __init__(
        self, embedder: Embedder, *, retry_after: float = RETRY_AFTER_SECONDS, timeout: float = TIMEOUT_SECONDS
    ) -> None:
        self.embedder = embedder
        self.retry_after = retry_after
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="calypso-sentence-embed")
        self._lock = threading.Lock()
        self._down_until = 0.0  # monotonic time before which the embedder is not asked
        self.failures = 0  # embedding failures so far, for reports and tests
        self.languages = embedder.languages  # what the model declares it covers (None: any language)

    def covers(self, question: str) -> bool:
        """Whether the model covers the question's language (a question too short to tell: yes)."""
        if self.languages is None:
            return True
        return language_detection.detect(question, "") in self.languages | {""}

    def __call__(self, question: str, sentences: Sequence[str]) -> list[float] | None:
        if not sentences or time.monotonic() < self._down_until or not self.covers(question):
            return None
        future = self._pool.submit(self.embedder.embed, [question, *sentences])
        try:
            vectors = future.result(timeout=self.timeout)
        except FutureTimeout:
            future.cancel()  # still queued: never run it; running: its result is dropped
            self._failed(f"the embedding model did not answer within {self.timeout:g} s")
            return None
        except Exception as exc:  # noqa: BLE001 - any failure of the model falls back to lexical, by design
            self._failed(getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}")
            return None
        vectors = np.asarray(vectors, dtype=np.float32)
        # Rows are unit length: a dot product is the cosine; read on the scale the answerer's cuts were tuned on,
        # by the map for two languages where a sentence is not in the question's.
        raw = vectors[1:] @ vectors[0]
        asked_in = language_detection.detect(question, "")
        pairings = [pairing(asked_in, s) for s in sentences]
        cosines = np.clip(calibration.reference_scale(self.embedder.name, raw, pairings), 0.0, 1.0)
        return [float(c) for c in cosines]

    def _failed(self, why: str) -> None:
        with self._lock:
            self.failures += 1
            self._down_until = time.monotonic() + self.retry_after
        log.warning(
            "extractive answer: embedding the sentences failed, choosing them by words only for the next %.0f s: %s",
            self.retry_after,
            why,
        )

    def close(self) -> None:
        """Stop the embedding threads (a call still running finishes in the background)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
