"""A website: the pages its sitemap lists (with ``lastmod``) and/or those reached by same-site links from a
start page, to a depth and a page limit, as robots.txt allows.

A page the sitemap dates as before is not fetched at all; any other known page is asked for conditionally
(If-None-Match / If-Modified-Since) and a 304 keeps it. HTML goes through the ingest pipeline's cleaner;
linked PDFs and Office files are documents too. A 404 or 410 removes a page; any other failure keeps it as
it was and is reported. A page's links are kept with it, so a page that did not change still leads on.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterator
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import lxml.html
from lxml import etree

from calypso.sources.model import ConnectorOptions, Fetched, Found, Gone, ItemFailed, Known, NotModified, Scan
from calypso.sources.web_fetch import USER_AGENT, Http, robots, sitemap_pages

MAX_LINKS_PER_PAGE = 500
MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # the sitemap protocol's own limit per file
DOCUMENT_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "text/plain",
        "text/markdown",
        "application/pdf",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    }
)
# Links to these are never documents: not fetched at all.
_NOT_DOCUMENTS = (
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".svg",
    ".webp",
    ".ico",
    ".css",
    ".js",
    ".zip",
    ".gz",
    ".mp4",
    ".mp3",
)


def page_links(base: str, data: bytes) -> list[str]:
    """The page's http(s) links, absolute, without fragments, at most ``MAX_LINKS_PER_PAGE``."""
    try:
        tree = lxml.html.fromstring(data)
    except (etree.ParserError, ValueError):
        return []
    links: list[str] = []
    for href in tree.xpath("//a/@href"):
        url = urldefrag(urljoin(base, str(href).strip())).url
        if url.startswith(("http://", "https://")) and url not in links:
            links.append(url)
            if len(links) >= MAX_LINKS_PER_PAGE:
                break
    return links


class WebsiteConnector:
    def __init__(self, settings: dict[str, Any], options: ConnectorOptions) -> None:
        self.start: str = settings["url"]
        self.sitemap = bool(settings["sitemap"])
        self.follow = bool(settings["follow_links"])
        self.max_depth = int(settings["max_depth"])
        self.max_pages = int(settings["max_pages"])
        self.rate = float(settings["requests_per_second"])
        self.options = options
        self.site = urlsplit(self.start).netloc.lower()

    def same_site(self, url: str) -> bool:
        return urlsplit(url).netloc.lower() == self.site and not urlsplit(url).path.lower().endswith(_NOT_DOCUMENTS)

    def scan(self, known: dict[str, Known], scan: Scan) -> Iterator[Found]:
        http = Http(self.options.allow_private, self.options.timeout, self.rate)
        try:
            yield from self._scan(http, known, scan)
        finally:
            http.close()

    def _scan(self, http: Http, known: dict[str, Known], scan: Scan) -> Iterator[Found]:
        rules = robots(http, self.start)
        delay = rules.crawl_delay(USER_AGENT)
        if delay:
            http.interval = max(http.interval, float(delay))
        frontier: deque[tuple[str, int, str | None]] = deque()
        if self.sitemap:
            limit = min(MAX_SITEMAP_BYTES, self.options.max_bytes)
            listed = sitemap_pages(http, self.start, self.max_pages, limit, scan)
            frontier.extend((url, 0, lastmod) for url, lastmod in listed if self.same_site(url))
        else:
            frontier.append((self.start, 0, None))
        queued = {url for url, _, _ in frontier}
        count = 0
        while frontier:
            url, depth, lastmod = frontier.popleft()
            if not rules.can_fetch(USER_AGENT, url):
                continue  # disallowed now: not seen, so a page kept before is removed
            count += 1
            if count > self.max_pages:
                scan.error(url, f"More than {self.max_pages:,} pages (max_pages): the rest were not read.")
                return

            def follow(links: list[str], depth: int = depth) -> None:
                if not self.follow or depth >= self.max_depth:
                    return
                for link in links:
                    if link not in queued and self.same_site(link):
                        queued.add(link)
                        frontier.append((link, depth + 1, None))

            version = f"lastmod:{lastmod}" if lastmod else None
            before = known.get(url)
            if before is not None and version is not None and before.version == version:
                follow(before.state.get("links", []))  # unchanged, not fetched: its kept links lead on
            yield Found(url, version, self._loader(http, url, version, follow))

    def _loader(self, http: Http, url: str, version: str | None, follow: Any) -> Any:
        def load(known: Known | None) -> Fetched | NotModified:
            headers = {}
            if known is not None:
                if known.state.get("etag"):
                    headers["If-None-Match"] = known.state["etag"]
                if known.state.get("last_modified"):
                    headers["If-Modified-Since"] = known.state["last_modified"]
            response = http.get(url, self.options.max_bytes, headers)
            if response.status == 304 and known is not None:
                follow(known.state.get("links", []))
                return NotModified(known.state)
            if response.status in (404, 410):
                raise Gone(url)
            if response.status != 200:
                raise ItemFailed(f"The server answered HTTP {response.status}.")
            media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if media_type not in DOCUMENT_TYPES:
                raise Gone(url)  # an image or an archive behind a link: not a document, nothing to keep
            links = (
                page_links(response.url, response.content)
                if media_type in ("text/html", "application/xhtml+xml")
                else []
            )
            follow(links)
            etag, modified = response.headers.get("etag"), response.headers.get("last-modified")
            state = {"etag": etag, "last_modified": modified, "links": links}
            new_version = (
                version or (f"etag:{etag}" if etag else None) or (f"modified:{modified}" if modified else None)
            )
            new_version = new_version or "sha256:" + hashlib.sha256(response.content).hexdigest()
            return Fetched(
                response.content, response.url, new_version, media_type=media_type, source_url=response.url, state=state
            )

        return load
