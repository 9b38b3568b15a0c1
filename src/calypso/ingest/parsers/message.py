"""An e-mail message (read from EML or MSG) as one document: header block, body, then its attachments.

The text a model sees starts with the header block ("Subject: … / From: … / To: … / Cc: … / Date: …"),
then the body (text/plain, else the HTML body cleaned by the HTML parser), then each attachment under
an "Attachment: name" line. Attachments are parsed by the ordinary dispatch (``parse_document``): a PDF
attachment by the PDF parser, a .txt as text, a nested message as a message, recursively.

Pages are full locators ("label" style in ``calypso.locators``): the header block and body are the page
"message"; an attachment's pages are "attachment report.pdf, p. 3" (a PDF's pages), "attachment
deck.pptx, slide 2", or "attachment notes.txt" (formats without pages). Headings: the subject (level 1),
each attachment's name below it (level 2), an attachment's own headings below its name.

Bounds (bad input): at most ``max_email_attachments`` attachments are read in all, nested messages'
included; messages nest at most ``MAX_NESTING`` deep; attachments share the document's character, page
and byte limits (each is parsed with what the message has left). An attachment of a type no parser
reads, or one that is empty, corrupt or encrypted, is named in the text as not read; a message past a
limit fails as a whole (413), as any other document does.
"""

from __future__ import annotations

import logging
import mimetypes
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime
from email.message import EmailMessage

from calypso.errors import EmptyDocument, PayloadTooLarge, UnprocessableDocument, UnsupportedMediaType
from calypso.ingest.formats import EML
from calypso.ingest.limits import ParseLimits, too_large
from calypso.locators import locator_style, page_locator
from calypso.models import Heading, Page, ParsedDocument

logger = logging.getLogger(__name__)

MAX_NESTING = 3  # messages inside the uploaded one (a forward of a forward of a forward)
BODY_LABEL = "message"
_SEPARATOR = "\n\n"
_METADATA_CHARS = 512  # OpenAI's bound on a metadata value
_NAME_CHARS = 200


@dataclass
class Attachment:
    """A file attached to a message: its bytes, or (MSG embedded messages) the message itself."""

    name: str
    media_type: str | None = None  # as the message declares it
    data: bytes | None = None
    message: Message | None = None


@dataclass
class Message:
    """What EML and MSG readers hand over: headers as display strings, the body, the attachments."""

    subject: str = ""
    sender: str = ""
    to: str = ""
    cc: str = ""
    date: str = ""  # as the message shows it
    sent: datetime | None = None  # the same, when it parses
    text_body: str | None = None
    html_body: str | None = None
    attachments: list[Attachment] = field(default_factory=list)
    not_read: list[str] = field(default_factory=list)  # what the reader itself skipped, said in the text
    unlisted: int = 0  # attachments past the limit, counted but not even collected


@dataclass
class _Reading:
    """Shared by a message and the messages inside it: how deep we are, how many attachments are left."""

    attachments_left: int
    depth: int = 0


_READING: ContextVar[_Reading | None] = ContextVar("calypso_message_reading", default=None)


def clip(value: str, limit: int = _METADATA_CHARS) -> str:
    """``value`` with whitespace collapsed, cut to ``limit`` characters (an ellipsis says so)."""
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def attachment_name(name: str | None, media_type: str | None, number: int) -> str:
    """A name to show and to dispatch by: the sender's (one line, bounded), else "attachment-N.ext"."""
    shown = clip(name or "", _NAME_CHARS).replace("/", "_").replace("\\", "_")
    if shown:
        return shown
    extension = mimetypes.guess_extension(media_type or "") or ""
    return f"attachment-{number}{extension}"


def header_text(msg: EmailMessage, name: str) -> str:
    """A header as display text (decoded), or its raw text when it does not parse; "" when absent."""
    try:
        value = msg.get(name)
        return clip(str(value)) if value is not None else ""
    except Exception:  # noqa: BLE001 - a malformed header is shown as written, not fatal
        raw = next((v for k, v in msg.raw_items() if k.lower() == name.lower()), "")
        return clip(str(raw))


def sent_at(msg: EmailMessage) -> datetime | None:
    """The Date header as a datetime, or None when it is absent or does not parse."""
    try:
        value = getattr(msg.get("date"), "datetime", None)
        return value if isinstance(value, datetime) else None
    except Exception:  # noqa: BLE001 - an unparseable date stays as text
        return None


def nesting_too_deep(filename: str) -> UnprocessableDocument:
    return UnprocessableDocument(
        f"{filename!r} is a message nested more than {MAX_NESTING} deep in other messages; it is not read.",
        param="file",
        code="nesting_too_deep",
    )


def _header_block(message: Message, names: list[str]) -> str:
    lines = [
        f"{label}: {value}"
        for label, value in (
            ("Subject", message.subject),  # first: its line is where the subject heading starts
            ("From", message.sender),
            ("To", message.to),
            ("Cc", message.cc),
            ("Date", message.date),
        )
        if value
    ]
    if names:
        lines.append("Attachments: " + clip(", ".join(names), 2000))
    return "\n".join(lines)


def _body(message: Message, filename: str, limits: ParseLimits) -> ParsedDocument | None:
    if message.text_body and message.text_body.strip():
        text = "\n".join(line.rstrip() for line in message.text_body.replace("\r\n", "\n").split("\n")).strip("\n")
        return ParsedDocument(text=text, pages=[])
    if message.html_body and message.html_body.strip():
        from calypso.ingest.parsers import html  # trafilatura is slow to import: only for HTML bodies

        # A meta charset: the body is already text, so its bytes are UTF-8 whatever the sender declared.
        data = b'<meta charset="utf-8">' + message.html_body.encode("utf-8", "surrogatepass")
        return html.parse(data, filename, limits)
    return None


@dataclass
class _Part:
    name: str
    parsed: ParsedDocument
    media_type: str


def _read_attachment(attachment: Attachment, limits: ParseLimits, filename: str) -> tuple[ParsedDocument, str] | str:
    """The attachment parsed with ``limits`` (what the message has left), or why it was not read."""
    from calypso.ingest.parsers import detect_and_parse  # an attachment is a document: parsed by the package

    try:
        if attachment.message is not None:
            return to_document(attachment.message, attachment.name, limits), EML
        if not attachment.data:
            return "empty"
        return detect_and_parse(attachment.data, attachment.name, attachment.media_type, limits)
    except PayloadTooLarge as exc:  # the message's own limits: it fails whole, as any document past them
        raise PayloadTooLarge(
            f"{filename!r} is too large with its attachment {attachment.name!r}: {exc.message}",
            param="file",
            code=exc.code,
        ) from exc
    except UnsupportedMediaType:
        return f"{attachment.media_type or 'this type'} is not a supported type"
    except EmptyDocument:
        return "no text in it"
    except UnprocessableDocument as exc:
        if exc.code == "nesting_too_deep":
            return f"a message nested more than {MAX_NESTING} deep"
        return clip(exc.message, 300)


def _attachment_pages(part: _Part, start: int, end: int, shift: int, number: int) -> list[Page]:
    """The pages of an attachment placed at ``start``..``end`` of the message text (its own text at ``shift``)."""
    prefix = f"attachment {part.name}"
    style = locator_style(part.media_type, len(part.parsed.pages))
    pages = part.parsed.pages
    if style == "heading" or not pages:  # a reader finds no pages in it: the attachment is one page
        ocr = any(p.modality == "ocr" for p in pages)
        return [Page(number, prefix, start, end, modality="ocr" if ocr else "text")]
    placed: list[Page] = []
    for index, page in enumerate(pages):
        inner = "" if page.label == BODY_LABEL else page_locator(style, (page.label,))
        placed.append(
            replace(
                page,
                number=number + index,
                label=f"{prefix}, {inner}" if inner else prefix,
                start=start if index == 0 else page.start + shift,
                end=end if index == len(pages) - 1 else page.end + shift,
                words=tuple(replace(w, start=w.start + shift, end=w.end + shift) for w in page.words),
            )
        )
    return placed


class _Builder:
    """The message text with its pages and headings, appended piece by piece."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.pages: list[Page] = []
        self.headings: list[Heading] = []

    def add(self, text: str) -> int:
        """Append ``text`` (after a blank line when something precedes it); its start offset."""
        if self.parts:
            self.parts.append(_SEPARATOR)
            self.length += len(_SEPARATOR)
        start = self.length
        self.parts.append(text)
        self.length += len(text)
        return start

    def close_page(self, start: int, label: str) -> None:
        self.pages.append(Page(len(self.pages) + 1, label, start, self.length))

    def text(self) -> str:
        return "".join(self.parts)


def _remaining(limits: ParseLimits, used_chars: int, used_pages: int, used_bytes: int) -> ParseLimits:
    return replace(
        limits,
        max_document_chars=max(limits.max_document_chars - used_chars, 1),
        max_document_pages=max(limits.max_document_pages - used_pages, 1),
        max_uncompressed_bytes=max(limits.max_uncompressed_bytes - used_bytes, 1),
    )


def _selected(message: Message, reading: _Reading, limit: int) -> list[Attachment]:
    """The attachments to read, within the budget shared with nested messages; the others named as not read."""
    count = max(min(reading.attachments_left, len(message.attachments)), 0)
    reading.attachments_left -= count
    unread = len(message.attachments) - count + message.unlisted
    if unread:
        message.not_read.append(
            f"{unread:,} more attachment{'s' if unread != 1 else ''} (at most {limit:,} are read from one "
            "message, setting CALYPSO_MAX_EMAIL_ATTACHMENTS)"
        )
    return message.attachments[:count]


def to_document(message: Message, filename: str, limits: ParseLimits) -> ParsedDocument:
    """``message`` as a ``ParsedDocument``: header block and body (page "message"), then its attachments."""
    reading = _READING.get()
    token = None
    if reading is None:
        reading = _Reading(attachments_left=limits.max_email_attachments)
        token = _READING.set(reading)
    elif reading.depth > MAX_NESTING:
        raise nesting_too_deep(filename)
    try:
        return _assemble(message, filename, limits, reading)
    finally:
        if token is not None:
            _READING.reset(token)


def _assemble(message: Message, filename: str, limits: ParseLimits, reading: _Reading) -> ParsedDocument:
    body = _body(message, filename, limits)
    used_chars = len(body.text) if body else 0
    limits.check_chars(used_chars, filename)

    parts: list[_Part] = []
    used_pages = used_bytes = 0
    reading.depth += 1
    try:
        for attachment in _selected(message, reading, limits.max_email_attachments):
            used_bytes += len(attachment.data or b"")
            if used_bytes > limits.max_uncompressed_bytes:
                raise too_large(
                    f"{filename!r} has attachments of more than {limits.max_uncompressed_bytes:,} bytes together",
                    limits,
                    "max_uncompressed_bytes",
                    "uncompressed_too_large",
                )
            outcome = _read_attachment(attachment, _remaining(limits, used_chars, used_pages, used_bytes), filename)
            if isinstance(outcome, str):
                message.not_read.append(f"{attachment.name} ({outcome})")
                continue
            parsed, media_type = outcome
            used_chars += len(parsed.text) + len(attachment.name) + 16
            used_pages += len(parsed.pages)
            limits.check_chars(used_chars, filename)
            parts.append(_Part(attachment.name, parsed, media_type))
    finally:
        reading.depth -= 1

    out = _Builder()
    subject = clip(message.subject) if message.subject else ""
    out.add(_header_block(message, [a.name for a in message.attachments]))
    if subject:
        out.headings.append(Heading(1, subject, 0))
    if body is not None and body.text.strip():
        at = out.add(body.text)
        out.headings.extend(Heading(h.level + 1, h.title, h.start + at) for h in body.headings)
    if message.not_read:
        out.add("\n".join(f"Not read: {what}" for what in message.not_read))
    out.close_page(0, BODY_LABEL)
    for part in parts:
        start = out.add(f"Attachment: {part.name}")
        out.headings.append(Heading(2, part.name, start))
        shift = out.add(part.parsed.text) if part.parsed.text else out.length
        out.headings.extend(Heading(h.level + 2, h.title, h.start + shift) for h in part.parsed.headings)
        out.pages.extend(_attachment_pages(part, start, out.length, shift, len(out.pages) + 1))
    text = out.text()
    # Pages cover the text contiguously: each separator belongs to the page before it.
    pages = [replace(p, end=out.pages[i + 1].start) for i, p in enumerate(out.pages[:-1])] + [out.pages[-1]]
    metadata = {
        key: clip(value)
        for key, value in (
            ("from", message.sender),
            ("to", message.to),
            ("cc", message.cc),
            ("date", message.sent.isoformat() if message.sent else message.date),
            ("subject", message.subject),
            ("attachments", ", ".join(a.name for a in message.attachments)),
        )
        if value
    }
    return ParsedDocument(
        text=text,
        pages=pages,
        headings=out.headings,
        title=subject or None,
        metadata=metadata,
        # An attached workbook's blocks or deck's slides stay one passage each (and so every page of the message).
        break_at_pages=any(part.parsed.break_at_pages for part in parts),
    )
