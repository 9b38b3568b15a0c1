"""E-mail (EML, Outlook MSG): header fields in the text and the metadata, the body, attachments parsed and
located "attachment name, p. N", and bad input (hundreds of attachments, nesting loops, limits, garbage)."""

from __future__ import annotations

import base64
import contextlib
import random
import time
from email.message import EmailMessage
from email.policy import default as default_policy

import pytest
from tests_support import eval_data_dir

from calypso.errors import CalypsoError, PayloadTooLarge, UnprocessableDocument
from calypso.ingest.chunking import chunk_document
from calypso.ingest.formats import EML, MSG
from calypso.ingest.limits import ParseLimits
from calypso.ingest.parsers import detect_and_parse, detect_media_type
from calypso.ingest.parsers.message import MAX_NESTING
from calypso.locators import locator_style
from calypso.models import ParsedDocument
from testkit.hostile_files import pdf_from_objects

ATTACHMENT_TEXT = "Hey this is a fake attachment!"


def email_file(name: str) -> bytes:
    return (eval_data_dir() / "ingestion-docs-more" / "email" / name).read_bytes()


def assert_contiguous(parsed: ParsedDocument) -> None:
    pages = parsed.pages
    assert pages[0].start == 0 and pages[-1].end == len(parsed.text)
    for before, after in zip(pages, pages[1:]):
        assert after.start == before.end and after.number == before.number + 1
    for heading in parsed.headings:
        assert heading.start == 0 or parsed.text[heading.start - 1] == "\n"
        assert heading.title in parsed.text[heading.start :].split("\n", 1)[0]


def page_of(parsed: ParsedDocument, needle: str) -> str:
    offset = parsed.text.index(needle)
    return next(p.label for p in parsed.pages if p.start <= offset < p.end)


def pdf(pages: list[str]) -> bytes:
    """A small text PDF, one line of ``pages[i]`` on page i + 1."""
    count = len(pages)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = b" ".join(b"%d 0 R" % (4 + 2 * i) for i in range(count))
    objects.append(b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % count)
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, line in enumerate(pages):
        content = b"BT /F1 12 Tf 72 720 Td (" + line.encode() + b") Tj ET"
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 3 0 R >> >> >>" % (5 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
    return pdf_from_objects(objects)


def message(subject: str = "Quarterly numbers", body: str | None = "See the report attached.") -> EmailMessage:
    msg = EmailMessage(policy=default_policy)
    msg["From"] = "Ann Example <ann@example.org>"
    msg["To"] = "Bob Example <bob@example.org>, carol@example.org"
    msg["Cc"] = "Dan <dan@example.org>"
    msg["Date"] = "Tue, 01 Dec 2026 09:30:00 +0100"
    msg["Subject"] = subject
    if body is not None:
        msg.set_content(body)
    return msg


def parse(msg: EmailMessage | bytes, name: str = "mail.eml", limits: ParseLimits | None = None) -> ParsedDocument:
    data = msg if isinstance(msg, bytes) else msg.as_bytes()
    parsed, media_type = detect_and_parse(data, name, None, limits)
    assert media_type in (EML, MSG)
    assert_contiguous(parsed)
    return parsed


# --- the real files ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fake-email-attachment.eml", "fake-email-attachment.msg"])
def test_real_message_fields_are_in_the_text_and_the_metadata(name: str) -> None:
    parsed = parse(email_file(name), name)
    assert parsed.title == "Fake email with attachment"
    assert parsed.metadata["subject"] == "Fake email with attachment"
    assert parsed.metadata["from"] == "Mallori Harrell <mallori@unstructured.io>"
    assert parsed.metadata["to"] == "Mallori Harrell <mallori@unstructured.io>"
    assert parsed.metadata["date"] == "2022-12-23T12:08:48-06:00"
    assert parsed.metadata["attachments"] == "fake-attachment.txt"
    assert parsed.text.startswith(
        "Subject: Fake email with attachment\n"
        "From: Mallori Harrell <mallori@unstructured.io>\n"
        "To: Mallori Harrell <mallori@unstructured.io>\n"
        "Date: Fri, 23 Dec 2022 12:08:48 -0600\n"
    )
    # The text/plain body, once: its HTML alternative is not added beside it.
    assert "Here's the attachments!" in parsed.text and parsed.text.count("Hello!") == 1
    assert "<div" not in parsed.text
    assert parsed.headings[0].title == "Fake email with attachment" and parsed.headings[0].level == 1


@pytest.mark.parametrize("name", ["fake-email-attachment.eml", "fake-email-attachment.msg"])
def test_real_attachment_is_read_and_located_by_its_name(name: str) -> None:
    parsed = parse(email_file(name), name)
    assert [p.label for p in parsed.pages] == ["message", "attachment fake-attachment.txt"]
    assert page_of(parsed, ATTACHMENT_TEXT) == "attachment fake-attachment.txt"
    assert page_of(parsed, "Here's the attachments!") == "message"
    assert ("Fake email with attachment", "fake-attachment.txt") in {
        chunk.heading_path for chunk in chunk_document(parsed, 60, 0)
    }
    assert any(h.title == "fake-attachment.txt" and h.level == 2 for h in parsed.headings)
    chunk = next(c for c in chunk_document(parsed, 1000, 100) if ATTACHMENT_TEXT in c.text)
    assert "attachment fake-attachment.txt" in chunk.page_labels


def test_real_notification_with_only_a_plain_body() -> None:
    parsed = parse(email_file("email-no-html-content-1.eml"), "email-no-html-content-1.eml")
    assert parsed.title == "[GitHub] Subscribed to 63 nf-core repositories"
    assert parsed.metadata["from"] == "GitHub <email@domain.com>"
    assert parsed.metadata["date"] == "2022-10-10T05:14:09-07:00"
    assert "https://github.com/nf-core/rnaseq/subscription" in parsed.text  # quoted-printable decoded
    assert "=\n" not in parsed.text and "DKIM" not in parsed.text  # no transport headers in the text
    assert [p.label for p in parsed.pages] == ["message"]


def test_types_are_detected_and_located_by_label() -> None:
    assert detect_media_type(b"From: a@b\n\nhi", "mail.eml") == EML
    assert detect_media_type(email_file("fake-email-attachment.msg"), "upload.bin", None) == MSG
    assert locator_style(EML, 1) == locator_style(MSG, 1) == "label"


# --- generated messages --------------------------------------------------------------------------


def test_html_only_body_is_cleaned_by_the_html_parser() -> None:
    msg = message(body=None)
    msg.set_content(
        "<html><body><p>Caf\u00e9 prices went <b>up</b> by 4%.</p><script>var x=1;</script></body></html>",
        subtype="html",
    )
    parsed = parse(msg)
    assert "Café prices went **up** by 4%." in parsed.text or "Café prices went up by 4%." in parsed.text
    assert "<p>" not in parsed.text and "var x" not in parsed.text


def test_plain_part_of_an_alternative_is_preferred() -> None:
    msg = message(body="Plain words here.")
    msg.add_alternative("<p>Html words here.</p>", subtype="html")
    parsed = parse(msg)
    assert "Plain words here." in parsed.text and "Html words" not in parsed.text


def test_header_block_carries_every_recipient() -> None:
    parsed = parse(message())
    assert "To: Bob Example <bob@example.org>, carol@example.org\nCc: Dan <dan@example.org>\n" in parsed.text
    assert parsed.metadata["cc"] == "Dan <dan@example.org>"


def test_pdf_attachment_keeps_its_pages() -> None:
    msg = message()
    msg.add_attachment(
        pdf(["Revenue rose in March.", "Costs fell in April."]), "application", "pdf", filename="report.pdf"
    )
    parsed = parse(msg)
    assert page_of(parsed, "Revenue rose in March.") == "attachment report.pdf, p. 1"
    assert page_of(parsed, "Costs fell in April.") == "attachment report.pdf, p. 2"
    assert [p.label for p in parsed.pages][0] == "message"


def test_nested_message_and_its_attachment_are_located_inside_it() -> None:
    inner = message(subject="Original thread", body="The original question.")
    inner.add_attachment(b"Inner notes body.", "text", "plain", filename="notes.txt")
    outer = message(subject="Fwd: Original thread", body="Forwarding this.")
    outer.add_attachment(inner, filename="original.eml")
    parsed = parse(outer)
    assert page_of(parsed, "The original question.") == "attachment original.eml"
    assert page_of(parsed, "Inner notes body.") == "attachment original.eml, attachment notes.txt"
    assert "Subject: Original thread" in parsed.text


def test_eml_file_attached_as_bytes_is_read_as_a_message() -> None:
    inner = message(subject="Attached as a file", body="Bytes of a message.")
    outer = message()
    outer.add_attachment(inner.as_bytes(), "application", "octet-stream", filename="saved.eml")
    parsed = parse(outer)
    assert page_of(parsed, "Bytes of a message.") == "attachment saved.eml"


def test_unsupported_and_broken_attachments_are_named_not_fatal() -> None:
    msg = message()
    msg.add_attachment(b"PK\x05\x06" + b"\x00" * 18, "application", "zip", filename="archive.zip")
    msg.add_attachment(b"%PDF-1.7\n garbage", "application", "pdf", filename="broken.pdf")
    msg.add_attachment(b"", "text", "plain", filename="empty.txt")
    msg.add_attachment(b"Readable one.", "text", "plain", filename="fine.txt")
    parsed = parse(msg)
    assert page_of(parsed, "Readable one.") == "attachment fine.txt"
    body = parsed.text[: parsed.pages[0].end]
    assert "Not read: archive.zip (application/zip is not a supported type)" in body
    assert "Not read: broken.pdf (" in body and "Not read: empty.txt (" in body
    assert "Attachments: archive.zip, broken.pdf, empty.txt, fine.txt" in body


def test_attachment_text_charset_is_honoured() -> None:
    msg = message()
    msg.add_attachment("Grüße aus Köln".encode("latin-1"), "text", "plain", filename="gruss.txt")
    msg.get_payload()[1].set_param("charset", "iso-8859-1")
    parsed = parse(msg)
    assert "Grüße aus Köln" in parsed.text


# --- bad input -----------------------------------------------------------------------------------


def test_five_hundred_attachments_read_up_to_the_limit_and_say_so() -> None:
    msg = message()
    for i in range(500):
        msg.add_attachment(f"Attachment number {i}.".encode(), "text", "plain", filename=f"a{i}.txt")
    started = time.perf_counter()
    parsed = parse(msg)
    assert time.perf_counter() - started < 10
    labels = [p.label for p in parsed.pages]
    assert len(labels) == 1 + 100 and labels[-1] == "attachment a99.txt"
    assert (
        "Not read: 400 more attachments (at most 100 are read from one message, setting CALYPSO_MAX_EMAIL_ATTACHMENTS)"
        in parsed.text
    )
    assert "Attachment number 100." not in parsed.text
    few = parse(msg, limits=ParseLimits(max_email_attachments=3))
    assert len(few.pages) == 4 and "497 more attachments" in few.text


def test_the_attachment_limit_covers_nested_messages_too() -> None:
    inner = message(subject="Inner")
    for i in range(5):
        inner.add_attachment(b"inner text", "text", "plain", filename=f"in{i}.txt")
    outer = message()
    for _ in range(5):
        outer.add_attachment(inner, filename="inner.eml")
    parsed = parse(outer, limits=ParseLimits(max_email_attachments=8))
    assert len(parsed.pages) <= 1 + 8


def test_deep_nesting_stops_at_the_bound() -> None:
    msg = message(subject="Level 0", body="Body 0.")
    for level in range(1, 40):
        outer = message(subject=f"Level {level}", body=f"Body {level}.")
        outer.add_attachment(msg, filename=f"level{level - 1}.eml")
        msg = outer
    parsed = parse(msg)
    assert "Body 39." in parsed.text and f"Body {39 - MAX_NESTING}." in parsed.text
    assert f"Body {38 - MAX_NESTING}." not in parsed.text
    assert f"nested more than {MAX_NESTING} deep" in parsed.text


def test_an_attachment_loop_of_files_is_bounded() -> None:
    """Messages attached as .eml files (bytes), each inside the next: the same bound, across detect_and_parse."""
    data = message(subject="Core", body="Core body.").as_bytes()
    for level in range(12):
        outer = message(subject=f"Wrap {level}", body=f"Wrap body {level}.")
        outer.add_attachment(data, "application", "octet-stream", filename="again.eml")
        data = outer.as_bytes()
    parsed = parse(data)
    assert "Wrap body 11." in parsed.text and "Core body." not in parsed.text
    assert f"a message nested more than {MAX_NESTING} deep" in parsed.text


def test_deeply_nested_multiparts_fail_clearly_or_stay_bounded() -> None:
    depth = 3000
    head = "".join(f'Content-Type: multipart/mixed; boundary="b{i}"\n\n--b{i}\n' for i in range(depth))
    data = ("From: a@example.org\nSubject: deep\nMIME-Version: 1.0\n" + head + "\ntext\n").encode()
    try:
        parsed = parse(data)
    except UnprocessableDocument as exc:
        assert "too deeply" in exc.message
    else:
        assert len(parsed.text) < 10_000


def test_attachment_characters_count_toward_the_document_limit() -> None:
    msg = message(body="Short body.")
    msg.add_attachment(("word " * 4000).encode(), "text", "plain", filename="long.txt")
    with pytest.raises(PayloadTooLarge) as info:
        parse(msg, limits=ParseLimits(max_document_chars=5000))
    assert info.value.code == "too_many_characters"
    assert "long.txt" in info.value.message and "CALYPSO_MAX_DOCUMENT_CHARS" in info.value.message


def test_attachment_bytes_count_toward_the_uncompressed_limit() -> None:
    msg = message()
    for i in range(3):
        msg.add_attachment(b"x" * 40_000, "application", "octet-stream", filename=f"blob{i}.bin")
    with pytest.raises(PayloadTooLarge) as info:
        parse(msg, limits=ParseLimits(max_uncompressed_bytes=100_000))
    assert info.value.code == "uncompressed_too_large" and "CALYPSO_MAX_UNCOMPRESSED_BYTES" in info.value.message


def test_attachment_pages_count_toward_the_page_limit() -> None:
    msg = message()
    msg.add_attachment(pdf(["one", "two", "three"]), "application", "pdf", filename="a.pdf")
    msg.add_attachment(pdf(["four", "five", "six"]), "application", "pdf", filename="b.pdf")
    with pytest.raises(PayloadTooLarge) as info:
        parse(msg, limits=ParseLimits(max_document_pages=5))
    assert info.value.code == "too_many_pages" and "b.pdf" in info.value.message


def test_garbage_named_eml_is_refused_clearly() -> None:
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(bytes(range(1, 256)) * 20, "junk.eml")
    assert "not an e-mail message" in info.value.message


def test_malformed_mime_is_read_as_far_as_it_goes() -> None:
    """No closing boundary, a broken base64 attachment, an undeclared boundary: what is readable is kept."""
    data = (
        b"From: a@example.org\nSubject: broken\nMIME-Version: 1.0\n"
        b'Content-Type: multipart/mixed; boundary="zz"\n\n--zz\nContent-Type: text/plain\n\nVisible body text.\n'
        b"--zz\nContent-Type: text/plain; name=x.txt\nContent-Disposition: attachment; filename=x.txt\n"
        b"Content-Transfer-Encoding: base64\n\nSGV5!!!broken==base64\n"
    )
    parsed = parse(data)
    assert "Visible body text." in parsed.text
    no_boundary = b"From: a@example.org\nSubject: s\nContent-Type: multipart/mixed\n\nJust text after all.\n"
    assert "Just text after all." in parse(no_boundary).text


def test_corrupt_msg_is_refused_clearly() -> None:
    real = email_file("fake-email-attachment.msg")
    for broken in (
        real[:3000],
        real[:512] + b"\xff" * (len(real) - 512),
        b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600,
    ):
        with pytest.raises(UnprocessableDocument) as info:
            detect_and_parse(broken, "broken.msg")
        assert "Outlook message" in info.value.message


def test_ole_file_that_is_no_message_is_refused() -> None:
    real = email_file("fake-email-attachment.msg")
    renamed = real.replace("__properties_version1.0".encode("utf-16-le"), "__xroperties_version1.0".encode("utf-16-le"))
    with pytest.raises(UnprocessableDocument) as info:
        detect_and_parse(renamed, "old.msg")
    assert "not an Outlook message" in info.value.message


def test_msg_is_parsed_in_the_isolated_child() -> None:
    """The parse child (memory cap, time budget) runs the e-mail parsers as it runs the others."""
    from calypso.ingest.isolation import parse_isolated

    data = email_file("fake-email-attachment.msg")
    parsed, media_type = parse_isolated(data, "m.msg", MSG, timeout=30, memory_bytes=1 << 30, processes=1)
    assert media_type == MSG and ATTACHMENT_TEXT in parsed.text


@pytest.mark.parametrize("name", ["fake-email-attachment.eml", "fake-email-attachment.msg"])
def test_random_damage_never_escapes_as_a_server_error(name: str) -> None:
    """Bytes flipped and tails cut at random in the real messages: a parse or a CalypsoError, nothing else."""
    real = email_file(name)
    rng = random.Random(23)
    for _ in range(300):
        damaged = bytearray(real)
        for _ in range(rng.choice((1, 2, 5, 20))):
            damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        with contextlib.suppress(CalypsoError):
            detect_and_parse(bytes(damaged[: rng.randrange(len(real) // 2, len(real) + 1)]), name)


def test_base64_encoded_message_part_is_decoded() -> None:
    inner = message(subject="Inner b64", body="Secret inner words.").as_bytes()
    data = (
        b'From: a@example.org\nSubject: outer\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="X"\n\n'
        b"--X\nContent-Type: text/plain\n\nOuter body.\n--X\nContent-Type: message/rfc822\n"
        b'Content-Transfer-Encoding: base64\nContent-Disposition: attachment; filename="fwd.eml"\n\n'
        + base64.encodebytes(inner)
        + b"--X--\n"
    )
    parsed = parse(data)
    assert page_of(parsed, "Secret inner words.") == "attachment fwd.eml"
    assert "Subject: Inner b64" in parsed.text


def test_malformed_address_headers_are_shown_as_written() -> None:
    data = b"From: =?utf-8?q?broken <<<@@@>>>\nTo: ,,,;;;<\nSubject: =?bogus-charset?q?Hi?=\nDate: not a date\n\nBody here.\n"
    parsed = parse(data)
    assert "Body here." in parsed.text and "Date: not a date" in parsed.text
    assert parsed.metadata["date"] == "not a date"
