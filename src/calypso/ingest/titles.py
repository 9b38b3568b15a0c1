"""Whether a title from a file's metadata is a real title, or furniture a tool left behind.

PDF and DOCX metadata titles are often the name of the file the document was made from
("10811.exe", "report.doc"), the application ("Microsoft Word - Document1") or a placeholder
("Untitled"). Such a title would name the source in every citation, so it is dropped and the
document is shown by its file name instead.
"""

from __future__ import annotations

import re

from calypso.text.cjk import cjk_chars

# A whole title that is a file name: a stem and a short extension, no spaces.
_FILE_NAME = re.compile(r"^[^\s/\\]+\.[A-Za-z][A-Za-z0-9]{0,4}$")
# Ends in the extension of a document, program or image file ("Microsoft Word - minutes.doc").
_FILE_EXTENSION = re.compile(
    r"\.(?:docx?|dotx?|pdf|exe|dll|tex|dvi|ps|eps|indd|qxd|rtf|txt|html?|xlsx?|pptx?|odt|odp|pages|png|jpe?g|tiff?|bmp)$",
    re.I,
)
# Applications and placeholders that write themselves into the title field.
_APPLICATION = re.compile(
    r"^(?:microsoft\s+(?:word|excel|powerpoint)\b|powerpoint\s+presentation$|untitled\b|document\d*$|"
    r"adobe\s+\w+|acrobat\b|pdfmaker\b|writer$|libreoffice\b|openoffice\b|title$|no\s+title$|slide\s*\d*$|"
    r"print\s*job$|layout\s*\d*$)",
    re.I,
)


def plausible_title(title: str | None) -> str | None:
    """``title`` with its whitespace collapsed when it reads like a document's title, else None."""
    text = " ".join((title or "").split())
    # Empty, or a single token: an id, a code or a file name; but Chinese and Japanese titles are one
    # "token" ("退款政策"), so two CJK characters make a title too.
    if len(text.split()) < 2 and cjk_chars(text) < 2:
        return None
    if _FILE_NAME.match(text) or _FILE_EXTENSION.search(text) or _APPLICATION.match(text):
        return None
    return text
