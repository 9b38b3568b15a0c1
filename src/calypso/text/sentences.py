"""Where sentences end: the one sentence splitter of Calypso.

Chunking packs these sentences into chunks, the extractive answerer quotes them,
the support scorer picks its evidence among them, and the answer composer starts
a cited segment where the sentence before a citation marker starts. All four use
this module so that they agree on what a sentence is.

A sentence ends:

* after ``. ! ? … ‼ ⁇ ⁈ ⁉ ؟`` (a run such as ``?!`` or ``...`` is one end), plus any
  closing quotes, brackets, superscripts and footnote markers right after it
  (``.”``, ``.)``, ``.[83]``, ``. [Source 2]``), when whitespace and then a word that
  does not start in lower case follow. A lower-case word with a capital or digit in
  it (``p53``, ``mRNA``) counts as capitalised, and after a plain word at the end of a
  line (``by email.\nclick to copy``) any word does. Leader dots (``....``, ``. . .``)
  never end a sentence; non-breaking spaces alone never separate two;
* after the CJK ``。 ！ ？ ｡`` (plus closers) always, with or without a space;
* at a blank line, always;
* at a single line break when the next line is a list item, heading, quote or table
  row, or when the line before looks like a heading or label: shorter than 60
  characters, or ending in ``:``, or itself a list item or markdown heading. A line
  break before a lower-case word, after a long line, or after a short line ending in
  a word like ``the`` or ``and``, is a wrapped line.

A full stop does not end a sentence after:

* titles (``Mr. Dr. Prof. Hr. Fr.`` ...) and introducers (``e.g. i.e. cf. vs. viz. approx.
  ca. z. B. d. h. vgl. bzw.`` ...), whatever follows;
* reference words before a number (``No. 5``, ``Fig. 3``, ``p. 12``, ``Nr. 5``, ``Vol. II``,
  ``Jan. 5``);
* a number that opens its sentence (``1. Open the box``: an enumeration), or a German
  ordinal (``am 3. Oktober``, ``im 18. Jahrhundert``: a number of up to three digits
  followed by a month name, or after ``am im vom zum der die das`` ...);
* initials, multi-dot abbreviations (``J. R. R. Tolkien``, ``U.S.``, ``Ph.D.``, ``a.m.``) and
  abbreviations that may close a sentence (``etc. et al. Inc. Jr. usw. u. a.``) unless
  the next word is a common sentence opener (``The``, ``This``, ``In``, ``Der`` ...):
  ``in the U.S. The next`` splits, ``the U.S. Army`` does not. Of the two possible
  errors, this rule prefers the one that keeps a citation right: a cited segment
  that starts one sentence early still holds the claim, while one cut at
  ``U.S.`` | ``Army ...`` would lose words of it.

Decimals and versions (``3.14``, ``1,000.5``, ``v2.0``) never split: a full stop needs
whitespace after it. The scan is linear in the length of the text: one pass of a
regular expression without nested quantifiers finds the candidate ends, and each
candidate looks a bounded number of characters back and forth.

Offsets are code-point offsets into the text given; spans are whitespace-stripped,
non-empty, in order, disjoint, and together cover every non-whitespace character.
"""

from __future__ import annotations

import re

__all__ = ["last_sentence_start", "sentence_spans", "settled_end"]

_CJK_TERMINAL = "。！？｡"
# A candidate sentence end: a run of terminal punctuation, or a line break.
_CANDIDATE = re.compile(r"[.!?…‼⁇⁈⁉؟。！？｡]+|\n")
_SPACE = re.compile(r"\s*")
_NON_BREAKING = "\u00a0\u202f\u2007"
# Characters that stay with the sentence they follow: closing quotes, brackets, emphasis, superscripts.
_CLOSERS = frozenset("\"'”’»›)]}*_」』】〕〉》）］｝＂＇¹²³⁰⁴⁵⁶⁷⁸⁹")
# A footnote or citation marker glued to the full stop ("century.[83]"), or a numbered
# source marker after a space ("done. [Source 2]", "done. [1, 2]").
_GLUED_BRACKET = re.compile(r"\[[^\[\]\n]{1,40}\]|【[^【】\n]{1,40}】")
_SPACED_CITATION = re.compile(r"[ \t]+\[(?:[Ss]ource[ \t]*)?\d{1,4}(?:[ \t]*[,;–-][ \t]*\d{1,4})*\]")
# The start of a line that begins a block of its own.
_BLOCK_START = re.compile(r"#{1,6}\s|[-*+•·‣▪◦–—]\s|>|\||\d{1,3}[.)]\s|\(?[A-Za-z0-9]{1,3}\)\s|[IVX]{1,4}[.)]\s")
_MARKDOWN_HEADING = re.compile(r"#{1,6}\s")
_HEADING_LINE = 60  # a line shorter than this, followed by a line break, ends its sentence
_CJK_HEADING_LINE = 20  # CJK lines are dense: a wrapped line of 40 characters is common
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# A word in lower case with a capital or digit in it opens sentences in technical text ("p53 is", "mRNA").
_MIXED_CASE = re.compile(r"[^\W\d_]{1,6}-?(?:[A-Z]|\d)")
_ROMAN_OR_CODE = re.compile(r"[IVXLC]{2,}\b|[A-Z]?\d|[A-Z]-?\d")

# Abbreviations, lower-cased, internal dots kept, without the final dot.
_TITLES = frozenset(
    "mr mrs ms mx dr prof rev hon sen rep gov gen col capt lt sgt cmdr adm maj mt messrs mme mlle mmes"
    " hr hrn fr dres pres supt insp dipl".split()
)
_INTRODUCERS = frozenset(
    "e.g i.e cf vs viz approx ca esp incl excl resp z.b d.h vgl bzw bspw sog inkl zzgl ggf evtl u.u z.t"
    " o.g s.o s.u i.d.r bzgl betr gem et".split()
)
_BEFORE_NUMBER = frozenset(
    "no nos nr nrn fig figs tab tabs eq eqs vol vols p pp ch chap sec sect art abs bd ref refs ex s abb"
    " anm kap par para op hft jg rn ziff l ll n nn fn app suppl tel"
    " jan feb mar apr jun jul aug sep sept oct nov dec jän febr mär okt dez".split()
)
_MAY_CLOSE = frozenset("etc usw al inc ltd co corp bros jr sr st ft ed eds u.a u.ä o.ä u.v.m".split())
# Words that commonly open a sentence: after an abbreviation that may close one, the
# next word must be one of these to end the sentence there.
_OPENERS = frozenset(
    (
        "A An The This That These Those There Their They Then Thus Therefore It Its In On At As After Before"
        " But And Or So Since Because Although Though While When Whereas Where Which What Who Why How However"
        " Moreover Furthermore Further Finally First Second Third Also Additionally Both Each Every Some Many"
        " Most Several All Any No None Not Nor One Two Three Other Others Another Such Here He She We I You"
        " Our Your My His Her If For From To With Without By During Despite Among Between Under Over Unlike"
        " Only Even Still Yet Now Today Instead Indeed Overall Similarly Likewise Meanwhile Later Eventually"
        " Note See Please Let Of Given Based Using"
        # German
        " Der Die Das Den Dem Des Ein Eine Einen Einem Einer Es Er Sie Wir Ich Ihr Man Im Am Auf Aus Bei Mit"
        " Nach Seit Von Vor Zu Zum Zur Aber Auch Dies Diese Dieser Dieses Damit Dann Da Daher Deshalb Doch"
        " Und Oder Wenn Als Wie Was Wer Wo Nicht Kein Keine Jedoch Außerdem Zudem Somit Hier Dabei Dazu"
        " Danach Nun Trotz Während Weil Obwohl Alle Viele"
        # French, Spanish
        " Le La Les Il Elle Ils Elles Nous Un Une Dans Pour Ce Cette Ces Mais Et El Los Las Por"
    ).split()
)
_MONTHS = frozenset(
    (
        "january february march april may june july august september october november december"
        " januar jänner februar märz mai juni juli oktober dezember"
        " jan feb mar apr jun jul aug sep sept oct nov dec jän febr mär okt dez"
    ).split()
)
# Words a heading does not end with: a short line ending in one is wrapped mid-sentence.
_CONTINUES = frozenset(
    "a an the of and or to in on at for with by from as is are was were be that which its their his her our"
    " your this these those der die das den dem des ein eine und oder von zu mit im am für auf aus".split()
)
# German words after which "<number>." is an ordinal ("im 18. Jahrhundert").
_ORDINAL_CUES = frozenset(
    "am im vom zum zur beim der die das den dem des ab seit bis ins ans jedem jeden jeder".split()
)


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The sentences of ``text[start:end]`` as (start, end) offsets into ``text``.

    Code-point offsets, end exclusive, leading and trailing whitespace excluded, never
    empty. The result is exactly that of splitting ``text[start:end]`` alone, shifted by
    ``start``: nothing outside the range is looked at.
    """
    end = len(text) if end is None else min(end, len(text))
    start = max(0, start)
    if start >= end:
        return []
    piece = text[start:end] if start or end != len(text) else text
    spans = []
    previous = 0
    for cut in [*_cuts(piece), len(piece)]:
        s, e = _strip(piece, previous, cut)
        if e > s:
            spans.append((s + start, e + start))
        previous = cut
    return spans


def last_sentence_start(text: str, floor: int = 0, end: int | None = None) -> int | None:
    """Where the last sentence of ``text[floor:end]`` starts, or None if that range is blank.

    The composer asks this when a citation marker follows ``text[:end]``: the segment
    it cites starts at the sentence holding the marker, and never before ``floor``.
    """
    spans = sentence_spans(text, floor, end)
    return spans[-1][0] if spans else None


# How many characters of the next sentence a cut decision may read: the next word, after up
# to three opening quotes (_opens_sentence reads 20), a month name (12), a list mark.
_DECIDED_AFTER = 24
_DECIDED_AFTER_BRACKET = 48  # "end.[note" may still close into a glued footnote of up to 42 characters


def settled_end(text: str, start: int = 0, end: int | None = None) -> int:
    """How far the sentence ends of ``text[start:end]`` are final while more text is still to come.

    A streaming caller (the answer composer, inferring citations sentence by sentence) may
    treat every cut before the returned offset as final: appending text after ``end`` never
    moves, adds or removes a cut before it. The offset is that of the first candidate end
    (terminal punctuation or line break) whose decision still depends on characters not yet
    seen; ``end`` when there is none. Mirrors the scan of ``_cuts``.
    """
    end = len(text) if end is None else min(end, len(text))
    start = max(0, start)
    if start >= end:
        return end
    piece = text[start:end]
    n = len(piece)
    pos = 0
    while (match := _CANDIDATE.search(piece, pos)) is not None:
        a, b = match.span()
        if piece[a] == "\n":
            nxt = _skip_space(piece, a)
            if n - nxt < _DECIDED_AFTER:
                return start + a
            pos = nxt
            continue
        close = _after_closers(piece, b)
        nxt = _skip_space(piece, close)
        if b >= n or n - nxt < _DECIDED_AFTER:
            return start + a  # the run may go on, or the next word is not complete
        if piece[close] in "[【" and n - close < _DECIDED_AFTER_BRACKET:
            return start + a
        pos = nxt if any(c in _CJK_TERMINAL for c in piece[a:b]) else max(nxt, close)
    return end


def _skip_space(text: str, pos: int) -> int:
    """The offset of the first non-space character at or after ``pos`` (``len(text)`` if none)."""
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _cuts(text: str) -> list[int]:
    """Offsets where a new sentence may start (the text between two cuts is one sentence plus space)."""
    cuts: list[int] = []
    n = len(text)
    first = _skip_space(text, 0)  # first non-space character of the current sentence
    pos = 0
    while (match := _CANDIDATE.search(text, pos)) is not None:
        a, b = match.span()
        if text[a] == "\n":
            nxt = _skip_space(text, a)
            if nxt >= n:
                break
            if text.count("\n", a, nxt) >= 2 or _line_break_ends(text, a, nxt):
                cuts.append(a)
                first = nxt
            pos = nxt
            continue
        close = _after_closers(text, b)
        if any(c in _CJK_TERMINAL for c in text[a:b]):
            cuts.append(close)
            first = pos = _skip_space(text, close)
            continue
        nxt = _skip_space(text, close)
        if nxt >= n:
            break
        pos = max(nxt, close)
        if nxt == close:
            continue  # no space after it: a decimal, a version, an URL or a glued abbreviation
        newlines = text.count("\n", close, nxt)
        if newlines >= 2 or (newlines == 1 and _BLOCK_START.match(text, nxt)):
            ends = True
        elif newlines == 0 and not text[close:nxt].strip(_NON_BREAKING):
            ends = False
        else:
            ends = _stop_ends(text, a, b, nxt, first, newlines == 1)
        if ends:
            cuts.append(close)
            first = nxt
    return cuts


def _after_closers(text: str, pos: int) -> int:
    """The offset after the closing quotes, brackets and footnote markers that follow a stop at ``pos``."""
    n = len(text)
    for _ in range(8):
        while pos < n and text[pos] in _CLOSERS:
            pos += 1
        match = _GLUED_BRACKET.match(text, pos) or _SPACED_CITATION.match(text, pos)
        if match is None:
            break
        pos = match.end()
    return pos


def _stop_ends(text: str, a: int, b: int, nxt: int, first: int, newline: bool) -> bool:
    """Does the terminal punctuation ``text[a:b]`` end a sentence? The next word starts at ``nxt``.

    Before a lower-case word it does only at the end of a line and after a plain word
    ("... by email.\nclick to copy"): line ends after abbreviations ("e.g.\nthe") and
    ellipses are wraps.
    """
    following = text[nxt]
    if following in ",;:.":
        return False  # a continuation, or more dots ("Contents . . . 5")
    lower = following.islower() and not _MIXED_CASE.match(text, nxt)
    if b - a > 1 or text[a] != ".":
        if text.count(".", a, b) + text.count("…", a, b) == b - a:
            return not lower and b - a < 4  # an ellipsis, or leader dots ("Contents ...... 5")
        return not lower or newline  # "?", "!", "?!"
    if lower and not newline:
        return False
    before = text[a - 1] if a > 0 else ""
    if before == " " and a > 1 and text[a - 2] == ".":
        return False  # spaced leader dots: "Contents . . . . 5"
    if before.isdigit():
        return _number_stop_ends(text, a, nxt, first)
    if not before.isalpha():
        return True
    token, token_start = _token_before(text, a)
    if token_start > 0 and text[token_start - 1].isdigit():
        return True  # "5p.", "10am.": a unit after a number
    key = token.lower()
    if key in _INTRODUCERS or (key in _TITLES and token[0].isupper()):
        return False
    if key in _BEFORE_NUMBER and _ROMAN_OR_CODE.match(text, nxt):
        return False
    if key in _MAY_CLOSE or "." in key or len(key) == 1:
        return _opens_sentence(text, nxt)
    return True


def _token_before(text: str, a: int) -> tuple[str, int]:
    """The word or dotted abbreviation that ends at ``a`` (``U.S``, ``e.g``, ``z. B`` read as ``z.B``)."""
    start = a
    while start > 0 and a - start < 24 and (text[start - 1].isalpha() or text[start - 1] == "."):
        start -= 1
    while start < a and text[start] == ".":
        start += 1
    token = text[start:a]
    # Spaced initials: "z. B", "d. h", "J. R. R": join single letters separated by ". ".
    for _ in range(4):
        head = token.split(".", 1)[0]
        if len(head) != 1 or start < 3 or text[start - 2 : start] != ". ":
            break
        letter = text[start - 3]
        if not letter.isalpha() or (start >= 4 and text[start - 4].isalpha()):
            break
        token = letter + "." + token
        start -= 3
    return token, start


def _opens_sentence(text: str, pos: int) -> bool:
    """Is the word at ``pos`` (after opening quotes or brackets) a common sentence opener?"""
    n = len(text)
    for _ in range(3):
        if pos < n and text[pos] in "\"'“‘«„(¿¡[":
            pos += 1
    end = pos
    while end < n and end - pos < 16 and text[end].isalpha():
        end += 1
    if end == pos or (end < n and text[end] == "."):
        return False  # no word, or another initial ("J. R. Tolkien")
    return text[pos:end] in _OPENERS


def _number_stop_ends(text: str, a: int, nxt: int, first: int) -> bool:
    """A full stop after digits: an enumeration or German ordinal does not end the sentence."""
    start = a
    while start > 0 and a - start < 12 and text[start - 1].isdigit():
        start -= 1
    if start > 0 and (text[start - 1].isalpha() or text[start - 1] in ".,"):
        return True  # "v2.", "3.14.", "1,000.": the end of a longer token
    if a - start > 3:
        return True  # "in 1937. The": a year or a quantity
    # "1. Open the box", "Steps: 1. Open": the number opens its sentence or follows a colon.
    lead = start
    while lead > first and start - lead < 8 and text[lead - 1] in " \t-*•([":
        lead -= 1
    if lead == first or text[lead - 1] == ":":
        return False
    word_end = nxt
    while word_end < len(text) and word_end - nxt < 12 and text[word_end].isalpha():
        word_end += 1
    if text[nxt:word_end].lower() in _MONTHS:
        return False  # "am 3. Oktober"
    cue_end = start - 1
    if cue_end > 0 and text[cue_end] == " ":
        cue_start = cue_end
        while cue_start > 0 and cue_end - cue_start < 8 and text[cue_start - 1].isalpha():
            cue_start -= 1
        if text[cue_start:cue_end].lower() in _ORDINAL_CUES:
            return False  # "im 18. Jahrhundert"
    return True


def _line_break_ends(text: str, a: int, nxt: int) -> bool:
    """Does the single line break at ``a`` end a sentence? ``nxt`` is where the next line's text starts.

    Reached only when the line does not end in terminal punctuation (that case is the
    full stop's rule), so the question is: heading or label, list item, or a wrapped line?
    """
    if _BLOCK_START.match(text, nxt):
        return True  # the next line is a list item, heading, quote or table row
    found = text.rfind("\n", max(0, a - 200), a)
    long = found < 0 and a > 200  # over 200 characters: a paragraph, not a heading
    line = text[max(found + 1, a - 200) : a].strip()
    if not line or (not long and _MARKDOWN_HEADING.match(line)):
        return True
    if text[nxt].islower():
        return False  # "... home to many\nspecies": a wrapped line
    if line[-1] in ":*_|" or (not long and _BLOCK_START.match(line)):
        return True  # a label, an emphasised heading, a table row, a list item
    if long or line[-1] in ",-–—(/&+" or line[line.rfind(" ") + 1 :] in _CONTINUES:
        return False  # "... and the\nGreater Caucasus": a heading does not end in "the"
    if _CJK_CHAR.match(line[-1]) and _CJK_CHAR.match(text[nxt]):
        return len(line) < _CJK_HEADING_LINE
    return len(line) < _HEADING_LINE
