"""Documents whose passages start under one heading (or page) and quote under the next, for the label tests.

A DOCX built with python-docx: three sections, long enough that the passage carrying the start of "Sick
leave" begins with the end of "Annual leave" (the chunker's overlap). A two-page PDF short enough to be
one passage over both pages, its telescope sentence on page 2.
"""

from __future__ import annotations

import io

from testkit.hostile_files import pdf_from_objects

ANNUAL = [
    "Every employee has twenty-five days of annual leave in each calendar year.",
    "Leave is booked in the staff portal at least two weeks before the first day away.",
    "Up to five unused days may be carried over into the first quarter of the next year.",
    "Managers approve requests in the order they arrive and reply within three working days.",
    "Public holidays do not count against the annual allowance.",
    "Half days can be booked for the morning or the afternoon.",
]
SICK = [
    "Employees who are ill must phone their line manager before nine o'clock on the first morning of absence.",
    "A doctor's note is needed from the fourth day of illness onwards.",
    "Sick pay continues at the full rate for the first six weeks of any absence.",
    "Return-to-work meetings are held on the first day back.",
]
EXPENSES = [
    "Travel expenses are claimed within thirty days with the original receipts attached.",
    "Hotel stays are reimbursed up to one hundred and twenty euros a night.",
]
PAGE_ONE = [
    "The Kestrel Hill observatory opened to visitors in the spring of 1931.",
    "Guided tours start at the main gate every hour from ten in the morning.",
    "The visitor centre has a cafe and a small shop selling star charts.",
]
PAGE_TWO = [
    "The great telescope has a mirror measuring 2.4 metres across.",
    "Its dome turns on rails driven by four electric motors.",
    "Night viewing sessions are held on clear Fridays from October to March.",
]


def handbook_docx() -> bytes:
    """ "Staff handbook" with the sections "Annual leave", "Sick leave" and "Expenses" (Word heading styles)."""
    import docx

    document = docx.Document()
    document.add_heading("Staff handbook", level=1)
    for title, paragraphs in (("Annual leave", ANNUAL), ("Sick leave", SICK), ("Expenses", EXPENSES)):
        document.add_heading(title, level=2)
        for text in paragraphs:
            document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _text_stream(lines: list[str]) -> bytes:
    shown = b" ".join(b"(" + line.encode("latin-1") + b") Tj 0 -16 Td" for line in lines)
    body = b"BT /F1 11 Tf 72 720 Td " + shown + b" ET"
    return b"<< /Length %d >>\nstream\n" % len(body) + body + b"\nendstream"


def observatory_pdf() -> bytes:
    """Two pages of Helvetica text, ``PAGE_ONE`` then ``PAGE_TWO``, without page labels ("1", "2")."""
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R /Resources << /Font << /F1 5 0 R >> >> >>"
    return pdf_from_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
            page % 6,
            page % 7,
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
            _text_stream(PAGE_ONE),
            _text_stream(PAGE_TWO),
        ]
    )
