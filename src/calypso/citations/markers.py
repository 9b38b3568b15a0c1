"""Find the citation markers models write, in complete text or incrementally while streaming.

Recognised forms (``N`` is a positive integer below 1000, written without leading zeros):

* ``[Source N]``, ``[Sources N, M]``, ``[source: N]``, ``[SourceN]``, ``[Source 1, Source 2]``
* ``[N]``, ``[N, M]``, ``[N,M]``, ``[N; M]``, ranges ``[N-M]`` / ``[N–M]`` (expanded, at most 20 long)
* full-width ``【N】``, ``【Source N】``, ``【N, M】``
* double brackets ``[[N]]`` and links ``[[N]](url)`` / ``[N](url)``: the ``(url)`` belongs to the marker
* footnotes ``[^N]``

Markers inside code spans and fenced code blocks are ignored. Numbers are reported as written;
deciding which of them name a retrieved passage is the caller's job.

There is one scanner for both entry points: ``find_markers`` runs ``MarkerStream`` over the whole
text. The scanner only ever decides from characters it has seen (or from end-of-text on
``flush``), so every way of splitting a text into deltas yields the same segmentation.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_BRACKET = 64  # longest bracket part ("[Source 1, Source 2, ...]"), so a stray "[" never stalls
MAX_URL = 300  # longest url in the "[[N]](url)" form
MAX_RANGE = 20  # "[1-999]" is not a citation
_DIGITS = "0123456789"
_SPACE = " \t"
_SEPS = ",;，"
_DASHES = "-–"
_PREFIX = "source"
_URL_STOP = set('()[]<>`"')


@dataclass(frozen=True)
class Marker:
    """One citation marker as written.

    ``start``/``end`` are code-point offsets into the raw text (end exclusive); ``numbers`` are the
    cited numbers in written order, ranges expanded, duplicates removed; ``raw`` is the marker text.
    """

    start: int
    end: int
    numbers: tuple[int, ...]
    raw: str


@dataclass(frozen=True)
class TextPiece:
    """Plain text that can no longer become part of a marker: safe to emit now."""

    text: str


@dataclass(frozen=True)
class MarkerPiece:
    """A complete marker; its offsets are into the full raw stream seen so far."""

    marker: Marker


class _Partial(Exception):
    """The text ends before we can tell whether this is a marker."""


class _Fail(Exception):
    """Not a marker."""


class _Parser:
    """Recursive-descent matcher over ``s`` from index ``j``; raises ``_Partial`` at the end of unfinished text."""

    def __init__(self, s: str, j: int, final: bool, limit: int) -> None:
        self.s, self.j, self.final, self.limit = s, j, final, limit

    def peek(self) -> str:
        # The length limit is checked first so the outcome depends only on positions, not on how much text arrived.
        if self.j >= self.limit:
            raise _Fail
        if self.j >= len(self.s):
            if self.final:
                return ""
            raise _Partial
        return self.s[self.j]

    def expect(self, chars: str) -> None:
        c = self.peek()
        if not c or c not in chars:
            raise _Fail
        self.j += 1

    def spaces(self) -> None:
        while (c := self.peek()) and c in _SPACE:
            self.j += 1

    def number(self) -> int:
        start = self.j
        self.expect("123456789")
        for _ in range(2):
            if (c := self.peek()) and c in _DIGITS:
                self.j += 1
        if (c := self.peek()) and c in _DIGITS:  # four or more digits: a year, a price, not a citation
            raise _Fail
        return int(self.s[start : self.j])

    def prefix(self) -> None:
        """Optional "Source"/"Sources", then optional spaces and colon."""
        c = self.peek()
        if not c or c.lower() != "s":
            return
        for expected in _PREFIX:
            c = self.peek()
            if not c or c.lower() != expected:
                raise _Fail
            self.j += 1
        if (c := self.peek()) and c.lower() == "s":
            self.j += 1
        self.spaces()
        if self.peek() == ":":
            self.j += 1
            self.spaces()

    def body(self) -> list[int]:
        """``item (sep item)*`` with optional spaces around, where item is ``[Source] N`` or ``N-M``."""
        numbers: list[int] = []
        self.spaces()
        while True:
            self.prefix()
            first = self.number()
            self.spaces()
            if (c := self.peek()) and c in _DASHES:
                self.j += 1
                self.spaces()
                last = self.number()
                self.spaces()
                if not 0 <= last - first < MAX_RANGE:
                    raise _Fail
                numbers.extend(range(first, last + 1))
            else:
                numbers.append(first)
            if (c := self.peek()) and c in _SEPS:
                self.j += 1
                self.spaces()
                continue
            return numbers

    def url_suffix(self, end: int) -> int:
        """End of an optional ``(url)`` right after the bracket part ending at ``end``."""
        self.limit = end + MAX_URL + 2
        if self.peek() != "(":
            return end
        self.j += 1
        try:
            while (c := self.peek()) != ")":
                if not c or c.isspace() or c in _URL_STOP:
                    raise _Fail
                self.j += 1
        except _Fail:
            return end  # "[3](not a url": the marker is just "[3]"
        url = self.s[end + 1 : self.j]
        # "[3](see)" is a parenthetical, not a link: a url needs one of / : . #
        return self.j + 1 if any(ch in url for ch in "/:.#") else end


def _match(s: str, i: int, final: bool) -> tuple[int, list[int]] | None:
    """Marker at ``s[i]`` (an opener): ``(end, numbers)``, or None; raises ``_Partial`` if undecided."""
    p = _Parser(s, i + 1, final, i + MAX_BRACKET)
    try:
        if s[i] == "【":
            numbers = p.body()
            p.expect("】")
            return p.j, numbers
        if p.peek() == "^":
            p.j += 1
            numbers = [p.number()]
            p.expect("]")
            return p.j, numbers
        double = p.peek() == "["
        if double:
            p.j += 1
        numbers = p.body()
        p.expect("]")
        if double:
            p.expect("]")
        return p.url_suffix(p.j), numbers
    except _Fail:
        return None


_TEXT, _SPAN, _FENCE = 0, 1, 2


class _CodeState:
    """Markdown code tracking, one character at a time.

    A run of backticks/tildes is resolved when the next, different character arrives, so runs split
    across deltas are handled without holding them back (they are plain text either way).
    Simplifications: fences may be indented any amount (models indent them inside lists); an
    unclosed code span ends at the line break instead of turning back into literal backticks.
    """

    def __init__(self) -> None:
        self.mode = _TEXT
        self.span_len = 0
        self.fence_char, self.fence_len = "", 0
        self.close_pending = False  # a closing fence run was seen; it closes if the line stays blank
        self.line_start = True
        self.run_char, self.run_len, self.run_line_start = "", 0, False

    def resolve(self, c: str) -> None:
        """Call before looking at ``c``: finishes a backtick/tilde run that ``c`` does not continue."""
        if not self.run_len or c == self.run_char:
            return
        ch, n, at_start = self.run_char, self.run_len, self.run_line_start
        self.run_len = 0
        if self.mode == _TEXT:
            if at_start and n >= 3:
                self.mode, self.fence_char, self.fence_len = _FENCE, ch, n
            elif ch == "`":
                self.mode, self.span_len = _SPAN, n
        elif self.mode == _SPAN:
            if ch == "`" and n == self.span_len:
                self.mode = _TEXT
        elif at_start and ch == self.fence_char and n >= self.fence_len:
            self.close_pending = True

    def consume(self, c: str) -> None:
        """Advance over plain character ``c`` (after ``resolve(c)``)."""
        if c == "\n":
            if self.mode == _SPAN or (self.mode == _FENCE and self.close_pending):
                self.mode = _TEXT
            self.close_pending = False
            self.line_start = True
            return
        if c in _SPACE:
            return
        self.close_pending = False
        if c in "`~":
            if self.run_len:
                self.run_len += 1
            else:
                self.run_char, self.run_len, self.run_line_start = c, 1, self.line_start
        self.line_start = False


class MarkerStream:
    """Incremental splitter: feed raw deltas, get TextPiece/MarkerPiece in order.

    Everything that cannot start a marker is emitted at once; only a suffix beginning at ``[`` or
    ``【`` that could still become a marker is held (at most MAX_BRACKET + MAX_URL characters).
    Each feed costs O(len(delta) + held).
    """

    def __init__(self) -> None:
        self._held = ""  # raw text not yet emitted; empty or starting at a possible marker
        self._offset = 0  # stream offset of self._held[0]
        self._code = _CodeState()

    @property
    def held(self) -> str:
        """The raw suffix held back: empty, or starting at a ``[`` or ``【`` that may still open a marker."""
        return self._held

    def feed(self, delta: str) -> list[TextPiece | MarkerPiece]:
        """Add a raw delta; return the pieces that are now certain."""
        self._held += delta
        return self._scan(final=False)

    def flush(self) -> list[TextPiece | MarkerPiece]:
        """End of stream: release whatever is held (an unfinished marker becomes text)."""
        return self._scan(final=True)

    def _scan(self, final: bool) -> list[TextPiece | MarkerPiece]:
        s, code = self._held, self._code
        out: list[TextPiece | MarkerPiece] = []
        i = text_start = 0
        while i < len(s):
            c = s[i]
            code.resolve(c)
            if code.mode == _TEXT and c in "[【":
                try:
                    found = _match(s, i, final)
                except _Partial:
                    break
                if found is not None:
                    end, numbers = found
                    if text_start < i:
                        out.append(TextPiece(s[text_start:i]))
                    raw = s[i:end]
                    unique = tuple(dict.fromkeys(numbers))
                    out.append(MarkerPiece(Marker(self._offset + i, self._offset + end, unique, raw)))
                    code.line_start = False  # markers hold no newlines, backticks or tildes at line start
                    i = text_start = end
                    continue
            code.consume(c)
            i += 1
        if text_start < i:
            out.append(TextPiece(s[text_start:i]))
        self._held = s[i:]
        self._offset += i
        return out


def find_markers(text: str) -> list[Marker]:
    """All citation markers in a complete text, skipping code spans (`...`) and fenced code blocks (``` / ~~~)."""
    stream = MarkerStream()
    pieces = stream.feed(text) + stream.flush()
    return [piece.marker for piece in pieces if isinstance(piece, MarkerPiece)]
