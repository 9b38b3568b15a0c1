"""A question in one language over documents in another, with the bundled multilingual model (issue 43)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from calypso.config import Settings
from calypso.embeddings import multilingual_e5
from calypso.scope import RetrievalScope
from calypso.services import open_services
from calypso.services.answering import AskRequest
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload

pytestmark = pytest.mark.skipif(not multilingual_e5.available(), reason="the 'embed' extra is not installed")

# Spanish questions over the English Alps article: (question, what the cited English sentences must hold).
SPANISH = [
    ("¿Qué introdujeron la expansión franca y la expansión bávara?", "feudalism"),
    ("¿En qué año llegó Edward Whymper a la cima del Cervino?", "1865"),  # el Cervino: the Matterhorn
    ("¿Cuántas especies de fauna viven en los Alpes?", "30,000"),
]


def test_a_spanish_question_is_answered_from_the_english_article_and_says_so_in_spanish(
    tmp_path: Path, data_dir: Path
) -> None:
    settings = Settings(home=tmp_path, embedding_model=multilingual_e5.MODEL_NAME, generator="extractive")
    services = open_services(settings)
    try:
        pdf = data_dir / "alps-wiki-qa" / "alps_wiki.pdf"
        services.ingestion.ingest(Upload(pdf.read_bytes(), pdf.name))
        embed_all(services.vectors)
        scope = RetrievalScope(namespaces=(settings.default_namespace,))
        for question, gold in SPANISH:
            request = AskRequest([{"role": "user", "content": question}], scope, generator="extractive")
            answer = asyncio.run(services.answering.answer(request))
            assert answer.text.startswith("Las fuentes lo dicen en inglés. "), answer.text
            assert gold in " ".join(s.text for s in answer.segments if s.citations), answer.text
            statuses = [s.status for s in answer.sentences]
            assert statuses[0] == "not_a_claim" and "supported" in statuses[1:], statuses
    finally:
        services.close()
