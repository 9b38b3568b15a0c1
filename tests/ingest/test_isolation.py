"""Parsing runs in child processes with a time budget and a memory cap; a runaway parse costs nothing else."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from tests_support import WAIT, eval_data_dir

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.errors import PayloadTooLarge, UnprocessableDocument, UnsupportedMediaType
from calypso.ingest.formats import MARKDOWN, PDF, TEXT
from calypso.ingest.isolation import IN_PLACE_BYTES, ParserPool, parse_isolated, parses_in_place
from calypso.ingest.parsers import detect_media_type
from testkit.live_server import LiveServer, free_port


def test_a_parse_over_its_budget_is_refused_and_the_next_one_works() -> None:
    pool = ParserPool(1)
    pdf = (eval_data_dir() / "ingestion-docs/pdf/GeoTopo-komprimiert.pdf").read_bytes()
    try:
        with pytest.raises(UnprocessableDocument) as caught:
            pool.parse(pdf, "geo.pdf", PDF, timeout=0.005, memory_bytes=2 * 1024**3)
        assert caught.value.code == "parse_timeout" and "CALYPSO_PARSE_TIMEOUT_SECONDS" in caught.value.message
        parsed, media_type = pool.parse(pdf, "geo.pdf", PDF, timeout=120, memory_bytes=2 * 1024**3)
        assert media_type == "application/pdf" and len(parsed.pages) > 100
    finally:
        pool.close()


def test_a_parse_over_its_memory_cap_is_413() -> None:
    pool = ParserPool(1)
    try:
        with pytest.raises(PayloadTooLarge) as caught:
            pool.parse(b"word " * 8_000_000, "big.txt", TEXT, timeout=120, memory_bytes=64 * 1024**2)
        assert caught.value.code == "document_too_large" and "CALYPSO_PARSE_MEMORY_BYTES" in caught.value.message
        parsed, _ = pool.parse(b"Small and fine. " * 10, "ok.txt", TEXT, timeout=120, memory_bytes=64 * 1024**2)
        assert parsed.text.startswith("Small and fine.")
    finally:
        pool.close()


def test_errors_keep_their_status_code_and_param_across_the_process_boundary() -> None:
    pool = ParserPool(1)
    try:
        with pytest.raises(UnprocessableDocument) as caught:
            pool.parse(b"%PDF-1.7\n" + b"\x00garbage" * 100, "broken.pdf", PDF, timeout=60, memory_bytes=2 * 1024**3)
        assert caught.value.status == 422 and caught.value.param == "file"
    finally:
        pool.close()


def test_over_budget_upload_is_422_stores_nothing_and_does_not_stall_the_server(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", parse_timeout_seconds=0.005, parse_processes=2)
    pdf = (eval_data_dir() / "ingestion-docs/pdf/GeoTopo-komprimiert.pdf").read_bytes()
    with LiveServer(create_app(settings), free_port()) as server:
        health: list[int] = []

        def probe() -> None:
            health.extend(httpx.get(f"{server.url}/health", timeout=5).status_code for _ in range(5))

        prober = threading.Thread(target=probe)
        prober.start()
        response = httpx.post(f"{server.url}/v1/documents", files={"file": ("geo.pdf", pdf)}, params=WAIT, timeout=60)
        prober.join()
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "parse_timeout"
        assert health == [200] * 5
        assert httpx.get(f"{server.url}/v1/documents").json()["data"] == []


def test_the_deprecated_pdf_memory_setting_still_sets_the_one_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CALYPSO_PARSE_MEMORY_BYTES", raising=False)
    monkeypatch.setenv("CALYPSO_MAX_PARSE_MEMORY_BYTES", str(1 << 30))
    assert Settings().parse_memory_bytes == 1 << 30
    monkeypatch.setenv("CALYPSO_PARSE_MEMORY_BYTES", str(3 << 30))  # the current name wins
    assert Settings().parse_memory_bytes == 3 << 30
    monkeypatch.delenv("CALYPSO_PARSE_MEMORY_BYTES")
    monkeypatch.setenv("CALYPSO_MAX_PARSE_MEMORY_BYTES", "0")  # meant "PDFs in the server": ignored
    assert Settings().parse_memory_bytes == Settings.model_fields["parse_memory_bytes"].default


def _in_place(data: bytes, filename: str, claimed: str | None = None) -> bool:
    """``parses_in_place`` of the type detected at submit."""
    return parses_in_place(data, filename, detect_media_type(data, filename, claimed))


def test_only_small_utf8_text_and_markdown_without_front_matter_parse_in_place() -> None:
    assert _in_place(b"Plain words.", "a.txt")
    assert _in_place("Caf\u00e9 \u5317\u4eac, UTF-8.".encode(), "a.txt", "text/plain")
    assert _in_place(b"# Title\n\nBody.", "a.md")
    assert _in_place(b"README text", "README", "application/octet-stream")
    assert not _in_place("Caf\u00e9 in Windows-1252.".encode("cp1252"), "a.txt")  # charset detection
    assert not _in_place("\ufeffUTF-16 with its BOM.".encode("utf-16"), "a.txt")
    assert not _in_place(b"---\ntitle: T\n---\n# Title\n", "a.md")  # YAML front matter
    assert not _in_place(b"\xef\xbb\xbf---\ntitle: T\n---\n", "a.md")
    assert not _in_place(b"x" * (IN_PLACE_BYTES + 1), "a.txt")
    assert not _in_place(b"<html><body>Hi</body></html>", "a.html")
    assert not _in_place(b"%PDF-1.7\n...", "a.txt", "text/plain")  # PDF bytes whatever the label
    assert not _in_place(b"a,b\n1,2\n", "a.csv")
    assert not _in_place(b"  \n ", "a.txt")  # empty: refused by the child, as every format
    assert not parses_in_place(b"{}", "data.json", "application/json")  # a type not in the table: refused


SAMPLES = [
    (b"Plain words.\r\nSecond line.\n", "a.txt", None),
    ("# Caf\u00e9\n\nBody \x07with a bell.\n\n## Two\n\n```\n# not a heading\n```\n".encode(), "a.md", None),
    (b"\xef\xbb\xbfWith a UTF-8 byte-order mark.", "a.txt", None),
    (b"Labelled plain, named .md\n# Heading", "notes.md", "text/plain"),
]


@pytest.mark.parametrize(("data", "filename", "claimed"), SAMPLES)
def test_a_parse_in_place_gives_what_the_child_gives(data: bytes, filename: str, claimed: str | None) -> None:
    media_type = detect_media_type(data, filename, claimed)
    pool = ParserPool(1)
    try:
        assert parses_in_place(data, filename, media_type)
        in_place = parse_isolated(data, filename, media_type, timeout=60, memory_bytes=2 * 1024**3, processes=1)
        assert in_place == pool.parse(data, filename, media_type, timeout=60, memory_bytes=2 * 1024**3)
    finally:
        pool.close()


def test_a_binary_text_upload_is_refused_in_place_as_in_the_child() -> None:
    data = b"\x00\x01\x02 binary \x00" * 50
    pool = ParserPool(1)
    try:
        with pytest.raises(UnsupportedMediaType) as in_place:
            parse_isolated(data, "data.txt", TEXT, timeout=60, memory_bytes=2 * 1024**3, processes=1)
        with pytest.raises(UnsupportedMediaType) as in_child:
            pool.parse(data, "data.txt", TEXT, timeout=60, memory_bytes=2 * 1024**3)
        assert in_place.value.message == in_child.value.message
    finally:
        pool.close()


def test_a_yaml_bomb_in_front_matter_is_stopped_in_the_child() -> None:
    # 534 bytes whose aliases expand to 10^9 values as metadata: why Markdown with front matter keeps its child.
    lines = ["---", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    data = "\n".join([*lines, "---", "", "# Title", "", "Body."]).encode()
    assert not parses_in_place(data, "bomb.md", MARKDOWN)
    with pytest.raises((UnprocessableDocument, PayloadTooLarge)) as caught:
        parse_isolated(data, "bomb.md", MARKDOWN, timeout=1, memory_bytes=512 * 1024**2, processes=1)
    assert caught.value.code in ("parse_timeout", "document_too_large", "parse_memory")
