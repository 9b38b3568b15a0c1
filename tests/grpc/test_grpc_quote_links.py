"""xai-sdk over gRPC: a citation's link opens the passage at its quote, titled with the heading above the quote.

xAI's ``InlineCitation`` / ``CollectionsCitation`` have no label field (file id, chunk id, chunk content, score):
what names the place is the link each ``[[n]](url)`` and ``citations`` carry, whose page is titled
"<document> (<heading above the quote>)". The gift-card sentence stands under "Eligibility" while its
passage also holds "How to request a refund"; the DOCX's sick-leave sentence stands under "Sick leave".
"""

from __future__ import annotations

import re
import sys
from html import unescape
from pathlib import Path

import httpx
import pytest
from grpc_support import POLL, Collection, GrpcServer
from xai_sdk.chat import user
from xai_sdk.tools import collections_search

from calypso.generation.fake_upstream import Script

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from quote_label_docs import handbook_docx  # noqa: E402

LINK = re.compile(r"\[\[(\d+)\]\]\(([^)\s]+)\)")
TITLE = re.compile(r"<title>(.*?) · Calypso</title>", re.S)


@pytest.fixture(scope="module")
def with_handbook(grpc_server: GrpcServer, collection: Collection) -> Collection:
    with grpc_server.client() as client:
        client.collections.upload_document(
            collection.id, "staff_handbook.docx", handbook_docx(), wait_for_indexing=True, poll_interval=POLL
        )
    return collection


@pytest.mark.parametrize(
    ("question", "answer", "place", "elsewhere"),
    [
        (
            "Can I return a gift card?",
            "Gift cards are never refundable [Source 1].",
            "Refund Policy 2026 (Refund Policy 2026 › Eligibility)",
            "How to request a refund",
        ),
        (
            "Who must employees phone when they are ill?",
            "Employees who are ill must phone their line manager before nine o'clock [Source 1].",
            "staff_handbook.docx (Staff handbook › Sick leave)",
            "Annual leave",
        ),
    ],
    ids=["gift-card", "docx"],
)
def test_the_citation_link_is_titled_with_the_quotes_heading(
    grpc_server: GrpcServer, with_handbook: Collection, question: str, answer: str, place: str, elsewhere: str
) -> None:
    grpc_server.fake.script(Script.from_text(answer, token_size=4))
    with grpc_server.client() as client:
        chat = client.chat.create(
            model="calypso-rag-agent",
            tools=[collections_search([with_handbook.id], limit=4)],
            include=["inline_citations"],
        )
        chat.append(user(question))
        response = chat.sample()
    links = list(LINK.finditer(response.content))
    assert links and len(response.inline_citations) == len(links), response.content
    for link in links:
        assert link.group(2) in response.citations
        title = TITLE.search(httpx.get(link.group(2)).text)
        assert title and unescape(title.group(1)) == place
        assert elsewhere not in title.group(1)
