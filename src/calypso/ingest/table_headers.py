"""The header of the Markdown table a passage begins inside, when the header lies above the passage.

A long table is cut across passages between its rows (``chunking._rows_whole`` keeps each row whole), so
the second passage's rows arrive without their column names: "| Zone NA | 12,553 | 2,713 |" means nothing
alone. The passage's text stays an exact slice of the document (quotes are located in it); its table header
travels beside it (``Chunk.table_header``), shown to the model above the passage and to apps in the
search result's attributes.

A table is a run of at least three consecutive ``| … |`` lines (the DOCX, PPTX, HTML and sheet parsers write
rows so); its header is its first line, with the delimiter row (``| --- | :-: |``) when the second line is one.
"""

from __future__ import annotations

import bisect
import re

_TABLE_RUN = re.compile(r"(?:^[ \t]*\|[^\n]*\|[ \t]*(?:\n|\Z))+", re.M)
_DELIMITER = re.compile(r"^[ \t]*\|(?:[ \t]*:?-+:?[ \t]*\|)+[ \t]*$")


class TableHeaders:
    """Where the document's Markdown tables are and their headers, for ``above``."""

    def __init__(self, text: str) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []  # where each table ends
        self.body_starts: list[int] = []  # where its first body row begins
        self.headers: list[str] = []
        if "|" not in text:
            return
        for run in _TABLE_RUN.finditer(text):
            lines = run.group(0).rstrip("\n").split("\n")
            if len(lines) < 3:
                continue
            head = 2 if _DELIMITER.match(lines[1]) else 1
            self.starts.append(run.start())
            self.ends.append(run.end())
            self.body_starts.append(run.start() + sum(len(line) + 1 for line in lines[:head]))
            self.headers.append("\n".join(line.strip() for line in lines[:head]))

    def above(self, offset: int) -> str:
        """The header of the table whose body holds ``offset``; "" when ``offset`` is outside every table's body
        (a passage that starts at or before the header holds it already)."""
        index = bisect.bisect_right(self.starts, offset) - 1
        if index < 0 or not self.body_starts[index] <= offset < self.ends[index]:
            return ""
        return self.headers[index]
