"""Scans and images through the real upload API: a recognised word is found by search, marked OCR, on its page."""

from __future__ import annotations

import io

import pytest
from PIL import Image
from tests_support import WAIT

from calypso.ingest import ocr
from testkit import hostile_files

MORE = "ingestion-docs-more"


@pytest.fixture
def scans(openai_client, data_dir):
    """A vector store with the scanned PDF and a two-page TIFF (a blank page, then the upside-down phototest)."""
    photo = Image.open(data_dir / MORE / "images/phototest-rotated-180.png").convert("L")
    tiff = io.BytesIO()
    Image.new("L", (200, 100), 255).save(tiff, "TIFF", save_all=True, append_images=[photo])
    store = openai_client.vector_stores.create(name="Scans")
    files = {}
    for name, data in [
        ("ocr_test.pdf", (data_dir / MORE / "scanned_pdf/ocr_test.pdf").read_bytes()),
        ("phototest.tiff", tiff.getvalue()),
    ]:
        file = openai_client.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=(name, data))
        assert file.status == "completed" and file.last_error is None, file
        files[name] = file
    return store, files


def _top(http, store_id: str, query: str) -> dict:
    hits = http.post(f"/v1/vector_stores/{store_id}/search", json={"query": query}).json()["data"]
    return hits[0]


def test_recognised_words_are_found_with_modality_ocr_and_their_page(openai_client, http, scans) -> None:
    store, files = scans
    hit = _top(http, store.id, "Docling bundles Markdown")
    assert hit["filename"] == "ocr_test.pdf" and "Docling bundles PDF document conversion" in hit["content"][0]["text"]
    ours = hit["_aicore"]  # Calypso's attributes (``attributes`` are the file's own, as in OpenAI)
    assert ours["modality"] == "ocr" and ours["locator_label"] == "p. 1"
    assert 0.5 < ours["ocr_confidence"] <= 1.0  # the recogniser's own certainty, for a reader weighing a quote
    hit = _top(http, store.id, "quick brown dog lazy fox")
    assert hit["filename"] == "phototest.tiff" and "jumped over the" in hit["content"][0]["text"]
    ours = hit["_aicore"]
    assert ours["modality"] == "ocr" and ours["page_label"] == "2" and ours["label"] == "phototest.tiff (p. 2)"

    response = openai_client.responses.create(
        model="calypso-rag-agent",
        input="What does Docling bundle?",
        tools=[{"type": "file_search", "vector_store_ids": [store.id]}],
        include=["file_search_call.results"],
    )
    search = next(item for item in response.output if item.type == "file_search_call")
    result = next(r for r in search.results if r.filename == "ocr_test.pdf")
    assert result.attributes["modality"] == "ocr" and result.attributes["page_label"] == "1"
    assert 0.5 < result.attributes["ocr_confidence"] <= 1.0


def test_failing_ocr_leaves_a_failed_file_with_last_error_and_nothing_stored(
    openai_client, http, settings, data_dir, monkeypatch
) -> None:
    settings.parse_processes = 0  # parse in this process, where the engine is made to be missing
    monkeypatch.setattr(ocr, "_engines", {})
    monkeypatch.setitem(__import__("sys").modules, "faster_paddle", None)
    store = openai_client.vector_stores.create(name="Broken OCR")
    photo = (data_dir / MORE / "images/phototest-rotated-180.png").read_bytes()
    file = openai_client.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=("photo.png", photo))
    assert file.status == "failed" and file.last_error is not None
    assert "OCR is not available" in file.last_error.message and "faster-paddle" in file.last_error.message
    assert http.post(f"/v1/vector_stores/{store.id}/search", json={"query": "quick brown dog"}).json()["data"] == []
    document = http.get(f"/v1/documents/{file.document_id}").json() if hasattr(file, "document_id") else None
    if document is not None:
        assert document["chunk_count"] == 0 and document["status"] == "failed"


def test_hostile_image_upload_is_refused_and_nothing_stored(api) -> None:
    response = api.post("/v1/documents", files={"file": ("bomb.png", hostile_files.png_bomb(20_000))}, params=WAIT)
    assert response.status_code == 413 and response.json()["error"]["code"] == "image_too_large"
    assert api.get("/v1/documents").json()["data"] == []


def test_a_chinese_scan_is_found_by_its_own_words(api) -> None:
    """Issue 40: a scanned Chinese page (Noto Serif CJK SC) is read by PP-OCRv6 and searched by a Chinese phrase."""
    from pathlib import Path

    from PIL import ImageDraw, ImageFont

    font_file = Path("/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc")
    if not font_file.is_file():
        if __import__("os").environ.get("CI"):
            pytest.fail("fonts-noto-cjk is not installed (apt-get install fonts-noto-cjk)")
        pytest.skip("fonts-noto-cjk is not installed (apt-get install fonts-noto-cjk)")
    font = ImageFont.truetype(str(font_file), 30, index=2)
    lines = ["广茂铁路是中国广东省内的一条铁路，", "由广东广茂铁路有限责任公司管理运营，", "全长约三百六十五公里。"]
    page = Image.new("L", (800, 300), 255)
    for row, line in enumerate(lines):
        ImageDraw.Draw(page).text((40, 40 + 70 * row), line, font=font, fill=0)
    png = io.BytesIO()
    page.save(png, "PNG")
    document = api.post("/v1/documents", files={"file": ("scan-zh.png", png.getvalue())}, params=WAIT).json()
    assert document["status"] == "completed" and document["metadata"]["ocr_engine"] == "PP-OCRv6 tiny", document
    found = api.post("/v1/search", json={"query": "广茂铁路由哪家公司管理运营？"}).json()["data"]
    assert found and found[0]["attributes"]["document_id"] == document["id"]
    assert found[0]["attributes"]["modality"] == "ocr" and "管理运营" in found[0]["content"][0]["text"]


def test_a_missing_tesseract_is_a_clear_422_and_nothing_stored(api, settings, monkeypatch) -> None:
    from calypso.ingest import ocr_tesseract

    settings.parse_processes = 0  # parse in this process, where the binary is made to be missing
    settings.ocr_engine = "tesseract"
    monkeypatch.setattr(ocr, "_engines", {})
    monkeypatch.setattr(ocr_tesseract, "BINARY", "/nonexistent/tesseract")
    ocr_tesseract.installed_languages.cache_clear()
    try:
        page = Image.new("L", (400, 100), 255)
        png = io.BytesIO()
        page.save(png, "PNG")
        response = api.post("/v1/documents", files={"file": ("scan.png", png.getvalue())}, params=WAIT)
    finally:
        ocr_tesseract.installed_languages.cache_clear()
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "ocr_unavailable"
    assert "apt-get install tesseract-ocr" in error["message"] and error["param"] == "file"
    assert api.get("/v1/documents").json()["data"] == []
