"""Parse time of the real EPUB, EML and MSG files, the EPUB against its ground truth, and the bad-input bounds.

    .venv/bin/python -m bench.mail_epub_formats [--repeat 20] [--raw-markup]

Parse time is the median of ``--repeat`` in-process ``detect_and_parse`` calls (the first call, which
imports the parsers, is left out). The EPUB comparison reads the ground truth (docling's Markdown of the
same book, ``groundtruth/epub_purvis_poetry.epub.md``) as words (letters and digits, case folded,
curly apostrophes straightened, Markdown link targets and comments dropped) and reports the share of
them found in our text in the same order (difflib's matching blocks: a lower bound of the longest
common subsequence). The hostile cases are generated in memory, as the tests generate them.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from difflib import SequenceMatcher
from email.message import EmailMessage
from email.policy import default as default_policy
from pathlib import Path

from bench.common.paths import data_dir
from bench.common.proc import peak_rss_mb
from calypso.errors import CalypsoError
from calypso.ingest.parsers import detect_and_parse
from testkit import hostile_files

FILES = [
    "epub/epub_purvis_poetry.epub",
    "email/fake-email-attachment.eml",
    "email/fake-email-attachment.msg",
    "email/email-no-html-content-1.eml",
]


def words(text: str) -> list[str]:
    text = re.sub(r"<!--.*?-->", "", re.sub(r"\]\([^)]*\)", "]", text.replace("’", "'").replace("‘", "'")))
    return re.findall(r"\w+(?:'\w+)*", text.lower())


def in_order_share(truth: str, ours: str) -> tuple[float, int, int]:
    expected, found = words(truth), words(ours)
    matcher = SequenceMatcher(None, expected, found, autojunk=False)
    matched = sum(block.size for block in matcher.get_matching_blocks())
    return matched / len(expected), matched, len(expected)


def timed(data: bytes, name: str, repeat: int) -> tuple[float, object]:
    detect_and_parse(data, name)  # imports and caches
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        outcome = detect_and_parse(data, name)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, outcome


def message_with(attachments: int, words: int = 0) -> bytes:
    """A message of ``attachments`` text attachments, each a sentence or ``words`` random words."""
    import random
    import string

    rng = random.Random(23)
    vocabulary = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    msg = EmailMessage(policy=default_policy)
    msg["From"], msg["To"], msg["Subject"] = "a@example.org", "b@example.org", f"{attachments} files"
    msg.set_content("Files follow.")
    for i in range(attachments):
        body = " ".join(rng.choices(vocabulary, k=words)) if words else f"File {i} body."
        msg.add_attachment(body.encode(), "application", "octet-stream", filename=f"f{i}.txt")
    return msg.as_bytes()


def nested(levels: int) -> bytes:
    msg = EmailMessage(policy=default_policy)
    msg["From"], msg["Subject"] = "a@example.org", "Level 0"
    msg.set_content("Body 0.")
    for level in range(1, levels):
        outer = EmailMessage(policy=default_policy)
        outer["From"], outer["Subject"] = "a@example.org", f"Level {level}"
        outer.set_content(f"Body {level}.")
        outer.add_attachment(msg, filename=f"level{level - 1}.eml")
        msg = outer
    return msg.as_bytes()


def long_book(chapters: int) -> bytes:
    """An EPUB 3 of ``chapters`` chapters of about 24,000 characters each (a long novel at 200)."""
    import io
    import zipfile

    ids = [f"c{i:04d}" for i in range(chapters)]
    manifest = "".join(f'<item id="{i}" href="{i}.xhtml" media-type="application/xhtml+xml"/>' for i in ids)
    spine = "".join(f'<itemref idref="{i}"/>' for i in ids)
    paragraph = "<p>" + "It was a bright cold day in April, and the clocks were striking thirteen. " * 8 + "</p>"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr(
            "META-INF/container.xml",
            '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0"><rootfiles>'
            '<rootfile full-path="c.opf" media-type="application/oebps-package+xml"/></rootfiles></container>',
        )
        zf.writestr(
            "c.opf",
            f'<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><manifest>{manifest}</manifest>'
            f"<spine>{spine}</spine></package>",
        )
        for number, item in enumerate(ids):
            body = f"<h1>Chapter {number + 1}</h1>" + paragraph * 40
            zf.writestr(f"{item}.xhtml", f'<html xmlns="http://www.w3.org/1999/xhtml"><body>{body}</body></html>')
    return buffer.getvalue()


def hostile(name: str, data: bytes, filename: str) -> None:
    started = time.perf_counter()
    try:
        parsed, _media = detect_and_parse(data, filename)
        outcome = f"parsed: {len(parsed.pages)} pages, {len(parsed.text):,} chars"
    except CalypsoError as exc:
        outcome = f"{exc.status} {exc.code}"
    print(f"{name:32} {len(data):>11,} B  {1000 * (time.perf_counter() - started):8.1f} ms  {outcome}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--raw-markup",
        action="store_true",
        help="give the EPUB chapters to the HTML parser as they are (no <header>/<time> renaming), for comparison",
    )
    args = parser.parse_args()
    if args.raw_markup:
        from calypso.ingest.parsers import epub

        epub._readable_markup = lambda data: data  # type: ignore[assignment]
    root = data_dir() / "ingestion-docs-more"

    print(f"{'file':40} {'bytes':>9} {'parse ms':>9} {'chars':>7} {'pages':>5} {'headings':>8}  type")
    for relative in FILES:
        data = (root / relative).read_bytes()
        ms, (parsed, media_type) = timed(data, Path(relative).name, args.repeat)  # type: ignore[misc]
        print(
            f"{relative:40} {len(data):>9,} {ms:>9.2f} {len(parsed.text):>7,} {len(parsed.pages):>5} "
            f"{len(parsed.headings):>8}  {media_type}"
        )
        if relative.endswith(".epub"):
            truth = (root / "groundtruth" / "epub_purvis_poetry.epub.md").read_text(encoding="utf-8")
            share, matched, total = in_order_share(truth, parsed.text)
            book = parsed
    print(f"\nEPUB ground truth: {matched:,} of {total:,} words found in order = {share:.4f}")
    print("EPUB chapters (level-1 headings):", ", ".join(h.title for h in book.headings if h.level == 1))

    started = time.perf_counter()
    parsed, _media = detect_and_parse(long_book(200), "long.epub")
    print(
        f"synthetic EPUB, 200 chapters: {len(parsed.text):,} chars, {len(parsed.headings)} chapter headings "
        f"in {time.perf_counter() - started:.2f} s"
    )

    print("\nbad input")
    hostile("eml, 500 attachments", message_with(500), "many.eml")
    hostile("eml, 40 nested messages", nested(40), "deep.eml")
    hostile("epub zip bomb (300 MB inflated)", hostile_files.epub_zip_bomb(300), "bomb.epub")
    hostile("epub zip bomb (50 MB, ratio)", hostile_files.epub_zip_bomb(50), "bomb.epub")
    hostile("garbage named .eml", bytes(range(1, 256)) * 50, "junk.eml")
    hostile("truncated msg", (root / "email/fake-email-attachment.msg").read_bytes()[:3000], "cut.msg")
    big = message_with(500, words=13_000)
    before = peak_rss_mb()
    hostile("eml, 500 attachments of 75 KB", big, "big.eml")
    print(f"\npeak RSS of this process: {before:.0f} MB before the last case, {peak_rss_mb():.0f} MB after it")


if __name__ == "__main__":
    main()
