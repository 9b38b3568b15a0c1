"""EPUB: chapters in spine order, each a level-1 heading titled as the table of contents has it, so a passage
is located by its chapter; the real Standard Ebooks file against its ground truth; bombs and broken books."""

from __future__ import annotations

import contextlib
import random
import re
import zipfile
from difflib import SequenceMatcher
from io import BytesIO
from pathlib import Path

import pytest
from tests_support import eval_data_dir

from calypso.errors import CalypsoError, PayloadTooLarge, UnprocessableDocument
from calypso.ingest.chunking import chunk_document
from calypso.ingest.formats import EPUB
from calypso.ingest.parsers import detect_and_parse, detect_media_type
from calypso.locators import locator_style
from calypso.models import ParsedDocument
from testkit.hostile_files import epub_zip_bomb

POEMS = [
    "The Grave of the Slave",
    "The Slave Girl’s Address to Her Mother",
    "Past Joys",
    "Prayer",
    "The Slave",
    "The Farewell",
    "A Mother’s Grief",
    "To the Hibernia",
    "Life",
    "The Separation",
    "My Country",
    "Hours of Childhood",
    "An Appeal to Woman",
    "The Slave Girl’s Farewell",
    "A Prayer",
]


def more() -> Path:
    return eval_data_dir() / "ingestion-docs-more"


@pytest.fixture(scope="module")
def purvis() -> ParsedDocument:
    data = (more() / "epub" / "epub_purvis_poetry.epub").read_bytes()
    parsed, media_type = detect_and_parse(data, "epub_purvis_poetry.epub")
    assert media_type == EPUB
    return parsed


def words(text: str) -> list[str]:
    text = re.sub(r"\]\([^)]*\)", "]", text.replace("’", "'"))  # markdown link targets are no words of the book
    return re.findall(r"\w+(?:'\w+)*", re.sub(r"<!--.*?-->", "", text).lower())


# --- the real book -------------------------------------------------------------------------------


def test_chapters_come_in_reading_order_as_level_one_headings(purvis: ParsedDocument) -> None:
    titles = [h.title for h in purvis.headings]
    assert titles == ["Titlepage", "Imprint", *POEMS, "Colophon", "Uncopyright"]
    assert {h.level for h in purvis.headings} == {1}
    starts = [h.start for h in purvis.headings]
    assert starts == sorted(starts) and starts[0] == 0
    assert purvis.text.index("The cold storms of winter") < purvis.text.index("Father, we lift the suppliant")
    assert len(purvis.pages) == 1 and purvis.pages[0].end == len(purvis.text)


def test_a_passage_is_located_by_its_chapter_heading(purvis: ParsedDocument) -> None:
    chunks = chunk_document(purvis, 800, 120)
    first = next(c for c in chunks if "The cold storms of winter shall chill him no more" in c.text)
    # That passage starts in the imprint, its own heading since issue 42; the poem's line is under the poem's title.
    assert first.heading_path_at(first.text.index("The cold storms of winter")) == ("The Grave of the Slave",)
    inside = next(c for c in chunks if c.text.startswith("The earth for his pillow"))
    assert inside.heading_path == ("The Grave of the Slave",)
    ship = next(c for c in chunks if "O, speed thee! speed thee" in c.text)
    assert ship.heading_path_at(ship.text.index("O, speed thee!")) == ("To the Hibernia",)
    assert locator_style(EPUB, 1) == "heading"


def test_book_title_and_metadata(purvis: ParsedDocument) -> None:
    assert purvis.title == "Poetry"
    assert purvis.metadata["author"] == "Sarah Louisa Forten Purvis"
    assert purvis.metadata["language"] == "en-US"


def test_ground_truth_words_are_found_in_order(purvis: ParsedDocument) -> None:
    truth = words((more() / "groundtruth" / "epub_purvis_poetry.epub.md").read_text(encoding="utf-8"))
    ours = words(purvis.text)
    matched = sum(block.size for block in SequenceMatcher(None, truth, ours, autojunk=False).get_matching_blocks())
    assert (
        matched / len(truth) >= 0.99
    )  # measured 0.997: only the logo's alt text ("The Standard Ebooks logo") is missing
    # Epigraphs and dates that sit in <header> and <time> elements are kept.
    assert "Friend after friend departs" in purvis.text and "between 1831 and 1836" in purvis.text


def test_detected_by_name_and_by_its_mimetype_member() -> None:
    data = (more() / "epub" / "epub_purvis_poetry.epub").read_bytes()
    assert detect_media_type(data, "book.epub") == EPUB
    assert detect_media_type(data, "upload", "application/octet-stream") == EPUB
    assert detect_media_type(data, "upload", "application/epub+zip") == EPUB


# --- generated books -----------------------------------------------------------------------------

CONTAINER = (
    b'<?xml version="1.0"?><container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0">'
    b'<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
    b"</rootfiles></container>"
)


def chapter(body: str, title: str = "Book") -> bytes:
    return (
        '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
        f"<head><title>{title}</title></head><body>{body}</body></html>"
    ).encode()


def opf(spine: list[str], extra_items: str = "", toc: str = "") -> bytes:
    items = "".join(f'<item id="{n}" href="{n}.xhtml" media-type="application/xhtml+xml"/>' for n in sorted(spine))
    refs = "".join(f'<itemref idref="{n}"/>' for n in spine)
    return (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Book</dc:title>'
        "<dc:creator>A. Writer</dc:creator></metadata>"
        f"<manifest>{items}{extra_items}</manifest><spine{toc}>{refs}</spine></package>"
    ).encode()


def epub(members: dict[str, bytes]) -> bytes:
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr("META-INF/container.xml", CONTAINER)
        for name, data in members.items():
            zf.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def parse(data: bytes) -> ParsedDocument:
    parsed, media_type = detect_and_parse(data, "book.epub")
    assert media_type == EPUB
    return parsed


NCX = (
    '<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><navMap>'
    '<navPoint id="a"><navLabel><text>Chapter One: Arrival</text></navLabel><content src="c1.xhtml"/>'
    '<navPoint id="a1"><navLabel><text>The Harbour</text></navLabel><content src="c1.xhtml#harbour"/></navPoint>'
    "</navPoint>"
    '<navPoint id="b"><navLabel><text>Chapter Two: Departure</text></navLabel><content src="c2.xhtml"/></navPoint>'
    "</navMap></ncx>"
)


def test_epub2_ncx_titles_chapters_and_nests_sections() -> None:
    book = epub(
        {
            # The spine, not the manifest (sorted) or the zip order, sets the reading order.
            "OEBPS/content.opf": opf(
                ["c2", "c1"][::-1],
                '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>',
                ' toc="ncx"',
            ),
            "OEBPS/toc.ncx": NCX.encode(),
            "OEBPS/c2.xhtml": chapter("<h1>Chapter Two: Departure</h1><p>They left at dawn with the tide.</p>"),
            "OEBPS/c1.xhtml": chapter(
                "<h1>Chapter One: Arrival</h1><p>The ship came in late that night.</p>"
                '<h2 id="harbour">The Harbour</h2><p>Gulls circled the harbour walls.</p>'
                "<h3>A side note</h3><p>The pier was older than the town itself.</p>"
            ),
        }
    )
    parsed = parse(book)
    assert [(h.level, h.title) for h in parsed.headings] == [
        (1, "Chapter One: Arrival"),
        (2, "The Harbour"),
        (3, "A side note"),
        (1, "Chapter Two: Departure"),
    ]
    assert parsed.text.index("ship came in") < parsed.text.index("left at dawn")
    chunks = chunk_document(parsed, 100, 0)
    gulls = next(c for c in chunks if "Gulls circled" in c.text)
    assert gulls.heading_path == ("Chapter One: Arrival", "The Harbour")
    assert parsed.title == "Book" and parsed.metadata["author"] == "A. Writer"


def test_chapter_without_a_heading_gets_its_toc_title_written_above_it() -> None:
    nav = chapter(
        '<nav xmlns:epub="http://www.idpf.org/2007/ops" epub:type="toc"><ol>'
        '<li><a href="c1.xhtml">Prologue</a></li><li><a href="c2.xhtml">Epilogue</a></li></ol></nav>'
    )
    book = epub(
        {
            "OEBPS/content.opf": opf(
                ["c1", "c2"], '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
            ),
            "OEBPS/nav.xhtml": nav,
            "OEBPS/c1.xhtml": chapter("<p>It began with a letter nobody had expected to receive.</p>"),
            "OEBPS/c2.xhtml": chapter("<p>And so it ended, quietly, with another letter.</p>"),
        }
    )
    parsed = parse(book)
    assert [(h.level, h.title) for h in parsed.headings] == [(1, "Prologue"), (1, "Epilogue")]
    assert parsed.text.startswith("Prologue\n\nIt began with a letter")
    assert "Table of contents" not in parsed.text and parsed.text.count("Epilogue") == 1  # the nav is no chapter


def test_without_any_toc_the_first_heading_names_the_chapter() -> None:
    book = epub(
        {
            "OEBPS/content.opf": opf(["c1", "c2"]),
            "OEBPS/c1.xhtml": chapter("<h2>The First Part</h2><p>Some words of the first part of this book.</p>"),
            "OEBPS/c2.xhtml": chapter("<p>A chapter with no heading at all, only its text.</p>", title="Interlude"),
        }
    )
    parsed = parse(book)
    assert [(h.level, h.title) for h in parsed.headings] == [(1, "The First Part"), (1, "Interlude")]


def test_entities_are_not_resolved() -> None:
    evil = (
        b'<?xml version="1.0"?><!DOCTYPE html [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b'<html xmlns="http://www.w3.org/1999/xhtml"><body><h1>Safe</h1><p>Before &x; after, a sentence.</p></body></html>'
    )
    parsed = parse(epub({"OEBPS/content.opf": opf(["c1"]), "OEBPS/c1.xhtml": evil}))
    assert "root:" not in parsed.text and "a sentence" in parsed.text


# --- bad input -----------------------------------------------------------------------------------


def test_zip_bomb_named_epub_is_refused_before_inflating() -> None:
    bomb = epub_zip_bomb(300)
    assert len(bomb) < 1_000_000
    assert detect_media_type(bomb, "book.epub") == EPUB
    with pytest.raises(PayloadTooLarge) as info:
        detect_and_parse(bomb, "book.epub")
    assert info.value.code == "uncompressed_too_large" and "CALYPSO_MAX_UNCOMPRESSED_BYTES" in info.value.message
    with pytest.raises(UnprocessableDocument) as ratio:
        detect_and_parse(epub_zip_bomb(50), "book.epub")
    assert ratio.value.code == "compression_ratio"


@pytest.mark.parametrize(
    ("members", "says"),
    [
        ({"OEBPS/c1.xhtml": chapter("<p>x</p>")}, "has no OEBPS/content.opf"),
        ({"OEBPS/content.opf": b"<package><unclosed"}, "lists no XHTML chapters"),
    ],
)
def test_broken_books_are_refused_clearly(members: dict[str, bytes], says: str) -> None:
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(epub(members), "book.epub")
    assert "not a readable EPUB file" in info.value.message and says in info.value.message


def test_not_a_zip_named_epub() -> None:
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(b"PK\x03\x04 this is no zip at all" * 10, "book.epub")
    assert "not a readable EPUB file" in info.value.message


def test_drm_protected_book_is_refused() -> None:
    encryption = (
        b'<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
        b'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
        b'<enc:EncryptionMethod Algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc"/>'
        b'<enc:CipherData><enc:CipherReference URI="OEBPS/c1.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>'
    )
    book = epub(
        {
            "OEBPS/content.opf": opf(["c1"]),
            "OEBPS/c1.xhtml": b"\x8f\x02 ciphertext",
            "META-INF/encryption.xml": encryption,
        }
    )
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(book, "book.epub")
    assert info.value.code == "unprocessable_document" and "DRM" in info.value.message


def test_corrupt_member_is_a_clear_error() -> None:
    book = bytearray(
        epub({"OEBPS/content.opf": opf(["c1"]), "OEBPS/c1.xhtml": chapter("<p>" + "words " * 200 + "</p>")})
    )
    at = bytes(book).index(b"OEBPS/c1.xhtml") + len(b"OEBPS/c1.xhtml") + 20  # inside the chapter's deflate data
    book[at] ^= 0xFF
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(bytes(book), "book.epub")
    assert "not a readable EPUB file" in info.value.message


def test_random_damage_never_escapes_as_a_server_error() -> None:
    """Bytes flipped and tails cut at random in the real book: a parse or a CalypsoError, nothing else."""
    real = (more() / "epub" / "epub_purvis_poetry.epub").read_bytes()
    rng = random.Random(23)
    for _ in range(40):
        damaged = bytearray(real)
        for _ in range(rng.choice((1, 5, 20))):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        with contextlib.suppress(CalypsoError):
            detect_and_parse(bytes(damaged[: rng.randrange(len(real) // 2, len(real) + 1)]), "book.epub")


def test_tag_soup_chapter_keeps_its_text() -> None:
    """A chapter that is not well-formed XML (unclosed <p> and <br>) is read as HTML, nothing dropped."""
    soup = b"<html><body><h1>Soup</h1><p>First paragraph<br>still first<p>Second paragraph & more</body></html>"
    parsed = parse(epub({"OEBPS/content.opf": opf(["c1"]), "OEBPS/c1.xhtml": soup}))
    assert "First paragraph" in parsed.text and "Second paragraph & more" in parsed.text
