"""Inputs that made ingestion quadratic: long runs of spaces, heading floods.

Each hostile case runs in a child process with a CPU-time cap (``run_isolated``): the fixed code needs
well under a second of it, the old code minutes to hours, so without the fix the child is killed and
the test fails instead of stalling the run. Nothing here asserts on a measured duration; the times
are in docs/security.md.
"""

from __future__ import annotations

import itertools
import random
import re

from calypso.ingest.chunking import _HeadingLocator
from calypso.ingest.parsers.crowded_tags import strip_crowded_tags
from calypso.ingest.parsers.markdown import _atx, atx_headings
from calypso.models import Heading
from testkit.hostile_files import run_isolated

CPU_CAP = 30  # seconds of CPU per child; the fixed code uses about 1


def test_atx_reads_lines_exactly_as_the_pattern_it_replaced() -> None:
    # The old regular expression is the reference: every line of up to 6 characters over an alphabet
    # with the characters that matter (spaces, tabs, "#", a letter, NBSP, CR) reads the same.
    old = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
    for length in range(7):
        for chars in itertools.product(" \t#a\xa0\r", repeat=length):
            line = "".join(chars)
            match = old.match(line)
            expected = (len(match.group(1)), match.group(2) or "") if match else None
            assert _atx(line) == expected, repr(line)


def test_atx_headings_keep_closing_hashes_that_belong_to_the_title() -> None:
    text = "# Title #\n## C#\n### Tabs\t##\t\n####### seven\n#hashtag\n    # indented code"
    assert [(h.level, h.title) for h in atx_headings(text)] == [(1, "Title"), (2, "C#"), (3, "Tabs")]


def test_markdown_heading_with_a_megabyte_of_spaces() -> None:
    out = run_isolated(
        """
        from calypso.ingest.parsers import detect_and_parse
        data = b"# a" + b" " * 1_000_000 + b"b #\\n\\nBody.\\n" + b"#" + b" " * 1_000_000 + b"#" + b" " * 1_000_000 + b"x"
        parsed, _ = detect_and_parse(data, "spaces.md")
        print([(h.level, h.title[:1], h.title[-1:], len(h.title)) for h in parsed.headings])
        """,
        cpu_seconds=CPU_CAP,
    )
    assert out.strip() == "[(1, 'a', 'b', 1000002), (1, '#', 'x', 1000002)]"


def test_html_pre_of_spaces() -> None:
    out = run_isolated(
        """
        from calypso.ingest.parsers import detect_and_parse
        html = (
            b"<html><body><article><h1>Spaces</h1><p>A paragraph long enough to be the main content of the page.</p>"
            b"<pre>a" + b" " * 1_000_000 + b"b" + b" " * 1_000_000 + b"\\nc</pre></article></body></html>"
        )
        parsed, _ = detect_and_parse(html, "pre.html")
        print(parsed.text.count(" "), parsed.text.endswith("b\\nc"))
        """,
        cpu_seconds=CPU_CAP,
    )
    spaces, trailing_dropped = out.split()
    assert trailing_dropped == "True" and 1_000_000 <= int(spaces) < 1_000_100


def test_html_tag_with_200000_attributes() -> None:
    # libxml2 compares each attribute of a tag with every earlier one: 60 s and more for this page.
    out = run_isolated(
        """
        from testkit.hostile_files import html_crowded_tag
        from calypso.ingest.parsers import detect_and_parse
        data = html_crowded_tag(200_000)
        parsed, _ = detect_and_parse(data, "crowded.html")
        print(len(data) > 2_000_000, parsed.text)
        """,
        cpu_seconds=CPU_CAP,
    )
    assert out.strip() == "True The only sentence of this crowded page."


def test_crowded_tags_keep_their_first_attributes_and_every_other_byte() -> None:
    page = b'<p class="a" title="x > y" hidden data-1=1 data-2=\'2\'>Text <b>bold</b></p><br/><img src=x.png>'
    assert strip_crowded_tags(page, 5) == (page, 0)  # nothing over the limit: the same bytes
    assert strip_crowded_tags(page, 2) == (b'<p class="a" title="x > y">Text <b>bold</b></p><br/><img src=x.png>', 3)
    assert strip_crowded_tags(b"<a x='unterminated > <b c d e>", 0) == (b"<a>", 1)
    assert strip_crowded_tags(b"<a = ' \"", 1) == (b"<a =>", 2)  # stray quotes and "=" count as names
    assert strip_crowded_tags(b"a < b and 1<2 <!-- <x a b> -->", 1) == (b"a < b and 1<2 <!-- <x a> -->", 1)


def test_crowded_tags_scan_is_linear_on_its_worst_inputs() -> None:
    out = run_isolated(
        """
        from calypso.ingest.parsers.crowded_tags import strip_crowded_tags
        for data in (b"<a x='" * 400_000, b"<a " + b"= " * 1_000_000, b"<a" * 1_000_000, b"<a b=" * 400_000):
            print(len(strip_crowded_tags(data)[0]) > 0)
        """,
        cpu_seconds=CPU_CAP,
    )
    assert out.split() == ["True"] * 4


def test_chunking_a_long_run_of_whitespace() -> None:
    out = run_isolated(
        """
        from calypso.ingest.chunking import chunk_document
        from calypso.models import Heading, Page, ParsedDocument
        text = "Intro." + " " * 5_000_000 + "\\n# Next\\nBody."
        start = text.index("# Next")
        doc = ParsedDocument(text, [Page(1, "1", 0, len(text))], [Heading(1, "Next", start)])
        print([(c.text, c.heading_path) for c in chunk_document(doc, 1000, 150)])
        """,
        cpu_seconds=CPU_CAP,
    )
    assert out.strip() == "[('Intro.', ()), ('# Next\\nBody.', ('Next',))]"


def test_chunking_a_quarter_million_headings() -> None:
    out = run_isolated(
        """
        from calypso.ingest.chunking import chunk_document
        from calypso.ingest.parsers import detect_and_parse
        from testkit.hostile_files import markdown_heading_flood
        parsed, _ = detect_and_parse(markdown_heading_flood(250_000), "headings.md")
        chunks = chunk_document(parsed, 1000, 150)
        last = chunks[-1]
        print(len(parsed.headings), last.heading_path, last.text.splitlines()[-1])
        """,
        cpu_seconds=CPU_CAP,
    )
    # The heading path is the section the chunk starts in (its first heading); the last chunk ends the last section.
    assert out.strip() == "250000 ('Heading 249993',) Body of section 249999."


def test_heading_locator_matches_a_full_scan() -> None:
    # The reference is the old lookup: replay every heading before the offset on a stack.
    rng = random.Random(7)
    text = "".join(rng.choice(["x", " ", "\n", "."]) for _ in range(3000))
    starts = sorted(rng.sample(range(len(text)), 300))
    headings = [Heading(rng.randint(1, 4), f"H{start}", start) for start in starts]
    locator = _HeadingLocator(headings, text)
    for offset in range(len(text)):
        stack: list[Heading] = []
        for heading in headings:
            if heading.start > offset:
                break
            while stack and stack[-1].level >= heading.level:
                stack.pop()
            stack.append(heading)
        assert locator.path(offset) == tuple(h.title for h in stack)
        rest = text[offset:]
        expected = any(rest[: h.start - offset].isspace() or h.start == offset for h in headings if h.start >= offset)
        assert locator.starts_heading(offset) == expected, offset
