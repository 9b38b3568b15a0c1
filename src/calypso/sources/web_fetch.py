"""HTTP for the website source: the single-page crawl's SSRF guard, conditional requests, a rate per host,
bounded bodies and redirects; robots.txt; sitemaps (indexes, ``lastmod``) read within fixed bounds.

Every connection goes through ``ingest/crawl.py``'s guarded transport (addresses resolved once and checked,
private ones refused unless ``CALYPSO_CRAWL_ALLOW_PRIVATE``), and every request has the crawl timeout as
its deadline, a slowly trickled body included. A sitemap is parsed without resolving entities (no entity
bombs), and sitemap indexes are followed to a fixed depth and count, so nested indexes naming millions of
URLs stop at the bounds and are reported.
"""

from __future__ import annotations

import time
import urllib.robotparser
import zlib
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx
from lxml import etree

from calypso.errors import CalypsoError
from calypso.ingest.crawl import Deadline, check_url, guarded_transport
from calypso.sources.model import ItemFailed, Scan

USER_AGENT = "calypso-crawler/0.1"
MAX_REDIRECTS = 5
MAX_SITEMAP_DEPTH = 3  # an index of indexes of sitemaps, no deeper
MAX_SITEMAPS = 50
MAX_ROBOTS_BYTES = 512 * 1024
_SITEMAP_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"


@dataclass
class Response:
    status: int
    url: str  # after redirects
    headers: httpx.Headers
    content: bytes


class Http:
    """One sync's HTTP client: guarded, rate-limited per host, each request bounded in time and size."""

    def __init__(self, allow_private: bool, timeout: float, requests_per_second: float) -> None:
        self._deadline = Deadline(timeout)
        self._timeout = timeout
        self._client = httpx.Client(
            transport=guarded_transport(self._deadline, allow_private),
            timeout=timeout,
            follow_redirects=False,
            headers={"User-Agent": USER_AGENT},
        )
        self.interval = 1.0 / requests_per_second
        self._next: dict[str, float] = {}
        self.requests = 0

    def close(self) -> None:
        self._client.close()

    def _pace(self, host: str) -> None:
        now = time.monotonic()
        due = self._next.get(host, now)
        if due > now:
            time.sleep(due - now)
        self._next[host] = max(due, now) + self.interval

    def get(self, url: str, max_bytes: int, headers: dict[str, str] | None = None) -> Response:
        """GET with up to 5 redirects, each checked; ItemFailed for what cannot be read (refused, timed out,
        too large, redirected in circles). A 304 and error statuses are returned, not raised."""
        for _ in range(MAX_REDIRECTS + 1):
            try:
                check_url(url)
            except CalypsoError as exc:
                raise ItemFailed(exc.message) from exc
            self._pace(urlsplit(url).netloc)
            self._deadline.end = time.monotonic() + self._timeout
            self.requests += 1
            try:
                with self._client.stream("GET", url, headers=headers or {}) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    content = bytearray()
                    if response.status_code == 200:
                        for piece in response.iter_bytes():
                            content.extend(piece)
                            if len(content) > max_bytes:
                                raise ItemFailed(
                                    f"Larger than {max_bytes:,} bytes (CALYPSO_MAX_UPLOAD_BYTES): skipped."
                                )
                    return Response(response.status_code, str(response.url), response.headers, bytes(content))
            except httpx.TimeoutException as exc:
                raise ItemFailed(f"Took longer than {self._timeout:g} s (CALYPSO_CRAWL_TIMEOUT_SECONDS).") from exc
            except httpx.HTTPError as exc:
                raise ItemFailed(f"The request failed: {exc}.") from exc
            except CalypsoError as exc:  # the guard's refusal (a private address) or a bad host
                raise ItemFailed(exc.message) from exc
        raise ItemFailed(f"Redirected more than {MAX_REDIRECTS} times (a redirect loop?).")


def robots(http: Http, start: str) -> urllib.robotparser.RobotFileParser:
    """The site's robots.txt rules; a site without one (or one that cannot be read) allows everything."""
    parts = urlsplit(start)
    parser = urllib.robotparser.RobotFileParser()
    try:
        response = http.get(f"{parts.scheme}://{parts.netloc}/robots.txt", MAX_ROBOTS_BYTES)
    except ItemFailed:
        response = None
    if response is None or response.status != 200:
        parser.parse([])
    else:
        parser.parse(response.content.decode("utf-8", "replace").splitlines())
    return parser


def _inflate(data: bytes, max_bytes: int) -> bytes:
    """A gzipped sitemap's bytes, refused past ``max_bytes`` (a small file can inflate to gigabytes)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = inflater.decompress(data, max_bytes + 1)
    if len(out) > max_bytes or inflater.unconsumed_tail:
        raise ItemFailed(f"The sitemap inflates to more than {max_bytes:,} bytes: not read.")
    return out


def _entries(data: bytes) -> tuple[list[tuple[str, str | None]], list[str]]:
    """(page URL, lastmod) pairs and nested sitemap URLs of one sitemap file."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise ItemFailed(f"The sitemap is not valid XML: {exc}.") from exc
    pages: list[tuple[str, str | None]] = []
    nested: list[str] = []
    for node in root:
        tag = node.tag if isinstance(node.tag, str) else ""
        loc = node.findtext(f"{_SITEMAP_NS}loc") or node.findtext("loc")
        if not loc:
            continue
        lastmod = node.findtext(f"{_SITEMAP_NS}lastmod") or node.findtext("lastmod")
        if tag.endswith("sitemap"):
            nested.append(loc.strip())
        elif tag.endswith("url"):
            pages.append((loc.strip(), lastmod.strip() if lastmod else None))
    return pages, nested


def sitemap_pages(http: Http, url: str, max_pages: int, max_bytes: int, scan: Scan) -> list[tuple[str, str | None]]:
    """The pages a sitemap (or an index of them) lists, with their ``lastmod``, at most ``max_pages``.

    ItemFailed when the first sitemap cannot be read; a nested one that cannot is reported and the listing
    marked incomplete (so nothing is removed on its account).
    """
    pages: list[tuple[str, str | None]] = []
    queue: list[tuple[str, int]] = [(url, 0)]
    fetched = 0
    while queue and len(pages) < max_pages:
        current, depth = queue.pop(0)
        if fetched >= MAX_SITEMAPS:
            scan.complete = False
            scan.error(current, f"More than {MAX_SITEMAPS} sitemap files: the rest were not read.")
            break
        fetched += 1
        try:
            response = http.get(current, max_bytes)
            if response.status != 200:
                raise ItemFailed(f"The sitemap answered HTTP {response.status}.")
            data = response.content
            if data[:2] == b"\x1f\x8b":
                data = _inflate(data, max_bytes)
            found, nested = _entries(data)
        except ItemFailed as exc:
            if current == url:
                raise
            scan.complete = False
            scan.error(current, str(exc))
            continue
        pages.extend(found[: max_pages - len(pages)])
        if len(found) > max_pages:
            scan.error(current, f"The sitemaps list more than {max_pages:,} pages (max_pages): the first kept.")
        for child in nested:
            if depth + 1 > MAX_SITEMAP_DEPTH:
                scan.complete = False
                scan.error(child, f"Sitemap indexes nested deeper than {MAX_SITEMAP_DEPTH}: not read.")
                break
            queue.append((child, depth + 1))
    return pages
