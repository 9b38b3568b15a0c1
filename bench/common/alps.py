"""The Alps PDF's questions and an answerer over it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common.paths import data_dir


def alps_questions() -> list[dict[str, object]]:
    """The 39 Alps questions with their gold pages."""
    import json

    path = data_dir() / "alps-wiki-qa" / "alps_qa_with_pdf_pages.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@contextmanager
def alps_answerer(unsupported: str) -> Iterator[object]:
    """An ``Answerer`` over the Alps PDF (namespace "alps") in a temporary knowledge base, behind the fake
    upstream in markerless mode: a sentence of each of five retrieved passages, then ``unsupported``."""
    import tempfile

    from calypso.config import Settings
    from calypso.generation.fake_upstream import FakeUpstream, Script
    from calypso.services import open_services
    from calypso.services.answering import Answerer
    from calypso.services.ingestion import Upload

    pdf = data_dir() / "alps-wiki-qa" / "alps_wiki.pdf"
    with (
        tempfile.TemporaryDirectory() as home,
        FakeUpstream(default=Script.markerless(quote=(1, 2, 3, 4, 5), unsupported=unsupported)) as fake,
    ):
        settings = Settings(home=Path(home), generator="upstream", llm_base_url=fake.base_url, llm_model="fake")
        services = open_services(settings)
        try:
            services.ingestion.ingest(Upload(pdf.read_bytes(), pdf.name, "alps"))
            yield Answerer(services.documents, services.search)
        finally:
            services.close()
