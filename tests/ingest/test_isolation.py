"""Parsing runs in child processes with a time budget and a memory cap; a runaway parse costs nothing else."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from tests_support import WAIT, LiveServer, eval_data_dir, free_port

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.errors import PayloadTooLarge, UnprocessableDocument
from calypso.ingest.isolation import ParserPool


def test_a_parse_over_its_budget_is_refused_and_the_next_one_works() -> None:
    pool = ParserPool(1)
    pdf = (eval_data_dir() / "ingestion-docs/pdf/GeoTopo-komprimiert.pdf").read_bytes()
    try:
        with pytest.raises(UnprocessableDocument) as caught:
            pool.parse(pdf, "geo.pdf", None, timeout=0.005, memory_bytes=2 * 1024**3)
        assert caught.value.code == "parse_timeout" and "CALYPSO_PARSE_TIMEOUT_SECONDS" in caught.value.message
        parsed, media_type = pool.parse(pdf, "geo.pdf", None, timeout=120, memory_bytes=2 * 1024**3)
        assert media_type == "application/pdf" and len(parsed.pages) > 100
    finally:
        pool.close()


def test_a_parse_over_its_memory_cap_is_413() -> None:
    pool = ParserPool(1)
    try:
        with pytest.raises(PayloadTooLarge) as caught:
            pool.parse(b"word " * 8_000_000, "big.txt", None, timeout=120, memory_bytes=64 * 1024**2)
        assert caught.value.code == "document_too_large" and "CALYPSO_PARSE_MEMORY_BYTES" in caught.value.message
        parsed, _ = pool.parse(b"Small and fine. " * 10, "ok.txt", None, timeout=120, memory_bytes=64 * 1024**2)
        assert parsed.text.startswith("Small and fine.")
    finally:
        pool.close()


def test_errors_keep_their_status_code_and_param_across_the_process_boundary() -> None:
    pool = ParserPool(1)
    try:
        with pytest.raises(UnprocessableDocument) as caught:
            pool.parse(b"%PDF-1.7\n" + b"\x00garbage" * 100, "broken.pdf", None, timeout=60, memory_bytes=2 * 1024**3)
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
