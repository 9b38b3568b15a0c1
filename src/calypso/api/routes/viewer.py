"""GET /v1/files/{file_id}/view: the passage viewer a citation's link opens (``calypso.viewer``).

``?expires=E&signature=S`` is the signed link's access (the same as ``/content``'s, so its "download the
original" link reuses it); ``chunk`` names the passage, ``quote_start``/``quote_end`` the quote's offsets
in it (code points), ``page`` the page of a paged document (default: the quote's). With an API key instead
of a signature the page still opens, and its links are signed for the caller's workspace.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from calypso.api.auth import current_workspace
from calypso.api.deps import Documents, link_signer
from calypso.viewer.html_page import CSP, render
from calypso.viewer.passage import build_view

router = APIRouter(prefix="/v1/files", tags=["files"])

_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the signed query string must not leak through Referer
    "Cache-Control": "private, no-store",
}

_MAX = 2**62  # SQLite and PostgreSQL integers: a larger number would not be an error of ours but a 500
Offset = Annotated[int | None, Query(ge=0, le=_MAX, description="Code-point offset of the quote in the passage.")]


# HEAD too: link checkers and chat unfurlers send it before (or instead of) GET.
@router.head("/{file_id}/view", include_in_schema=False)  # the GET below, without its body
@router.get("/{file_id}/view", response_class=HTMLResponse)
def view_passage(
    file_id: str,
    request: Request,
    documents: Documents,
    chunk: Annotated[int, Query(ge=0, le=_MAX, description="The passage: its chunk_index.")] = 0,
    quote_start: Offset = None,
    quote_end: Offset = None,
    page: Annotated[int | None, Query(ge=1, le=_MAX, description="The page shown (paged documents).")] = None,
    expires: int | None = None,
    signature: str | None = None,
) -> HTMLResponse:
    """An HTML page: the passage with its quote marked, in its heading context, on its page for a PDF
    (rendered, the quote's region marked), with a link to download the original."""
    if expires is not None or signature is not None:
        document = documents.signed_file(file_id, expires, signature, missing_is_404=True)
        access = f"expires={expires}&signature={signature}"
    else:
        document = documents.get_by_file_id(file_id, current_workspace(request))
        access = link_signer(request).access(document.file_id, document.workspace)
    view = build_view(documents, document, chunk, quote_start, quote_end, page)
    return HTMLResponse(render(view, access), headers=_HEADERS)
