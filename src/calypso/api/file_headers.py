"""Response headers for serving a user's uploaded file back from Calypso's own origin.

An uploaded or crawled HTML page served inline as ``text/html`` would run its scripts on our origin
for anyone who opens a citation link (stored XSS: API keys in local storage, same-origin requests).
So every user file gets:

* ``X-Content-Type-Options: nosniff``: the browser keeps the declared type, never upgrades text to HTML;
* ``Content-Security-Policy: sandbox`` plus ``default-src 'none'``: the page renders (people can
  read it) but runs no script, submits no form, has an opaque origin and loads nothing from
  elsewhere (no tracking pixels); inline styles and data: images still show;
* ``Referrer-Policy: no-referrer``: a signed link's query string never leaks to another site.

PDFs are the exception: Chrome and Safari refuse to start their PDF viewer in a sandboxed document
(it shows a blank page), and a PDF's own scripts run in the viewer, not on our origin. They get
nosniff and no-referrer, and stay inline so citation links open on the cited page.
"""

from __future__ import annotations

from urllib.parse import quote

# Types shown inline; anything else (DOCX...) is offered as a download.
_INLINE = {"application/pdf", "text/plain", "text/markdown", "text/html", "application/xhtml+xml"}
SANDBOX_POLICY = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def user_file_headers(filename: str, media_type: str) -> dict[str, str]:
    """Headers for a response carrying a user's file; ``media_type`` is the stored (detected) type."""
    base = (media_type or "").split(";", 1)[0].strip().lower()
    disposition = "inline" if base in _INLINE else "attachment"
    headers = {
        "Content-Disposition": f"{disposition}; filename*=UTF-8''{_quote(filename)}",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    if base != "application/pdf":
        headers["Content-Security-Policy"] = SANDBOX_POLICY
    return headers


def _quote(name: str) -> str:
    # Crawled documents are named by URL: keep its last path segment.
    return quote(name.rsplit("/", 1)[-1] or "file", safe="")
