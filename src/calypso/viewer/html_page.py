"""The viewer's HTML: server-rendered, every piece of user content escaped, no script at all.

The page's only style is the inline ``<style>`` below, allowed by its hash in the Content-Security-Policy
(``CSP``); nothing else loads but the page image, a ``data:`` URI. The quote's region on a page image is
an SVG ``<rect>`` over the image: presentation attributes, not style attributes, so the strict policy
needs no ``'unsafe-inline'``.
"""

from __future__ import annotations

import base64
import hashlib
import re
from html import escape

from calypso.ingest.formats import PDF
from calypso.locators import heading_locator
from calypso.viewer.passage import PageView, PassageView

_STYLE = """
:root { --ink: #1d2330; --muted: #5d6675; --line: #dde1e7; --accent: #2754c5; --mark: #ffe27a;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", "Noto Sans CJK SC",
    "Noto Sans SC", "Source Han Sans SC", "PingFang SC", "Hiragino Sans", "Microsoft YaHei", "Noto Sans CJK JP",
    "Yu Gothic", "Noto Sans CJK KR", "Apple SD Gothic Neo", "Malgun Gothic", "WenQuanYi Micro Hei", sans-serif;
  font-size: 16px; line-height: 1.55; color: var(--ink); background: #f5f6f8; }
* { box-sizing: border-box; }
body { margin: 0; }
header { background: #14213d; color: #fff; padding: 0.9rem 1.5rem; }
header .brand { color: #aeb9d6; font-size: 0.85rem; margin: 0 0 0.2rem; }
h1 { font-size: 1.25rem; margin: 0; overflow-wrap: anywhere; }
.where { margin: 0.35rem 0 0; color: #dfe5f3; font-size: 0.95rem; overflow-wrap: anywhere; }
.where .sep { color: #8d9abb; padding: 0 0.3rem; }
main { max-width: 980px; margin: 0 auto; padding: 1rem 1.5rem 3rem; }
.actions { display: flex; flex-wrap: wrap; gap: 0.6rem; align-items: center; margin: 0 0 1rem; }
.actions a { display: inline-block; padding: 0.4rem 0.9rem; border-radius: 8px; border: 1px solid var(--accent);
  color: var(--accent); text-decoration: none; font-weight: 600; font-size: 0.9rem; background: #fff; }
.actions a.primary { background: var(--accent); color: #fff; }
.actions .count { color: var(--muted); font-size: 0.9rem; margin-left: auto; }
section { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 1rem 1.1rem; margin-bottom: 1rem; }
h2 { font-size: 0.85rem; text-transform: uppercase; letter-spacing: 0.06em; color: var(--muted); margin: 0 0 0.6rem; }
h2 .locator { text-transform: none; letter-spacing: 0; color: var(--ink); padding-left: 0.3rem; }
.page-image { display: block; width: 100%; height: auto; border: 1px solid var(--line); background: #fff; }
.page-image.close-up { width: auto; max-width: 100%; max-height: 70vh; margin: 0 auto; }
.quote-box { fill: rgba(255, 213, 0, 0.35); stroke: #d08700; stroke-width: 2; }
.note { color: var(--muted); font-size: 0.9rem; margin: 0.5rem 0 0; }
.breadcrumb { color: var(--muted); font-size: 0.9rem; margin: 0 0 0.6rem; overflow-wrap: anywhere; }
.passage { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0; font-size: 1rem; }
mark { background: var(--mark); color: var(--ink); border-radius: 3px; padding: 0 1px;
  box-shadow: 0 0 0 2px var(--mark); box-decoration-break: clone; -webkit-box-decoration-break: clone; }
.badge { display: inline-block; font-size: 0.75rem; font-weight: 700; padding: 0.05rem 0.5rem; border-radius: 999px;
  background: #fff0d6; color: #a15c00; margin-left: 0.4rem; vertical-align: 0.1em; }
@media (max-width: 600px) { header, main { padding-left: 0.8rem; padding-right: 0.8rem; }
  .actions .count { margin-left: 0; width: 100%; } }
"""

_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()

# No script, no frame, no form; the style above by its hash; images only as data: URIs.
CSP = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; img-src data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)


CLOSE_UP_ZOOM = 1.5


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _rects(page: PageView) -> str:
    return "".join(
        f'<rect class="quote-box" x="{b.x0 * page.width:.1f}" y="{b.y0 * page.height:.1f}" '
        f'width="{(b.x1 - b.x0) * page.width:.1f}" height="{(b.y1 - b.y0) * page.height:.1f}" rx="3" '
        'vector-effect="non-scaling-stroke"></rect>'
        for b in page.boxes
    )


def _close_up(page: PageView) -> str:
    """The quote's region with a margin, drawn from the page image (``<use>``: not sent twice), so a
    phone shows the marked quote legibly above the whole page."""
    left = max(0.0, min(b.x0 for b in page.boxes) - 0.02) * page.width
    right = min(1.0, max(b.x1 for b in page.boxes) + 0.02) * page.width
    top = max(0.0, min(b.y0 for b in page.boxes) - 0.02) * page.height
    bottom = min(1.0, max(b.y1 for b in page.boxes) + 0.02) * page.height
    # At most CLOSE_UP_ZOOM times the page image's own pixels: larger only blurs (the phone's narrower
    # screen shrinks it again through max-width).
    width = (right - left) * CLOSE_UP_ZOOM
    return (
        f'<svg class="page-image close-up" width="{width:.0f}" '
        f'viewBox="{left:.1f} {top:.1f} {right - left:.1f} {bottom - top:.1f}" '
        f'role="img" aria-label="The quote on {_e(page.locator)}"><use href="#page-image"></use>{_rects(page)}</svg>'
    )


def _page_figure(page: PageView) -> str:
    label = f"{page.locator} with the quote marked" if page.boxes else page.locator
    svg = (
        f'<svg class="page-image" viewBox="0 0 {page.width} {page.height}" role="img" aria-label="{_e(label)}">'
        f'<image id="page-image" href="{_e(page.image_uri)}" x="0" y="0" width="{page.width}" '
        f'height="{page.height}"></image>{_rects(page)}</svg>'
    )
    if page.boxes:
        note = "The quote is marked on the page."
        close_up = f'<section aria-label="Quote on the page"><h2>Quote on the page</h2>{_close_up(page)}</section>'
    elif page.quote_on_page:
        note = "The quote could not be placed on the page image; it is marked in the passage text below."
        close_up = ""
    else:
        note = "The quote is not on this page; it is marked in the passage text below."
        close_up = ""
    heading = f'<h2>Page <span class="locator">{_e(page.locator)}</span></h2>'
    return f'{close_up}<section aria-label="Page">{heading}{svg}<p class="note">{_e(note)}</p></section>'


def _reflow(text: str) -> str:
    """PDF text breaks at the end of every printed line: those breaks become spaces, paragraphs stay."""
    return re.sub(r"(?<!\n)\n(?!\n)", " ", text)


def _passage_html(view: PassageView) -> str:
    text = view.chunk.text
    flow = _reflow if view.document.media_type == PDF else str
    if view.quote is None:
        return _e(flow(text))
    start, end = view.quote
    before, quote, after = (_e(flow(part)) for part in (text[:start], text[start:end], text[end:]))
    return f'{before}<mark id="quote">{quote}</mark>{after}'


def render(view: PassageView, access: str) -> str:
    """The whole page; ``access`` is the link's ``expires=…&signature=…`` (for its download and
    neighbour links, relative to ``/v1/files/{file_id}/``)."""
    document, chunk = view.document, view.chunk
    download = f"content?{access}"
    if view.page is not None and document.media_type == PDF:
        download += f"#page={view.page.page.number}"
    where_html = _e(view.page.locator) if view.page else ""  # a heading path stands above the passage
    ocr = '<span class="badge">read by OCR</span>' if chunk.modality == "ocr" else ""

    def neighbour(index: int, label: str) -> str:
        return f'<a href="view?{_e(access)}&amp;chunk={index}" rel="nofollow">{label}</a>'

    actions = [f'<a class="primary" href="{_e(download)}" download="{_e(document.filename)}">Download the original</a>']
    if view.page is not None and document.media_type == PDF:
        actions.append(f'<a href="{_e(download)}" target="_blank" rel="noopener">Open the PDF at this page</a>')
    if chunk.chunk_index > 0:
        actions.append(neighbour(chunk.chunk_index - 1, "← Previous passage"))
    if chunk.chunk_index + 1 < view.chunk_count:
        actions.append(neighbour(chunk.chunk_index + 1, "Next passage →"))
    actions.append(f'<span class="count">Passage {chunk.chunk_index + 1} of {view.chunk_count}</span>')

    breadcrumb = heading_locator(view.heading_path)
    passage_section = (
        '<section aria-label="Passage"><h2>Passage</h2>'
        + (f'<p class="breadcrumb">{_e(breadcrumb)}</p>' if breadcrumb else "")
        + f'<div class="passage">{_passage_html(view)}</div></section>'
    )
    page_section = _page_figure(view.page) if view.page is not None and view.page.image_uri else ""
    title = f"{document.title or document.filename}" + (f" ({view.locator})" if view.locator else "")
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_e(title)} · Calypso</title><style>{_STYLE}</style></head><body>"
        f'<header><p class="brand">Calypso · cited passage</p><h1>{_e(document.filename)}{ocr}</h1>'
        + (f'<p class="where">{where_html}</p>' if where_html else "")
        + "</header><main>"
        f'<nav class="actions" aria-label="Source">{"".join(actions)}</nav>'
        f"{page_section}{passage_section}</main></body></html>"
    )
