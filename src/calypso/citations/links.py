"""Links a client can open to see a cited source."""

from __future__ import annotations

from calypso.models import Passage


def source_url(passage: Passage, base_url: str = "", page: int | None = None) -> str:
    """The source file's content URL, with ``#page=N`` for PDFs so viewers open the cited page."""
    url = f"{base_url.rstrip('/')}/v1/files/{passage.document.file_id}/content"
    if passage.document.media_type == "application/pdf":
        url += f"#page={page or passage.chunk.page_start}"
    return url
