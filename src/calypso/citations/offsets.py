"""Map offsets in the plain answer onto a text that has insertions (markers, links) in it."""

from __future__ import annotations


class OffsetMap:
    """Records what was inserted where, so segment spans follow the text they cover.

    An insertion at plain position ``p`` sits before plain character ``p``: a
    span starting at ``p`` moves past it, a span ending at ``p`` does not.
    """

    def __init__(self) -> None:
        self.insertions: list[tuple[int, int]] = []  # (plain position, inserted length), in text order

    def insert(self, plain_position: int, length: int) -> None:
        if length:
            self.insertions.append((plain_position, length))

    def start(self, plain_start: int) -> int:
        """Where a span that starts at ``plain_start`` starts in the rendered text."""
        return plain_start + sum(n for p, n in self.insertions if p <= plain_start)

    def end(self, plain_end: int) -> int:
        """Where a span that ends (exclusive) at ``plain_end`` ends in the rendered text."""
        return plain_end + sum(n for p, n in self.insertions if p < plain_end)
