"""The bundled demo knowledge base: a few small documents ingested by `calypso serve --demo`."""

from __future__ import annotations

from importlib import resources

from calypso.services.ingestion import IngestionService, Upload


def ingest_demo(ingestion: IngestionService) -> int:
    """Ingest every bundled demo document; return how many were new (identical bytes are skipped)."""
    added = 0
    for item in sorted(resources.files(__package__).iterdir(), key=lambda p: p.name):
        if item.name.endswith((".md", ".txt", ".html")):
            added += ingestion.ingest(Upload(item.read_bytes(), item.name)).created
    return added
