"""EML (RFC 822 / MIME messages) via the standard library's ``email`` package, ``policy.default``.

Headers are decoded (RFC 2047 words, RFC 2231 file names); the body is the text/plain part, else the
HTML part; every other part is an attachment, a message/rfc822 part a nested message. The document is
built by ``parsers/message.py`` (its docstring has the layout, the locators and the bounds).
"""

from __future__ import annotations

import base64
import binascii
import logging
import quopri
from collections.abc import Iterator
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

from calypso.errors import UnprocessableDocument
from calypso.ingest.formats import EML
from calypso.ingest.limits import DEFAULT_LIMITS, ParseLimits
from calypso.ingest.parsers.message import (
    MAX_NESTING,
    Attachment,
    Message,
    attachment_name,
    header_text,
    sent_at,
    to_document,
)
from calypso.models import ParsedDocument

logger = logging.getLogger(__name__)

_IDENTIFYING = ("from", "to", "subject", "date", "message-id")
_MAX_PART_DEPTH = 20  # multiparts inside multiparts inside one message, walked for attachments


def _text_content(part: EmailMessage) -> str | None:
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):  # an unknown charset: read it as UTF-8, replacing
        payload = part.get_payload(decode=True)
        return payload.decode("utf-8", "replace") if isinstance(payload, bytes) else None
    return content if isinstance(content, str) else None


def _encoded_message(part: EmailMessage, inner: object) -> bytes | None:
    """The bytes of a message/rfc822 part sent base64 or quoted-printable (RFC 2046 forbids it, some
    mailers do it): the parser took the encoded text for a message, so it is decoded here instead."""
    encoding = str(part.get("content-transfer-encoding", "")).strip().lower()
    if not isinstance(inner, EmailMessage) or encoding not in ("base64", "quoted-printable"):
        return None
    raw = inner.as_bytes()
    try:
        return base64.b64decode(raw) if encoding == "base64" else quopri.decodestring(raw)
    except (binascii.Error, ValueError):
        return b""  # undecodable: named as not read (empty)


def _leaves(part: EmailMessage, depth: int = 0) -> Iterator[EmailMessage]:
    """The non-multipart parts under ``part`` (an attachment may be a multipart of its own)."""
    if part.get_content_maintype() != "multipart":
        yield part
    elif depth < _MAX_PART_DEPTH:
        for sub in part.iter_parts():
            if isinstance(sub, EmailMessage):
                yield from _leaves(sub, depth + 1)


def _attachment_parts(msg: EmailMessage) -> Iterator[EmailMessage]:
    if msg.get_content_maintype() != "multipart":
        if msg.get_content_maintype() not in ("text", "multipart"):
            yield msg  # a message whose whole content is one file
        return
    for part in msg.iter_attachments():
        if isinstance(part, EmailMessage):
            yield from _leaves(part)


def read(msg: EmailMessage, limit: int, depth: int = 0) -> Message:
    """``msg`` as a ``Message``: at most ``limit`` attachments collected, nested messages down to ``MAX_NESTING``."""
    message = Message(
        subject=header_text(msg, "subject"),
        sender=header_text(msg, "from"),
        to=header_text(msg, "to"),
        cc=header_text(msg, "cc"),
        date=header_text(msg, "date"),
        sent=sent_at(msg),
    )
    plain = msg.get_body(preferencelist=("plain",))
    if isinstance(plain, EmailMessage):
        message.text_body = _text_content(plain)
    if not (message.text_body or "").strip():
        html = msg.get_body(preferencelist=("html",))
        if isinstance(html, EmailMessage):
            message.html_body = _text_content(html)
    if not message.text_body and not message.html_body and msg.get_content_maintype() == "multipart":
        raw = msg.get_payload()
        if isinstance(raw, str):  # a multipart without a boundary: its content is the text after the headers
            message.text_body = raw
    for part in _attachment_parts(msg):
        if len(message.attachments) >= limit:
            message.unlisted += 1
            continue
        media_type = part.get_content_type()
        try:
            given = part.get_filename()
        except Exception:  # noqa: BLE001 - an undecodable file name gets a made-up one
            given = None
        inner = part.get_payload(0) if media_type == EML and part.is_multipart() else None
        encoded = _encoded_message(part, inner)
        if encoded is not None:  # read from its bytes, as an attached .eml file is
            name = attachment_name(given or "message.eml", media_type, 0)
            message.attachments.append(Attachment(name, media_type, data=encoded))
            continue
        if isinstance(inner, EmailMessage):
            name = attachment_name(given or (header_text(inner, "subject")[:150] or "message") + ".eml", media_type, 0)
            if depth >= MAX_NESTING:
                message.not_read.append(f"{name} (a message nested more than {MAX_NESTING} deep)")
            else:
                message.attachments.append(Attachment(name, media_type, message=read(inner, limit, depth + 1)))
            continue
        name = attachment_name(given, media_type, len(message.attachments) + 1)
        if part.get_content_maintype() == "text" and media_type == "text/plain":
            text = _text_content(part)
            data = text.encode("utf-8") if text is not None else None  # its declared charset applied
        else:
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else None
        message.attachments.append(Attachment(name, media_type, data=data))
    return message


def parse(data: bytes, filename: str, limits: ParseLimits = DEFAULT_LIMITS) -> ParsedDocument:
    try:
        msg = BytesParser(policy=policy.default).parsebytes(data)
    except RecursionError as exc:
        raise UnprocessableDocument(
            f"{filename!r} nests MIME parts too deeply to read; forward the message again from your mail "
            "program, or save its attachments separately.",
            param="file",
        ) from exc
    assert isinstance(msg, EmailMessage)  # policy.default builds EmailMessage objects
    if not any(name in (key.lower() for key in msg) for name in _IDENTIFYING):
        raise UnprocessableDocument(
            f"{filename!r} is not an e-mail message: it has none of the From, To, Subject, Date or Message-ID "
            "headers. Save the message from your mail program (as .eml or Outlook .msg) and upload that file.",
            param="file",
        )
    for defect in msg.defects[:5]:
        logger.info("%r: %s", filename, defect.__class__.__name__)
    return to_document(read(msg, limits.max_email_attachments), filename, limits)
