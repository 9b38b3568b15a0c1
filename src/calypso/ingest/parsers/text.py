"""Plain text: decode the bytes sensibly and return one page.

Page convention: one page (number 1, label "1") spanning the whole text.
"""

from __future__ import annotations

import codecs
import re

import charset_normalizer

from calypso.errors import UnprocessableDocument, UnsupportedMediaType
from calypso.ingest.formats import describe_supported
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits
from calypso.models import Page, ParsedDocument
from calypso.text.cjk import cjk_chars as content_cjk_chars

# C0 controls other than tab, newline, form feed and carriage return: plenty of them means binary.
_CONTROL = re.compile(r"[\x01-\x08\x0b\x0e-\x1f\x7f]")
_SAMPLE = 8192
_NEAR_TIE = 0.1  # charset-normalizer's "chaos" (0..1): a guess this close to the best one fits as well
_STRAY_BYTES = 4  # bad UTF-8 sequences always forgiven in a file that is otherwise UTF-8
_DETECT_BYTES = 64 * 1024  # what the charset guess reads: its cost stays bounded on large files


def _reject_binary(filename: str) -> UnsupportedMediaType:
    return UnsupportedMediaType(
        f"{filename!r} looks like binary data, not text. Supported types: {describe_supported()}.",
        param="file",
    )


# Legacy CJK encodings a Chinese, Japanese or Korean text file may be saved in (charset_normalizer's names).
_CJK_ENCODINGS = frozenset(
    (
        "gb18030",
        "gbk",
        "gb2312",
        "hz",
        "big5",
        "big5hkscs",
        "cp950",
        "shift_jis",
        "cp932",
        "euc_jp",
        "iso2022_jp",
        "euc_kr",
        "cp949",
        "johab",
        "iso2022_kr",
    )
)
_CJK_SHARE = 0.5  # of the non-space characters: a CJK decoding is taken only when it reads as CJK text


def _legacy_cjk(data: bytes) -> str | None:
    """``data`` decoded from a legacy CJK encoding (GBK, Big5, Shift-JIS, EUC-KR …) when that is what it is.

    Without this a GBK file became Windows-1252 mojibake ("ÀñÆ·¿¨"), whole but unsearchable. The guess
    (charset_normalizer) is trusted only for a CJK encoding whose text is mostly CJK characters, so a
    Western legacy file still decodes as Windows-1252, as before.
    """
    try:
        import charset_normalizer
    except ImportError:  # pragma: no cover - installed with trafilatura
        return None
    best = charset_normalizer.from_bytes(data[:_DETECT_BYTES]).best()
    if best is None or best.encoding not in _CJK_ENCODINGS:
        return None
    try:
        text = data.decode(best.encoding)
    except (UnicodeDecodeError, LookupError):
        return None
    sample = "".join(text[:_SAMPLE].split())
    if not sample or content_cjk_chars(sample) < _CJK_SHARE * len(sample):
        return None
    return text


def decode_text(data: bytes, filename: str = "file") -> str:
    """Decode text bytes: BOM first, then UTF-8 (a few bad bytes replaced), then a legacy CJK encoding when the
    bytes read as one (GBK, Big5, Shift-JIS, EUC-KR), then the encoding charset-normalizer detects.

    Newlines are normalised to "\\n". Binary data (NUL bytes) raises ``UnsupportedMediaType``;
    bytes that contradict their own BOM raise ``UnprocessableDocument``.
    """
    boms = (
        (codecs.BOM_UTF32_LE, "utf-32"),  # checked before UTF-16: its BOM starts with FF FE
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    )
    text: str | None = None
    for bom, encoding in boms:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
            except UnicodeDecodeError as exc:
                name = encoding.removesuffix("-sig").upper()
                raise UnprocessableDocument(
                    f"{filename!r} starts with a {name} byte-order mark but is not valid {name} "
                    f"(bad bytes at offset {exc.start}). Re-save the file as UTF-8 and upload it again.",
                    param="file",
                ) from exc
            break
    if text is None:
        if b"\x00" in data:
            raise _reject_binary(filename)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = _mostly_utf8(data)
            if text is None:
                text = _legacy_cjk(data)
            if text is None:
                text = _detected(data)
    sample = text[:_SAMPLE]
    if "\x00" in sample or len(_CONTROL.findall(sample)) > max(8, len(sample) // 100):
        raise _reject_binary(filename)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _mostly_utf8(data: bytes) -> str | None:
    """UTF-8 with U+FFFD for its bad bytes, when the rest is UTF-8: one stray byte must not turn every
    "Café" of a file into "CafÃ©" (issue 26). None when the bad bytes are not the exception."""
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - data.count("\ufffd".encode())  # a real U+FFFD in the file is not a fault
    good = sum(1 for c in text if c > "\x7f") - bad  # well-formed multi-byte characters
    return text if good >= bad and bad <= max(_STRAY_BYTES, len(data) // 200) else None


def _detected(data: bytes) -> str:
    """The encoding charset-normalizer finds, Windows-1252 where it fits about as well as the best guess.

    Short Western European text fits several code pages almost equally (a French paragraph came out
    cp1257 at chaos 0.0 beside cp1252 at 0.085); legacy Windows text is by far the most common of
    those, so a near tie goes to cp1252. Cyrillic, Greek, Polish or Shift-JIS text never lists cp1252.
    """
    matches = [m for m in charset_normalizer.from_bytes(data) if not m.encoding.startswith("utf")]
    if matches:
        best = matches[0]
        near = [m for m in matches if m.chaos <= best.chaos + _NEAR_TIE]
        if not any("cp1252" in m.could_be_from_charset for m in near):
            return str(best)
    try:
        return data.decode("cp1252")  # leaves 5 bytes undefined
    except UnicodeDecodeError:
        return data.decode("latin-1")


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    # Text size is bounded by the upload size; parse_document checks max_document_chars.
    text = decode_text(data, filename).strip("\n")
    return ParsedDocument(text=text, pages=[Page(number=1, label="1", start=0, end=len(text))])
