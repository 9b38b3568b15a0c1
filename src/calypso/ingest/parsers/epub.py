"""EPUB: an e-book's chapters in reading order, each located by its chapter heading.

``META-INF/container.xml`` names the package document (OPF); its spine gives the reading order and
its table of contents (the EPUB 3 nav document, else the EPUB 2 NCX) the chapter titles. Each
chapter's XHTML goes through the HTML parser (``parsers/html.py``), so an e-book reads like the web
pages the project already parses. Chapter titles become level-1 headings; headings inside a chapter
that the table of contents does not list sit below it.

Page convention: one page (number 1, label "1"); an e-book has no fixed pages, its passages are
located by heading path ("heading" style in ``calypso.locators``).
"""

from __future__ import annotations

import posixpath
import re
import zipfile
import zlib
from dataclasses import dataclass
from io import BytesIO
from urllib.parse import unquote, urldefrag

from lxml import etree

from calypso.errors import UnprocessableDocument
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits
from calypso.ingest.parsers import html
from calypso.ingest.parsers.bombs import check_zip_package
from calypso.models import Heading, Page, ParsedDocument

_CONTAINER = "META-INF/container.xml"
_ENCRYPTION = "META-INF/encryption.xml"
_CHAPTER_TYPES = frozenset(("application/xhtml+xml", "text/html"))
_METADATA = frozenset(("title", "creator", "language", "publisher", "date"))  # Dublin Core elements kept
# Font obfuscation (IDPF, Adobe) is the one encryption that leaves the text readable.
_FONT_OBFUSCATION = frozenset(("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"))
_SEPARATOR = "\n\n"
# No entities resolved, no network, no huge trees: OPF, NCX and nav files are small and trusted by no one.
_XML = etree.XMLParser(resolve_entities=False, no_network=True, recover=True)
# Chapters are rewritten only when they are well-formed: recovering from broken XML can drop text, which
# the HTML parser, reading the original as tag soup, keeps.
_STRICT = etree.XMLParser(resolve_entities=False, no_network=True)
# Markup that web-page extraction takes for page furniture but that e-books use for their own titles
# and text (the imprint's <header> holds its heading, the colophon's <time> its years).
_FURNITURE = {"header": "div", "footer": "div", "nav": "div", "hgroup": "div", "time": "span"}


@dataclass(frozen=True)
class _TocEntry:
    path: str  # the zip member the entry points into
    fragment: str  # "" for the chapter as a whole
    title: str
    depth: int  # 1 = top level


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _unreadable(filename: str, why: str) -> UnprocessableDocument:
    return UnprocessableDocument(
        f"{filename!r} is not a readable EPUB file: {why}. Check that the whole file was uploaded, or export "
        "the book again from its editor (Calibre, Sigil) and upload the new file.",
        param="file",
    )


def _read(zf: zipfile.ZipFile, member: str, filename: str) -> bytes:
    try:
        return zf.read(member)
    except KeyError as exc:
        raise _unreadable(filename, f"it has no {member}") from exc
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError) as exc:
        raise _unreadable(filename, f"{member} is corrupt ({exc})") from exc


def _xml(zf: zipfile.ZipFile, member: str, filename: str) -> etree._Element:
    data = _read(zf, member, filename)
    try:
        root = etree.fromstring(data, _XML)
    except (etree.XMLSyntaxError, ValueError) as exc:
        raise _unreadable(filename, f"{member} is not XML ({exc})") from exc
    if root is None:
        raise _unreadable(filename, f"{member} is empty")
    return root


def _text(node: etree._Element) -> str:
    return " ".join("".join(node.itertext()).split())


def _resolve(base: str, href: str) -> tuple[str, str]:
    """(zip member, fragment) of ``href`` relative to the member ``base``."""
    target, fragment = urldefrag(href)
    if not target:
        return base, fragment
    return posixpath.normpath(posixpath.join(posixpath.dirname(base), unquote(target))), fragment


@dataclass
class _Package:
    spine: list[str]  # chapter members in reading order
    nav: str | None  # the EPUB 3 nav document
    ncx: str | None  # the EPUB 2 table of contents
    title: str | None
    metadata: dict[str, str]


def _package(zf: zipfile.ZipFile, filename: str) -> _Package:
    container = _xml(zf, _CONTAINER, filename)
    rootfile = next((el.get("full-path") for el in container.iter() if _local(el.tag) == "rootfile"), None)
    if not rootfile:
        raise _unreadable(filename, f"{_CONTAINER} names no package document")
    opf = _xml(zf, rootfile, filename)
    manifest: dict[str, tuple[str, str, str]] = {}  # id -> (member, media type, properties)
    spine_ids: list[str] = []
    ncx_id: str | None = None
    meta: dict[str, str] = {}
    for el in opf.iter():
        name = _local(el.tag)
        if name == "item" and el.get("id") and el.get("href"):
            member = _resolve(rootfile, el.get("href", ""))[0]
            manifest[el.get("id", "")] = (member, el.get("media-type", ""), el.get("properties", ""))
        elif name == "spine":
            ncx_id = el.get("toc")
        elif name == "itemref" and el.get("idref"):
            spine_ids.append(el.get("idref", ""))
        elif name in _METADATA and _local(getattr(el.getparent(), "tag", None)) == "metadata":
            value = _text(el)
            key = "author" if name == "creator" else name
            if value and key not in meta:
                meta[key] = value[:512]
    nav = next((m for m, _t, props in manifest.values() if "nav" in props.split()), None)
    ncx = manifest[ncx_id][0] if ncx_id in manifest else None
    if ncx is None:
        ncx = next((m for m, t, _p in manifest.values() if t == "application/x-dtbncx+xml"), None)
    spine: list[str] = []
    seen = {nav}  # the table of contents is no chapter; a chapter listed twice is read once
    for item in spine_ids:
        member, media_type, _props = manifest.get(item, ("", "", ""))
        if media_type in _CHAPTER_TYPES and member not in seen:
            seen.add(member)
            spine.append(member)
    title = meta.pop("title", None)
    return _Package(spine=spine, nav=nav, ncx=ncx, title=title, metadata=meta)


def _nav_entries(zf: zipfile.ZipFile, nav: str, filename: str) -> list[_TocEntry]:
    root = _xml(zf, nav, filename)
    navs = [el for el in root.iter() if _local(el.tag) == "nav"]
    toc = next((n for n in navs if "toc" in (n.get("{http://www.idpf.org/2007/ops}type") or "").split()), None)
    toc = toc if toc is not None else (navs[0] if navs else None)
    entries: list[_TocEntry] = []
    if toc is None:
        return entries
    for anchor in toc.iter():
        if _local(anchor.tag) != "a" or not anchor.get("href"):
            continue
        depth = sum(1 for el in anchor.iterancestors() if _local(el.tag) == "ol" and el is not toc)
        path, fragment = _resolve(nav, anchor.get("href", ""))
        title = _text(anchor)
        if title:
            entries.append(_TocEntry(path, fragment, title, max(depth, 1)))
    return entries


def _ncx_entries(zf: zipfile.ZipFile, ncx: str, filename: str) -> list[_TocEntry]:
    root = _xml(zf, ncx, filename)
    entries: list[_TocEntry] = []
    for point in root.iter():
        if _local(point.tag) != "navPoint":
            continue
        label = next((el for el in point if _local(el.tag) == "navLabel"), None)
        content = next((el for el in point if _local(el.tag) == "content"), None)
        if label is None or content is None or not content.get("src"):
            continue
        depth = sum(1 for el in point.iterancestors() if _local(el.tag) == "navPoint") + 1
        path, fragment = _resolve(ncx, content.get("src", ""))
        title = _text(label)
        if title:
            entries.append(_TocEntry(path, fragment, title, depth))
    return entries


def _toc(zf: zipfile.ZipFile, package: _Package, filename: str) -> list[_TocEntry]:
    """The table of contents: the nav document's, else the NCX's; [] when neither is readable."""
    for member, read in ((package.nav, _nav_entries), (package.ncx, _ncx_entries)):
        if member is None:
            continue
        try:
            entries = read(zf, member, filename)
        except UnprocessableDocument:
            continue  # a broken table of contents loses titles, not the book
        if entries:
            return entries
    return []


def _check_not_encrypted(zf: zipfile.ZipFile, spine: list[str], filename: str) -> None:
    if _ENCRYPTION not in zf.namelist():
        return
    root = _xml(zf, _ENCRYPTION, filename)
    locked: set[str] = set()
    for data in root.iter():
        if _local(data.tag) != "EncryptedData":
            continue
        method = next((el.get("Algorithm", "") for el in data.iter() if _local(el.tag) == "EncryptionMethod"), "")
        uri = next((el.get("URI", "") for el in data.iter() if _local(el.tag) == "CipherReference"), "")
        if method not in _FONT_OBFUSCATION and uri:
            locked.add(posixpath.normpath(unquote(uri)))
    if locked & set(spine):
        raise UnprocessableDocument(
            f"{filename!r} is a DRM-protected e-book: its chapters are encrypted and cannot be read. Upload a "
            "DRM-free copy (the publisher's or the library's DRM-free download).",
            param="file",
        )


def _readable_markup(data: bytes) -> bytes:
    """The chapter with e-book markup that web-page extraction would drop renamed to plain blocks."""
    try:
        root = etree.fromstring(data, _STRICT)
    except (etree.XMLSyntaxError, ValueError):
        return data  # the HTML parser reads tag soup itself
    if root is None:
        return data
    for el in root.iter():
        renamed = _FURNITURE.get(_local(el.tag))
        if renamed is not None:
            namespace = el.tag[: el.tag.index("}") + 1] if el.tag.startswith("{") else ""
            el.tag = namespace + renamed
    out: bytes = etree.tostring(root, encoding="utf-8", xml_declaration=True)
    return out


def _key(title: str) -> str:
    """A title as compared with table of contents entries: letters and digits only, case folded."""
    return re.sub(r"\W+", "", title.casefold().replace("’", "'"))


@dataclass
class _Chapter:
    text: str
    headings: list[Heading]  # offsets into ``text``


def _chapter(body: ParsedDocument, entries: list[_TocEntry], fallback_title: str | None) -> _Chapter:
    """One spine document as a chapter: the headings the table of contents lists at their depth there,
    the others below the listed one above them; a chapter title its text lacks is written above it.

    The chapter title is the table of contents entry for the document as a whole, else (when no entry
    names one of its headings) its first heading, else ``fallback_title``.
    """
    text, parsed = body.text, list(body.headings)
    listed = {_key(e.title): (e.depth, e.title) for e in entries if e.fragment}
    whole = next((e for e in entries if not e.fragment), None)
    headings: list[Heading] = []
    first = parsed[0] if parsed else None
    if whole is not None or not any(_key(h.title) in listed for h in parsed):
        depth = whole.depth if whole is not None else 1
        title = whole.title if whole is not None else (first.title if first is not None else fallback_title)
        if first is not None and _key(first.title) == _key(title or "") and not (whole and text[: first.start].strip()):
            listed[_key(first.title)] = (depth, title or first.title)  # the first heading is the chapter's title
        elif title is not None:
            line = title + _SEPARATOR
            text = line + text
            parsed = [Heading(h.level, h.title, h.start + len(line)) for h in parsed]
            headings.append(Heading(depth, title, 0))
    base_level, base_markdown = (headings[0].level, 0) if headings else (0, 0)
    for heading in parsed:
        entry = listed.get(_key(heading.title))
        if entry is not None:  # titled as the table of contents has it: "To the Hibernia", not "To the *Hibernia*"
            base_level, base_markdown = entry[0], heading.level
            headings.append(Heading(entry[0], entry[1], heading.start))
        else:  # not in the table of contents: below the listed heading above it
            below = max(heading.level - base_markdown, 1) if base_markdown else 1
            headings.append(Heading(base_level + below, heading.title, heading.start))
    return _Chapter(text, headings)


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    check_zip_package(data, filename, limits, kind="EPUB")  # bombs, encrypted members, damaged zips
    try:
        zf = zipfile.ZipFile(BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise _unreadable(filename, f"its zip structure is damaged ({exc})") from exc
    with zf:
        package = _package(zf, filename)
        if not package.spine:
            raise _unreadable(filename, "its package document lists no XHTML chapters in its spine")
        _check_not_encrypted(zf, package.spine, filename)
        toc = _toc(zf, package, filename)
        by_member: dict[str, list[_TocEntry]] = {}
        for entry in toc:
            by_member.setdefault(entry.path, []).append(entry)
        parts: list[str] = []
        headings: list[Heading] = []
        offset = 0
        names = set(zf.namelist())
        for member in package.spine:
            if member not in names:
                continue  # listed but absent: the rest of the book still reads
            raw = _read(zf, member, filename)
            body = html.parse(_readable_markup(raw), member, limits, whole=True)
            if not body.text.strip():
                continue  # a cover or an image page: nothing to read
            own_title = body.title if body.title != package.title else None  # often the book's title on every chapter
            chapter = _chapter(body, by_member.get(member, []), own_title)
            if parts:
                parts.append(_SEPARATOR)
                offset += len(_SEPARATOR)
            parts.append(chapter.text)
            headings.extend(Heading(h.level, h.title, h.start + offset) for h in chapter.headings)
            offset += len(chapter.text)
            limits.check_chars(offset, filename)  # stop as soon as the book is past the limit
    text = "".join(parts)
    return ParsedDocument(
        text=text,
        pages=[Page(number=1, label="1", start=0, end=len(text))],
        headings=headings,
        title=package.title,
        metadata=package.metadata,
    )
