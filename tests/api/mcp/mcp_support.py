"""A knowledge base with the Alps PDF in one workspace, behind a real server with keys, for the MCP tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from tests_support import eval_data_dir

from calypso.services import Services
from calypso.services.ingestion import Upload

ADMIN = "admin-secret-for-mcp-tests"


def alps_pdf() -> Path:
    return eval_data_dir() / "alps-wiki-qa" / "alps_wiki.pdf"


def alps_questions() -> list[dict]:
    path = eval_data_dir() / "alps-wiki-qa" / "alps_qa_with_pdf_pages.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ingest_alps(services: Services, workspace: str = "default") -> str:
    pdf = alps_pdf()
    return services.ingestion.ingest(Upload(pdf.read_bytes(), pdf.name, None, workspace=workspace)).document.id


@dataclass
class Secured:
    url: str
    key_a: str  # workspace "acme": the Alps PDF
    key_b: str  # workspace "globex": nothing
    document_id: str


@asynccontextmanager
async def mcp_client(url: str, key: str | None) -> AsyncIterator[Client]:
    """The official client over streamable HTTP, sending ``key`` as a Bearer key."""
    headers = {"Authorization": f"Bearer {key}"} if key else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
    ):
        yield client
