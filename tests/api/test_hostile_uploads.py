"""Hostile uploads through the API: a clear 413/422 naming the limit, and nothing stored."""

from __future__ import annotations

from functools import partial

import httpx
import pytest
from tests_support import WAIT

from testkit import hostile_files


@pytest.mark.parametrize(
    ("name", "make", "status", "code", "setting"),
    [
        (
            "bomb.docx",
            partial(hostile_files.docx_zip_bomb, 300),
            413,
            "uncompressed_too_large",
            "CALYPSO_MAX_UNCOMPRESSED_BYTES",
        ),
        (
            "bomb.pdf",
            partial(hostile_files.pdf_flate_bomb, 100),
            422,
            "compression_ratio",
            "CALYPSO_MAX_COMPRESSION_RATIO",
        ),
        (
            "pages.pdf",
            partial(hostile_files.pdf_many_pages, 10_001),
            413,
            "too_many_pages",
            "CALYPSO_MAX_DOCUMENT_PAGES",
        ),
        (
            "scan.pdf",
            partial(hostile_files.pdf_image_only_pages, 10_000),
            413,
            "too_many_ocr_pages",
            "CALYPSO_OCR_MAX_PAGES",
        ),
        ("bomb.png", partial(hostile_files.png_bomb, 20_000), 413, "image_too_large", "CALYPSO_MAX_IMAGE_PIXELS"),
    ],
)
def test_hostile_upload_is_refused_with_the_limit_named(
    api: httpx.Client, name: str, make, status: int, code: str, setting: str
) -> None:
    response = api.post("/v1/documents", files={"file": (name, make())}, params=WAIT)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["param"] == "file" and setting in error["message"]
    assert api.get("/v1/documents").json()["data"] == []
