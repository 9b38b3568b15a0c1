"""Time and peak memory of hostile inputs: quadratic text, decompression bombs, floods, a trickling page.

    .venv/bin/python -m bench.hostile_inputs [--src PATH] [--only NAME ...] [--timeout 600]

Each case runs in its own Python process (so peak RSS is the case's own) against the source tree
``--src`` (default: this checkout's src/); point it at an older tree (``git archive main src | tar -x
-C /tmp/old``) for the "before" figures in docs/security.md. A case that passes ``--timeout`` seconds
is stopped and reported as such. The hostile files come from tests/hostile_files.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# name -> code run in the child; it sets ``result`` (a short string). Timing starts at the START line
# (after building the hostile file) or at the top.
CASES: dict[str, str] = {
    "md-heading-40k-spaces": 'detect_and_parse(b"# a" + b" " * 40_000 + b"b", "h.md"); result = "parsed"',
    "md-heading-1m-spaces": 'detect_and_parse(b"# a" + b" " * 1_000_000 + b"b", "h.md"); result = "parsed"',
    "html-pre-200k-spaces": (
        'html = b"<html><body><article><h1>T</h1><p>Some paragraph text long enough to be main content.</p>'
        '<pre>a" + b" " * 200_000 + b"b</pre></article></body></html>"\n'
        'detect_and_parse(html, "p.html"); result = "parsed"'
    ),
    "composer-60k-spaces": (
        "from calypso.citations.composer import AnswerComposer\n"
        'c = AnswerComposer([], None); c.feed("Answer" + " " * 60_000 + "done."); c.flush(); result = "composed"'
    ),
    "composer-20k-markers": (
        "from calypso.citations.composer import AnswerComposer\n"
        "from calypso.citations.grounded import Quote, Source\n"
        "from calypso.models import Chunk, Document, Passage\n"
        'doc = Document("d", "file-d", "default", "general", "a.txt", "text/plain", 1, "h", 0, 1, 1)\n'
        'source = Source(1, Passage(doc, Chunk(0, "passage", 0, 7, 1, 1, ("1",)), 1.0))\n'
        'quote = Quote("passage", 0, 7, 0, 7, 1, "1", 0.9, True)\n'
        "c = AnswerComposer([source], lambda segment, source: quote)\n"
        'for i in range(20_000): c.feed(f"Claim number {i} is here [1]. ")\n'
        'c.flush(); result = f"{len(c.finish().segments)} segments"'
    ),
    "chunk-1m-whitespace": (
        "from calypso.ingest.chunking import chunk_document\n"
        "from calypso.models import Page, ParsedDocument\n"
        't = "x" + " " * 1_000_000 + "y"; result = f"{len(chunk_document(ParsedDocument(t, [Page(1, \'1\', 0, len(t))])))} chunks"'
    ),
    "md-250k-headings": (
        "from calypso.ingest.chunking import chunk_document\n"
        "data = hostile_files.markdown_heading_flood(250_000)\nSTART\n"
        'doc, _ = detect_and_parse(data, "h.md")\n'
        'result = f"{len(chunk_document(doc, 1000, 150))} chunks"'
    ),
    "docx-zip-bomb-3gb": "data = hostile_files.docx_zip_bomb(3000)\nSTART\nresult = attempt(data, 'bomb.docx')",
    "docx-7m-paragraphs": "data = hostile_files.docx_paragraph_flood(7_000_000)\nSTART\nresult = attempt(data, 'flood.docx')",
    "pdf-flate-bomb-1gb": "data = hostile_files.pdf_flate_bomb(1000)\nSTART\nresult = attempt(data, 'bomb.pdf')",
    "pdf-hex-flate-bomb-1gb": "data = hostile_files.pdf_hex_flate_bomb(1000)\nSTART\nresult = attempt(data, 'hex.pdf')",
    "pdf-20k-pages": "data = hostile_files.pdf_many_pages(20_000)\nSTART\nresult = attempt(data, 'pages.pdf')",
    "crawl-trickle-1b-per-0.2s": "result = trickle_fetch(timeout=1.0, body_bytes=100)",
}

_PRELUDE = """
import resource, socket, threading, time
from testkit import hostile_files
from calypso.ingest.parsers import detect_and_parse

def attempt(data, name):
    try:
        doc, _ = detect_and_parse(data, name)
        return f"accepted: {len(doc.text):,} chars, {len(doc.pages):,} pages ({len(data):,} byte file)"
    except Exception as exc:
        return f"{type(exc).__name__} {getattr(exc, 'status', '')} {getattr(exc, 'code', '')} ({len(data):,} byte file)"

def trickle_fetch(timeout, body_bytes):
    from calypso.ingest.crawl import fetch_page
    listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(1)
    def serve():
        conn, _ = listener.accept(); conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: text/plain\\r\\nContent-Length: %d\\r\\n\\r\\n" % body_bytes)
        try:
            for _ in range(body_bytes):
                conn.sendall(b"x"); time.sleep(0.2)
        except OSError:
            pass
        conn.close()
    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    try:
        page = fetch_page(url, timeout=timeout, max_bytes=10**6, allow_private=True)
        return f"fetched {len(page.content)} bytes despite a {timeout:g} s timeout"
    except Exception as exc:
        return f"{type(exc).__name__} ({timeout:g} s timeout)"
"""

_RUN = """
{code}
elapsed = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
children = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({{"seconds": elapsed, "cpu": usage.ru_utime + usage.ru_stime, "peak_mb": usage.ru_maxrss / 1024,
                  "children_peak_mb": children.ru_maxrss / 1024, "result": result}}))
"""


def run(name: str, src: Path, timeout: float) -> dict:
    case = CASES[name] if "START" in CASES[name] else "START\n" + CASES[name]
    code = "import json\n" + _PRELUDE + _RUN.format(code=case.replace("START", "start = time.perf_counter()"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(REPO)])}  # testkit from the repository root
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"result": f"stopped after {timeout:g} s"}
    if done.returncode != 0:
        return {"result": f"process died (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, default=REPO / "src", help="source tree to import calypso from")
    parser.add_argument("--only", nargs="*", choices=sorted(CASES), help="cases to run (default: all)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a case is stopped")
    args = parser.parse_args()
    print(f"calypso from {args.src}; python {sys.version.split()[0]}")
    print(f"{'case':28} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'child MB':>8}  result")
    for name in args.only or CASES:
        started = time.perf_counter()
        row = run(name, args.src, args.timeout)
        wall = row.get("seconds", time.perf_counter() - started)
        cpu, peak, child = (row.get(k) for k in ("cpu", "peak_mb", "children_peak_mb"))
        figures = f"{wall:8.2f} {cpu:8.2f} {peak:8.0f} {child:8.0f}" if cpu is not None else f"{wall:8.2f} {'':>26}"
        print(f"{name:28} {figures}  {row['result']}", flush=True)


if __name__ == "__main__":
    main()
