"""HEAD on every GET a link can point at (issue 44): link checkers, chat unfurlers and uptime monitors send HEAD
before (or instead of) GET, and a 405 reads to them as a broken link. The viewer and the raw content have their
own tests (test_passage_viewer.py, test_file_ranges.py)."""

from __future__ import annotations

import httpx

from calypso.services.ingestion import IngestionService, Upload

TEXT = b"# Fees\n\nThe yearly fee is forty euros, payable in March.\n"


def _same_but_the_body(head: httpx.Response, get: httpx.Response) -> None:
    assert head.status_code == get.status_code
    assert head.content == b""
    assert head.headers["content-type"] == get.headers["content-type"]
    assert head.headers["content-length"] == str(len(get.content))


def test_head_answers_as_get_does_on_the_links_a_client_is_given(api, kb: IngestionService) -> None:
    document = kb.ingest(Upload(TEXT, "fees.md")).document
    paths = [
        f"/v1/files/{document.file_id}",  # the file object
        f"/v1/documents/{document.id}",  # the same file in the documents dialect
        "/",  # the playground, as a shared link to the server
        "/playground",
        "/healthz",  # uptime monitors
        "/readyz",
    ]
    for path in paths:
        head, get = api.head(path), api.get(path)
        assert get.status_code == 200, path
        _same_but_the_body(head, get)
    redirect = api.head("/playground/", follow_redirects=False)
    assert redirect.status_code == 307 and redirect.headers["location"] == "/playground"


def test_head_on_a_missing_file_is_a_404_as_get_is(api) -> None:
    for path in ("/v1/files/file-doesnotexist", "/v1/documents/doesnotexist"):
        head, get = api.head(path), api.get(path)
        assert head.status_code == get.status_code == 404 and head.content == b""
