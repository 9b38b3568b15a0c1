"""HTML: main content (not navigation chrome) as markdown via trafilatura.

Page convention: one page (number 1, label "1") spanning the whole text.
Headings come from the markdown "#" lines trafilatura writes for h1-h6; ``Heading.start``
is the offset of that line. When trafilatura finds no main content the plain text of
<body> is used instead.
"""

from __future__ import annotations

import copy
import logging
import re

import lxml.html
import trafilatura
from lxml import etree

from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits
from calypso.ingest.parsers.crowded_tags import MAX_ATTRIBUTES, strip_crowded_tags
from calypso.ingest.parsers.markdown import atx_headings
from calypso.models import Page, ParsedDocument

logger = logging.getLogger(__name__)

# Inline tags trafilatura leaves in markdown (footnote markers): keep their text, drop the tags.
_INLINE_TAGS = re.compile(r"</?(?:sup|sub)>")
_ESCAPED_BRACKET = re.compile(r"\\([\[\]])")
_BLANK_RUNS = re.compile(r"\n{3,}")


def _tidy(text: str) -> str:
    text = _INLINE_TAGS.sub("", text)
    text = _ESCAPED_BRACKET.sub(r"\1", text)  # "\[1\]" -> "[1]": citation markers read as users saw them
    # Per line rstrip, not re.sub(r"[ \t]+$", re.M): that retries at every space of a run, which is
    # quadratic (a 200 KB <pre> of spaces took minutes).
    text = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    return _BLANK_RUNS.sub("\n\n", text).strip("\n")


def _load(data: bytes) -> etree._Element | None:
    """The page as an lxml tree, or None when there is no markup or text at all."""
    # trafilatura's loader detects the encoding (meta charset, BOM, UTF-8, fallbacks).
    tree = trafilatura.load_html(data)
    if tree is None:
        try:
            tree = lxml.html.fromstring(data)
        except (etree.ParserError, ValueError):  # lxml's "Document is empty": only comments/whitespace
            return None
    return tree


def _title(tree: etree._Element) -> str | None:
    node = tree.find(".//title")
    if node is None:
        node = tree.find(".//{http://www.w3.org/1999/xhtml}title")
    text = " ".join(node.text_content().split()) if node is not None else ""
    return text or None


_BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "header",
    "footer",
    "aside",
    "nav",
    "main",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "tr",
    "table",
    "br",
    "hr",
    "blockquote",
    "pre",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "figcaption",
}


def _body_text(tree: etree._Element) -> str:
    """Fallback: the text of <body> (or the whole page) with block elements on their own lines."""
    etree.strip_elements(tree, "script", "style", "noscript", "template", with_tail=False)
    # Hidden blocks (e.g. the inline-XBRL header of SEC filings) are data, not reading text.
    for hidden in tree.xpath("//*[@hidden or contains(translate(@style, ' ', ''), 'display:none')]"):
        if hidden.getparent() is not None:
            hidden.drop_tree()  # keeps the element's tail text
    body = tree.find(".//body")
    node = body if body is not None else tree
    for el in node.iter():
        if isinstance(el.tag, str):
            if el.tag in _BLOCKS:
                el.tail = "\n" + (el.tail or "")  # text_content() alone runs "<p>a</p><p>b</p>" together
            elif el.tag in ("td", "th"):
                el.tail = " | " + (el.tail or "")
    lines = (" ".join(line.split()).strip(" |") for line in node.text_content().splitlines())
    return "\n".join(line for line in lines if line)


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS, *, whole: bool = False) -> ParsedDocument:
    """``whole``: the page is all content (an e-book chapter), so extraction favours recall over
    leaving out furniture: a short chapter keeps its headings."""
    # Text size is bounded by the upload size; parse_document checks max_document_chars.
    data, dropped = strip_crowded_tags(data)  # before lxml: its attribute check is quadratic per tag
    if dropped:
        logger.info("%r: dropped %d attributes past %d on a tag", filename, dropped, MAX_ATTRIBUTES)
    tree = _load(data)
    if tree is None:  # parse_document turns the empty text into EmptyDocument
        return ParsedDocument(text="", pages=[Page(number=1, label="1", start=0, end=0)])
    title = _title(tree)
    try:
        markdown = trafilatura.extract(
            copy.deepcopy(tree),  # trafilatura prunes the tree it is given; ours stays whole for the fallback
            output_format="markdown",
            include_formatting=True,  # without it headings come out as plain lines
            include_tables=True,
            include_links=False,
            include_images=False,
            include_comments=False,
            with_metadata=False,
            favor_recall=whole,
        )
    except Exception:  # a heuristic extractor failing on odd markup should not lose the page
        logger.warning("trafilatura failed on %r; using the plain <body> text", filename, exc_info=True)
        markdown = None
    text = _tidy(markdown) if markdown else ""
    headings = atx_headings(text) if text else []
    if not text.strip():
        text, headings = _body_text(tree), []
    return ParsedDocument(
        text=text,
        pages=[Page(number=1, label="1", start=0, end=len(text))],
        headings=headings,
        title=title,
    )
