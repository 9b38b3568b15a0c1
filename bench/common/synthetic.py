"""Synthetic passages and documents for the speed and scale benchmarks."""

from __future__ import annotations

import hashlib
import random
import time
import uuid

from bench.common import beir as be
from calypso.models import Chunk, Document, Page


def synthetic_document(
    number: int, texts: list[str], namespace: str = "general"
) -> tuple[Document, list[Page], list[Chunk], bytes]:
    """One one-page text document holding ``texts`` as its passages, ready for ``add_document``."""
    body, chunks = "", []
    for i, passage in enumerate(texts):
        start = len(body)
        body += passage + "\n\n"
        chunks.append(Chunk(i, passage, start, start + len(passage), 1, 1, ("1",)))
    content = body.encode()
    doc_id = uuid.uuid4()
    doc = Document(
        id=str(doc_id),
        file_id=f"file-{doc_id.hex}",
        workspace="default",
        namespace=namespace,
        filename=f"synthetic-{number:07d}.txt",
        media_type="text/plain",
        bytes=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        created_at=int(time.time()),
        page_count=1,
        chunk_count=len(chunks),
    )
    return doc, [Page(1, "1", 0, len(body))], chunks, content


SEED = 20240531


def synthetic_passages(n: int, seed: int = SEED) -> list[str]:
    """n passages of ~100 words: runs of consecutive SciFact sentences (title first) from
    a random start, continuing into the next abstract, until a random 80-120 word target."""
    sents: list[str] = []
    for _, title, sentences in be.iter_sentences(be.scifact_dir()):
        sents.append(title)
        sents.extend(sentences)
    nwords = [s.count(" ") + 1 for s in sents]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        i, target, words, parts = rng.randrange(len(sents)), rng.randint(80, 120), 0, []
        while words < target:
            parts.append(sents[i])
            words += nwords[i]
            i = (i + 1) % len(sents)
        out.append(" ".join(parts))
    return out
