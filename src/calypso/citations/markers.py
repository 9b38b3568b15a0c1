"""Find the citation markers models write, in complete text or incrementally while streaming.

Recognised forms (``N`` is a positive integer below 1000, written without leading zeros), as small and
large models write them (issue 39):

* ``[Source N]``, ``[Sources N, M]``, ``[source: N]``, ``[SourceN]``, ``[Source 1, Source 2]``, ``[Source 1 and 2]``
* ``[N]``, ``[N, M]``, ``[N,M]``, ``[N; M]``, ranges ``[N-M]`` / ``[N–M]`` (expanded, at most 20 long)
* full-width ``【N】``, ``【Source N】``, ``【N, M】``
* double brackets ``[[N]]`` and links ``[[N]](url)`` / ``[N](url)``: the ``(url)`` belongs to the marker
* footnotes ``[^N]``
* parenthesised ``(Source N)``, ``(Sources 1 and 3)``; bare ``Source N`` as a word (capitalised)
  (``bare``: the caller keeps it as text when N names no passage, since it may be prose)
* by name: ``[Source: alps_wiki.pdf]``, ``[alps_wiki.pdf]``, ``【alps_wiki.pdf】`` (``names``; a bracket
  needs the ``Source:`` prefix or a file extension, so "[citation needed]" stays text)
* a page given with it belongs to the marker: ``[Source 2, p. 15]``, ``[Source 2] (p. 15)``, ``(Source 2, page 3)``
* a list joined by words: ``[1] and [2]``, ``[1], [3]``, ``Source 1 and Source 2`` is one marker

Markers inside code spans and fenced code blocks are ignored. Numbers are reported as written;
deciding which of them name a retrieved passage is the caller's job.

There is one scanner for both entry points: ``find_markers`` runs ``MarkerStream`` over the whole
text. The scanner only ever decides from characters it has seen (or from end-of-text on
``flush``), so every way of splitting a text into deltas yields the same segmentation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_BRACKET = 64  # longest bracket part ("[Source 1, Source 2, ...]"), so a stray "[" never stalls
MAX_URL = 300  # longest url in the "[[N]](url)" form
MAX_RANGE = 20  # "[1-999]" is not a citation
_DIGITS = "0123456789"
_SPACE = " \t"
_SEPS = ",;，"
_DASHES = "-–"
_PREFIX = "source"
_OPENERS = "[【(S"
_JOINING = ("and", "und", "et", "&", "和", "与", "與", "及", "、")
_PAGE_WORDS = ("pp.", "p.", "pages", "page", "pg.", "s.", "seite", "第")
MAX_NAMED = 160  # longest "[Source: a document name.pdf, p. 3]"
_NAMED = re.compile(
    r"(?P<prefix>(?i:sources?)\s*[:：]\s*)?(?P<name>[^,，]+?)\s*(?:[,，]\s*(?:pp?\.|pages?|S\.|Seite|第)\s*\d.*)?"
)
_FILE_NAME = re.compile(r"\.[A-Za-z][A-Za-z0-9]{1,4}$")
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
    names: tuple[str, ...] = ()  # documents cited by name ("[Source: alps_wiki.pdf]")
    bare: bool = False  # "Source 2" without brackets: prose unless the number names a passage


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

    def word(self, words: tuple[str, ...]) -> bool:
        """One of ``words`` (case-insensitive) at the cursor; an alphabetic word must end at a non-letter."""
        start = self.j
        for word in words:
            self.j = start
            try:
                for expected in word:
                    c = self.peek()
                    if not c or c.lower() != expected:
                        raise _Fail
                    self.j += 1
                if word[-1].isascii() and word[-1].isalpha() and (c := self.peek()) and c.isalpha():
                    raise _Fail
                return True
            except _Fail:
                continue
        self.j = start
        return False

    def separator(self) -> bool:
        """Between two cited items: ``,`` ``;`` ``、`` or a joining word ("and", "und", "和"), spaces around."""
        start = self.j
        self.spaces()
        c = self.peek()
        if c and c in _SEPS:
            self.j += 1
            self.spaces()
            if self.word(_JOINING):
                self.spaces()
            return True
        if self.word(_JOINING):
            self.spaces()
            return True
        self.j = start
        return False

    def page(self, comma: bool = True) -> bool:
        """A page given with a citation: ``, p. 15``, `` page 3``, ``, pp. 14-15``, ``，第15页``."""
        start = self.j
        try:
            if comma and (c := self.peek()) and c in ",，":
                self.j += 1
            self.spaces()
            if not self.word(_PAGE_WORDS):
                raise _Fail
            self.spaces()
            self.number()
            self.spaces()
            if (c := self.peek()) and c in _DASHES:
                self.j += 1
                self.spaces()
                self.number()
            self.word(("页", "頁"))
            return True
        except _Fail:
            self.j = start
            return False

    def item(self, numbers: list[int]) -> None:
        """``[Source] N`` or ``N-M``, appended to ``numbers``."""
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

    def body(self) -> list[int]:
        """``item (sep item)*`` with optional spaces around, then an optional page."""
        numbers: list[int] = []
        self.spaces()
        self.item(numbers)
        while True:
            before = self.j
            if not self.separator():
                break
            try:
                self.item(numbers)
            except _Fail:
                self.j = before  # "Source 2, and the lake …": the list ended before the separator
                break
        self.page()
        self.spaces()
        return numbers

    def name(self, closer: str) -> str:
        """A document named in brackets: ``Source: alps_wiki.pdf`` or ``alps_wiki.pdf``, up to ``closer``."""
        begin = self.j
        while (c := self.peek()) != closer:
            if not c or c in "[]【】()\n":
                raise _Fail
            self.j += 1
        found = _NAMED.fullmatch(self.s[begin : self.j].strip())
        if found is None or not (found["prefix"] or _FILE_NAME.search(found["name"])):
            raise _Fail
        return found["name"].strip()

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


@dataclass
class _Found:
    end: int
    numbers: list[int]
    names: list[str]
    bare: bool = False


def _match_one(s: str, i: int, final: bool) -> _Found | None:
    """One marker at ``s[i]`` (an opener), or None; raises ``_Partial`` if undecided."""
    p = _Parser(s, i + 1, final, i + MAX_BRACKET)
    opener = s[i]
    try:
        if opener == "S":  # bare "Source 2", capitalised ("the source 2 km away" is prose), then numbers
            p.j = i
            for expected in _PREFIX:
                c = p.peek()
                if not c or c.lower() != expected:
                    raise _Fail
                p.j += 1
            if (c := p.peek()) and c.lower() == "s":
                p.j += 1
            if p.peek() not in (" ", ":"):
                raise _Fail
            p.j = i
            numbers = p.body()
            while p.j > i and s[p.j - 1] in _SPACE:
                p.j -= 1
            if (c := p.peek()) and (c.isalnum() or c == "_"):
                raise _Fail  # "source 2km", "Source 2nd"
            return _Found(p.j, numbers, [], bare=True)
        if opener == "(":  # "(Source 2)": the word Source is required, "(2)" is prose
            if (c := p.peek()) and c.lower() != "s":
                raise _Fail
            numbers = p.body()
            p.expect(")")
            return _Found(p.j, numbers, [])
        closer = "】" if opener == "【" else "]"
        if opener == "[" and p.peek() == "^":
            p.j += 1
            numbers = [p.number()]
            p.expect("]")
            return _Found(p.j, numbers, [])
        double = opener == "[" and p.peek() == "["
        if double:
            p.j += 1
        try:
            numbers = p.body()
            p.expect(closer)
        except _Fail:
            if double:
                raise
            p = _Parser(s, i + 1, final, i + MAX_NAMED)
            named = p.name(closer)
            p.expect(closer)
            return _Found(p.j, [], [named])
        if double:
            p.expect("]")
        if opener == "【":
            return _Found(p.j, numbers, [])
        return _Found(p.url_suffix(p.j), numbers, [])
    except _Fail:
        return None


def _page_suffix(s: str, end: int, final: bool) -> int:
    """End of a page reference in parentheses right after a marker ("[Source 2] (p. 15)"), else ``end``."""
    p = _Parser(s, end, final, end + 24)
    try:
        p.spaces()
        p.expect("(（")
        p.spaces()
        if not p.page(comma=False):
            return end
        p.expect(")）")
        return p.j
    except _Fail:
        return end


def _continuation(s: str, end: int, final: bool) -> _Found | None:
    """A further marker joined to the one ending at ``end`` ("[1] and [2]", "[1], [3]"), or None."""
    p = _Parser(s, end, final, end + 12)
    try:
        if not p.separator():
            return None
        c = p.peek()
    except _Fail:
        return None
    if not c or c not in _OPENERS:
        return None
    if c == "S" and not _word_start(s[p.j - 1]):
        return None
    return _match_one(s, p.j, final)


def _match(s: str, i: int, final: bool) -> _Found | None:
    """The marker (with its page and joined markers) at ``s[i]``, or None; raises ``_Partial`` if undecided."""
    found = _match_one(s, i, final)
    if found is None:
        return None
    while True:
        found.end = _page_suffix(s, found.end, final)
        more = _continuation(s, found.end, final)
        if more is None:
            return found
        found = _Found(more.end, found.numbers + more.numbers, found.names + more.names, found.bare and more.bare)


def _word_start(previous: str) -> bool:
    """Whether a bare "Source" after ``previous`` starts a word."""
    return not (previous.isalnum() or previous in "_-/[【(")


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

    Everything that cannot start a marker is emitted at once; only a suffix beginning at an opener
    (``[``, ``【``, ``(``, a word-initial ``S``) that could still become a marker is held (at most
    MAX_NAMED + MAX_URL characters and a joined marker).
    Each feed costs O(len(delta) + held).
    """

    def __init__(self) -> None:
        self._held = ""  # raw text not yet emitted; empty or starting at a possible marker
        self._offset = 0  # stream offset of self._held[0]
        self._code = _CodeState()
        self._previous = " "  # the character before ``_held``: a bare "Source" must start a word

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
            if code.mode == _TEXT and c in _OPENERS and (c != "S" or _word_start(s[i - 1] if i else self._previous)):
                try:
                    found = _match(s, i, final)
                except _Partial:
                    break
                if found is not None:
                    end = found.end
                    if text_start < i:
                        out.append(TextPiece(s[text_start:i]))
                    raw = s[i:end]
                    unique = tuple(dict.fromkeys(found.numbers))
                    marker = Marker(self._offset + i, self._offset + end, unique, raw, tuple(found.names), found.bare)
                    out.append(MarkerPiece(marker))
                    code.line_start = False  # markers hold no newlines, backticks or tildes at line start
                    i = text_start = end
                    continue
            code.consume(c)
            i += 1
        if text_start < i:
            out.append(TextPiece(s[text_start:i]))
        if i:
            self._previous = s[i - 1]
        self._held = s[i:]
        self._offset += i
        return out


def find_markers(text: str) -> list[Marker]:
    """All citation markers in a complete text, skipping code spans (`...`) and fenced code blocks (``` / ~~~)."""
    stream = MarkerStream()
    pieces = stream.feed(text) + stream.flush()
    return [piece.marker for piece in pieces if isinstance(piece, MarkerPiece)]
