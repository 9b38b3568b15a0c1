"""What PPTX and XLSX share before their libraries open them: refusing what is not an OOXML package.

A password-protected Office file is not a zip at all: Office encrypts the whole package and stores it
in an OLE compound file (``D0 CF 11 E0``, streams "EncryptionInfo" and "EncryptedPackage"); the old
binary .ppt and .xls formats are OLE files too. Both are told apart here and refused with a message
that says what to do, instead of a library's "not a zip file".
"""

from __future__ import annotations

from typing import Literal

from calypso.errors import UnprocessableDocument
from calypso.ingest.limits import ParseLimits
from calypso.ingest.parsers.bombs import check_zip_package

Package = Literal["PPTX", "XLSX"]

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_STREAM = "EncryptedPackage".encode("utf-16-le")  # directory entry names are UTF-16
_OLD_FORMAT = {"PPTX": "PowerPoint 97–2003 (.ppt)", "XLSX": "Excel 97–2003 (.xls)"}
_EDITOR = {"PPTX": "PowerPoint", "XLSX": "Excel"}


def check_package(data: bytes, filename: str, limits: ParseLimits, kind: Package) -> None:
    """Refuse encrypted and legacy binary Office files, then decompression bombs (``bombs.check_zip_package``;
    for XLSX without its element count: cells are counted as the sheets are read, against ``max_sheet_cells``)."""
    if data.startswith(OLE_MAGIC):
        if _ENCRYPTED_STREAM in data:
            raise UnprocessableDocument(
                f"{filename!r} is password-protected: Office encrypted the whole file, so its text cannot be read. "
                f"Open it in {_EDITOR[kind]}, remove the password (File › Info › Protect › Encrypt with Password) "
                "and upload the saved copy.",
                param="file",
                code="password_protected",
            )
        raise UnprocessableDocument(
            f"{filename!r} is in the old binary {_OLD_FORMAT[kind]} format, not {kind}. Open it in "
            f"{_EDITOR[kind]} or LibreOffice, save it as .{kind.lower()} and upload the new file.",
            param="file",
        )
    if not data.startswith(b"PK"):
        raise UnprocessableDocument(
            f"{filename!r} is not a readable {kind} file: it is not a zip package (a {kind} file is one). "
            f"Check that the whole file was uploaded, or re-save it in {_EDITOR[kind]} or LibreOffice.",
            param="file",
        )
    check_zip_package(data, filename, limits, kind)


def unreadable(filename: str, kind: Package) -> UnprocessableDocument:
    """422 for a package its library could not open (truncated, corrupt, another OOXML type)."""
    return UnprocessableDocument(
        f"{filename!r} is not a readable {kind} file: it is corrupt, truncated or another format. Open it in "
        f"{_EDITOR[kind]} or LibreOffice, save it as .{kind.lower()} and upload it again.",
        param="file",
    )
