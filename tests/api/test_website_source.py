"""A website source against a real site on loopback (``calypso.sources.fake_site``) that changes between syncs:
sitemap with lastmod, links, robots.txt, conditional requests, a linked Office file, 404/410, and the hostile
cases (a redirect loop, a page that never ends, nested sitemap indexes, a sitemap of a million URLs)."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import docx
import httpx
import pytest
from sources_support import assert_error, counts, hits, sources_api, sync

from calypso.config import Settings
from calypso.sources.fake_site import FakeSite

__all__ = ["sources_api"]
DAY = 86400.0


@pytest.fixture
def site() -> Iterator[FakeSite]:
    with FakeSite() as served:
        yield served


def page(title: str, text: str, links: tuple[str, ...] = ()) -> str:
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p>{anchors}</body></html>"


def handbook_docx(text: str) -> bytes:
    document = docx.Document()
    document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def add(api: httpx.Client, body: dict) -> str:
    response = api.post(
        "/v1/sources", json={"type": "website", "namespace": "site", "requests_per_second": 500, **body}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_sitemap_site_resynced_fetches_only_what_changed(sources_api: httpx.Client, site: FakeSite) -> None:
    then = time.time() - 10 * DAY
    for n in range(8):
        site.put(f"/page{n}", page(f"Page {n}", f"The heron{n} ordinance governs district {n}."), when=then)
    site.put("/private/secret", page("Secret", "The cormorant memo."), when=then)  # robots.txt disallows it
    source = add(sources_api, {"url": f"{site.url}/sitemap.xml"})
    first = sync(sources_api, source)
    assert counts(first) == (8, 0, 0, 0, 0), first
    assert hits(sources_api, "heron3", "site") == [f"{site.url}/page3"]
    assert not hits(sources_api, "cormorant", "site")

    site.reset_counts()
    site.put("/page1", page("Page 1", "The egret ordinance replaced the old one."))
    site.remove("/page2")  # gone from the sitemap
    second = sync(sources_api, source)
    assert counts(second) == (0, 1, 1, 6, 0), second
    assert dict(site.fetched) == {"/page1": 1}  # the unchanged pages were not fetched at all
    assert hits(sources_api, "egret", "site") == [f"{site.url}/page1"]
    assert hits(sources_api, "heron1", "site") == [] and hits(sources_api, "heron2", "site") == []


def test_linked_pages_are_asked_for_conditionally(sources_api: httpx.Client, site: FakeSite) -> None:
    site.put(
        "/", page("Home", "The kestrel welcome.", ("/a", "/b", "/files/handbook.docx", "https://elsewhere.example/"))
    )
    site.put("/a", page("A", "The plover article.", ("/a/deeper",)))
    site.put("/a/deeper", page("Deeper", "The avocet appendix.", ("/a/deeper/still",)))
    site.put("/a/deeper/still", page("Too deep", "The stilt page is past the depth limit."))
    site.put("/b", page("B", "The curlew bulletin."))
    docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    site.put("/files/handbook.docx", handbook_docx("The godwit handbook for members."), docx_type)
    source = add(sources_api, {"url": f"{site.url}/", "max_depth": 2})
    assert counts(sync(sources_api, source)) == (5, 0, 0, 0, 0)
    assert hits(sources_api, "godwit", "site") == [f"{site.url}/files/handbook.docx"]
    assert not hits(sources_api, "stilt", "site")

    site.reset_counts()
    site.put("/b", page("B", "The sandpiper bulletin replaced the curlew one."))
    site.remove("/a/deeper", gone=True)  # 410
    second = sync(sources_api, source)
    assert counts(second) == (0, 1, 1, 3, 0), second
    assert dict(site.fetched) == {"/b": 1}  # the others answered 304 Not Modified
    assert hits(sources_api, "sandpiper", "site") and not hits(sources_api, "avocet", "site")


def test_hostile_site_is_bounded_and_reported(sources_api: httpx.Client, site: FakeSite, settings: Settings) -> None:
    settings.crawl_timeout_seconds = 1.0
    settings.max_upload_bytes = 2 * 1024 * 1024
    site.put("/", page("Home", "The ibis index.", ("/loop/a", "/endless", "/missing")))
    source = add(sources_api, {"url": f"{site.url}/"})
    started = time.monotonic()
    last = sync(sources_api, source)
    assert time.monotonic() - started < 20
    assert (last["added"], last["failed"]) == (1, 2), last
    messages = " ".join(e["message"] for e in last["errors"])
    assert "redirect" in messages.lower() and ("bytes" in messages or "longer than" in messages)

    bomb = add(sources_api, {"url": f"{site.url}/bomb.xml"})
    last = sync(sources_api, bomb)
    assert not last["complete"] and "nested deeper" in " ".join(e["message"] for e in last["errors"])

    huge = add(sources_api, {"url": f"{site.url}/huge-sitemap.xml"})
    last = sync(sources_api, huge)
    assert last["status"] == "failed" and last["added"] == 0 and not last["complete"]
    assert (
        sources_api.get("/v1/documents", params={"namespace": "site"}).json()["data"][0]["filename"] == f"{site.url}/"
    )
    assert sources_api.get("/healthz").status_code == 200


def test_private_addresses_are_refused_without_the_setting(
    sources_api: httpx.Client, site: FakeSite, settings: Settings
) -> None:
    settings.crawl_allow_private = False
    site.put("/", page("Home", "The loopback page."))
    source = add(sources_api, {"url": f"{site.url}/"})
    last = sync(sources_api, source)
    assert last["status"] == "completed" and last["failed"] == 1 and last["added"] == 0
    assert "CALYPSO_CRAWL_ALLOW_PRIVATE" in last["errors"][0]["message"]
    assert site.requests == 0


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"url": "ftp://example.org/"}, "url"),
        ({"url": "not a url"}, "url"),
        ({}, "url"),
        ({"url": "http://example.org/", "max_pages": 0}, "max_pages"),
        ({"url": "http://example.org/", "requests_per_second": "fast"}, "requests_per_second"),
    ],
)
def test_bad_website_input(sources_api: httpx.Client, body: dict, param: str) -> None:
    assert_error(sources_api.post("/v1/sources", json={"type": "website", "namespace": "s", **body}), 400, param)


def test_requests_to_one_host_keep_the_rate(site: FakeSite) -> None:
    from calypso.sources.web_fetch import Http

    site.put("/", page("Home", "The rate page."))
    http = Http(allow_private=True, timeout=5, requests_per_second=10)
    started = time.monotonic()
    statuses = [http.get(f"{site.url}/", 10_000).status for _ in range(4)]
    http.close()
    assert statuses == [200] * 4 and time.monotonic() - started >= 0.3  # 4 requests at 10/s: 3 intervals
