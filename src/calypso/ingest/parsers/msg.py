"""Outlook MSG (an OLE compound file of MAPI properties, [MS-OXMSG]) via ``olefile``.

Read here: subject, sender, To and Cc recipients, the sent date, the plain-text body (else the HTML
body), the attachments (by value, and embedded messages as nested messages). Each property is a
stream ``__substg1.0_IIIITTTT`` (property id, type); fixed-size ones (dates, numbers) sit in the
``__properties_version1.0`` stream of their storage. A body stored only as compressed RTF is not
read (Outlook writes a plain-text body beside it). The document is built by ``parsers/message.py``.
"""

from __future__ import annotations

import codecs
import datetime as dt
import struct
from email.parser import HeaderParser
from email.policy import default as default_policy
from email.utils import format_datetime
from io import BytesIO

import olefile

from calypso.errors import UnprocessableDocument
from calypso.ingest.formats import MSG
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits
from calypso.ingest.parsers.message import (
    MAX_NESTING,
    Attachment,
    Message,
    attachment_name,
    clip,
    header_text,
    sent_at,
    to_document,
)
from calypso.models import ParsedDocument

_UNICODE, _STRING8, _BINARY, _LONG, _SYSTIME, _OBJECT = 0x001F, 0x001E, 0x0102, 0x0003, 0x0040, 0x000D
_SUBJECT, _HEADERS, _BODY, _HTML = 0x0037, 0x007D, 0x1000, 0x1013
_SENDER_NAME, _SENDER_EMAIL, _SENDER_SMTP = 0x0C1A, 0x0C1F, 0x5D01
_REPRESENTING_NAME, _REPRESENTING_EMAIL = 0x0042, 0x0065
_DISPLAY_TO, _DISPLAY_CC = 0x0E04, 0x0E03
_SUBMIT_TIME, _DELIVERY_TIME = 0x0039, 0x0E06
_INTERNET_CPID, _MESSAGE_CODEPAGE = 0x3FDE, 0x3FFD
_RECIPIENT_TYPE, _DISPLAY_NAME, _EMAIL_ADDRESS, _SMTP_ADDRESS = 0x0C15, 0x3001, 0x3003, 0x39FE
_ATTACH_DATA, _ATTACH_FILENAME, _ATTACH_LONG_FILENAME, _ATTACH_METHOD, _ATTACH_MIME = (
    0x3701,
    0x3704,
    0x3707,
    0x3705,
    0x370E,
)
_ATTACH_HIDDEN = 0x7FFE
_EMBEDDED_MESSAGE = 5  # PR_ATTACH_METHOD of a message attached as a message
_TO, _CC = 1, 2
_PROPERTIES = "__properties_version1.0"
_ROOT_HEADER, _EMBEDDED_HEADER, _CHILD_HEADER = 32, 24, 8  # bytes before the property entries
_FILETIME_EPOCH = dt.datetime(1601, 1, 1, tzinfo=dt.UTC)
_MAX_ITEMS = 10_000  # recipients or attachments storages listed per message


class _Storage:
    """One storage of the file (the message, a recipient, an attachment): its string, binary and fixed properties."""

    def __init__(self, ole: olefile.OleFileIO, path: list[str], header: int, codepage: str = "cp1252") -> None:
        self.ole, self.path, self.codepage = ole, path, codepage
        self.fixed: dict[int, bytes] = {}
        stream = [*path, _PROPERTIES]
        if ole.exists("/".join(stream)):
            raw = ole.openstream(stream).read()
            for at in range(header, len(raw) - 15, 16):
                tag = struct.unpack_from("<I", raw, at)[0]
                self.fixed[tag] = raw[at + 8 : at + 16]

    def _stream(self, prop: int, kind: int) -> bytes | None:
        name = [*self.path, f"__substg1.0_{prop:04X}{kind:04X}"]
        if not self.ole.exists("/".join(name)) or self.ole.get_type(name) != olefile.STGTY_STREAM:
            return None
        data: bytes = self.ole.openstream(name).read()
        return data

    def string(self, prop: int) -> str:
        data = self._stream(prop, _UNICODE)
        if data is not None:
            return data.decode("utf-16-le", "replace").rstrip("\x00")
        data = self._stream(prop, _STRING8)
        return data.decode(self.codepage, "replace").rstrip("\x00") if data is not None else ""

    def binary(self, prop: int) -> bytes | None:
        return self._stream(prop, _BINARY)

    def long(self, prop: int) -> int | None:
        value = self.fixed.get(prop << 16 | _LONG)
        return struct.unpack_from("<i", value)[0] if value is not None else None

    def time(self, prop: int) -> dt.datetime | None:
        value = self.fixed.get(prop << 16 | _SYSTIME)
        if value is None:
            return None
        ticks = struct.unpack_from("<Q", value)[0]  # 100 ns since 1601
        try:
            return _FILETIME_EPOCH + dt.timedelta(seconds=ticks // 10_000_000)
        except OverflowError:
            return None

    def children(self, prefix: str) -> list[list[str]]:
        """The sub-storages named ``prefix``#… directly inside this one, in order."""
        found = [
            entry
            for entry in self.ole.listdir(streams=False, storages=True)
            if len(entry) == len(self.path) + 1
            and entry[: len(self.path)] == self.path
            and entry[-1].startswith(prefix)
        ]
        return sorted(found)[:_MAX_ITEMS]


def _codepage(storage: _Storage) -> str:
    for prop in (_INTERNET_CPID, _MESSAGE_CODEPAGE):
        number = storage.long(prop)
        if number:
            name = {65001: "utf-8", 20127: "ascii", 28591: "latin-1"}.get(number, f"cp{number}")
            try:
                return codecs.lookup(name).name
            except LookupError:
                continue
    return "cp1252"


def _address(name: str, email: str) -> str:
    email = email if "@" in email else ""  # Exchange's "/O=ORG/OU=…" addresses mean nothing to a reader
    if name and email and email not in name:
        return f"{name} <{email}>"
    return name or email


def _recipients(storage: _Storage) -> dict[int, list[str]]:
    kinds: dict[int, list[str]] = {}
    for path in storage.children("__recip_version1.0_#"):
        recipient = _Storage(storage.ole, path, _CHILD_HEADER, storage.codepage)
        shown = _address(
            recipient.string(_DISPLAY_NAME), recipient.string(_SMTP_ADDRESS) or recipient.string(_EMAIL_ADDRESS)
        )
        if shown:
            kinds.setdefault(recipient.long(_RECIPIENT_TYPE) or _TO, []).append(shown)
    return kinds


def _read(ole: olefile.OleFileIO, path: list[str], header: int, limit: int, depth: int) -> Message:
    storage = _Storage(ole, path, header)
    storage.codepage = _codepage(storage)
    headers = HeaderParser(policy=default_policy).parsestr(storage.string(_HEADERS) or "\n")
    recipients = _recipients(storage)
    # The internet Date header where the message came by mail; else when Outlook sent or received it.
    sent = sent_at(headers) or storage.time(_SUBMIT_TIME) or storage.time(_DELIVERY_TIME)
    date = header_text(headers, "date") or (format_datetime(sent) if sent else "")
    sender = _address(
        storage.string(_SENDER_NAME) or storage.string(_REPRESENTING_NAME),
        storage.string(_SENDER_SMTP) or storage.string(_SENDER_EMAIL) or storage.string(_REPRESENTING_EMAIL),
    )
    message = Message(
        subject=clip(storage.string(_SUBJECT) or header_text(headers, "subject")),
        sender=clip(sender or header_text(headers, "from")),
        to=clip(", ".join(recipients.get(_TO, [])) or storage.string(_DISPLAY_TO) or header_text(headers, "to")),
        cc=clip(", ".join(recipients.get(_CC, [])) or storage.string(_DISPLAY_CC) or header_text(headers, "cc")),
        date=clip(date),
        sent=sent,
        text_body=storage.string(_BODY) or None,
    )
    if not (message.text_body or "").strip():
        html = storage.binary(_HTML)
        message.html_body = html.decode(storage.codepage, "replace") if html else storage.string(_HTML) or None
    for number, attachment_path in enumerate(storage.children("__attach_version1.0_#"), 1):
        if len(message.attachments) >= limit:
            message.unlisted += 1
            continue
        part = _Storage(ole, attachment_path, _CHILD_HEADER, storage.codepage)
        media_type = part.string(_ATTACH_MIME) or None
        name = attachment_name(
            part.string(_ATTACH_LONG_FILENAME) or part.string(_ATTACH_FILENAME) or part.string(_DISPLAY_NAME),
            media_type,
            number,
        )
        embedded = [*attachment_path, f"__substg1.0_{_ATTACH_DATA:04X}{_OBJECT:04X}"]
        if part.long(_ATTACH_METHOD) == _EMBEDDED_MESSAGE and ole.exists("/".join(embedded)):
            if depth >= MAX_NESTING:
                message.not_read.append(f"{name} (a message nested more than {MAX_NESTING} deep)")
                continue
            inner = _read(ole, embedded, _EMBEDDED_HEADER, limit, depth + 1)
            shown = name if name.endswith((".msg", ".eml")) else f"{clip(inner.subject or name, 150)}.msg"
            message.attachments.append(Attachment(shown, MSG, message=inner))
            continue
        if part.fixed.get(_ATTACH_HIDDEN << 16 | 0x000B, b"\x00")[:1] == b"\x01":
            continue  # an inline image of the HTML body, not a file the sender attached
        message.attachments.append(Attachment(name, media_type, data=part.binary(_ATTACH_DATA)))
    return message


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    try:
        ole = olefile.OleFileIO(BytesIO(data))
    except (OSError, ValueError, struct.error, IndexError, KeyError, TypeError) as exc:
        raise _unreadable(filename, exc) from exc
    try:
        if not ole.exists(_PROPERTIES):
            raise UnprocessableDocument(
                f"{filename!r} is an OLE file but not an Outlook message (no MAPI properties): maybe an old "
                "Word or Excel file. Save it in a current format, or save the e-mail from Outlook as .msg.",
                param="file",
            )
        try:
            message = _read(ole, [], _ROOT_HEADER, limits.max_email_attachments, 0)
        except (OSError, ValueError, struct.error, IndexError, KeyError, TypeError, RecursionError) as exc:
            raise _unreadable(filename, exc) from exc
    finally:
        ole.close()
    return to_document(message, filename, limits)


def _unreadable(filename: str, exc: BaseException) -> UnprocessableDocument:
    return UnprocessableDocument(
        f"{filename!r} is not a readable Outlook message: its OLE structure is damaged ({clip(str(exc), 200)}). "
        "Check that the whole file was uploaded, or save the e-mail from Outlook again.",
        param="file",
    )
