"""A real website on loopback for tests and benchmarks: pages that change, move and disappear between syncs.

``FakeSite`` serves ``pages`` (path -> (media type, bytes)) with an ETag and a Last-Modified per page,
honours If-None-Match / If-Modified-Since with 304, lists every page in ``/sitemap.xml`` with its
``lastmod`` and serves ``robots.txt``; paths in ``gone`` answer 410, others 404. It also serves the hostile
cases a website source must survive: ``/loop/a`` and ``/loop/b`` redirect to each other, ``/endless`` never
ends, ``/bomb.xml`` is a sitemap index whose indexes nest forever, ``/huge-sitemap.xml`` lists a million
URLs. ``fetched`` counts the pages answered with a body (200), by path.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HTML = "text/html; charset=utf-8"


class FakeSite:
    def __init__(self, robots: str = "User-agent: *\nDisallow: /private/\n") -> None:
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.modified: dict[str, float] = {}
        self.gone: set[str] = set()
        self.robots = robots
        self.fetched: Counter[str] = Counter()
        self.requests = 0
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.site = self  # type: ignore[attr-defined]
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    def put(self, path: str, body: str | bytes, media_type: str = HTML, when: float | None = None) -> None:
        """Add or change a page (``when``: its modification time, now by default)."""
        with self.lock:
            self.pages[path] = (media_type, body.encode() if isinstance(body, str) else body)
            self.modified[path] = when if when is not None else time.time()
            self.gone.discard(path)

    def remove(self, path: str, gone: bool = False) -> None:
        with self.lock:
            self.pages.pop(path, None)
            if gone:
                self.gone.add(path)

    def sitemap(self) -> bytes:
        entries = "".join(
            f"<url><loc>{self.url}{path}</loc><lastmod>{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(self.modified[path]))}"
            f"</lastmod></url>"
            for path in sorted(self.pages)
        )
        return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'.encode()

    def reset_counts(self) -> None:
        with self.lock:
            self.fetched.clear()
            self.requests = 0


class _Handler(BaseHTTPRequestHandler):
    @property
    def site(self) -> FakeSite:
        site: FakeSite = getattr(self.server, "site")  # noqa: B009 - set by FakeSite
        return site

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?")[0]
        with self.site.lock:
            self.site.requests += 1
        if path == "/robots.txt":
            return self._send(200, self.site.robots.encode(), {"Content-Type": "text/plain"})
        if path == "/sitemap.xml":
            return self._send(200, self.site.sitemap(), {"Content-Type": "application/xml"})
        if path.startswith("/loop/"):
            return self._send(302, headers={"Location": "/loop/b" if path == "/loop/a" else "/loop/a"})
        if path == "/endless":
            return self._endless()
        if path.startswith("/bomb"):
            return self._bomb(path)
        if path == "/huge-sitemap.xml":
            return self._huge_sitemap()
        return self._page(path)

    def _page(self, path: str) -> None:
        with self.site.lock:
            page = self.site.pages.get(path)
            modified = self.site.modified.get(path, 0.0)
        if page is None:
            return self._send(410 if path in self.site.gone else 404, b"not here", {"Content-Type": "text/plain"})
        media_type, body = page
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        if self.headers.get("If-None-Match") == etag:
            return self._send(304, headers={"ETag": etag})
        with self.site.lock:
            self.site.fetched[path] += 1
        headers = {"Content-Type": media_type, "ETag": etag, "Last-Modified": formatdate(modified, usegmt=True)}
        return self._send(200, body, headers)

    def _endless(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", HTML)
        self.end_headers()
        try:
            while True:
                self.wfile.write(b"<p>" + b"more " * 2000 + b"</p>")
        except OSError:
            return

    def _bomb(self, path: str) -> None:
        depth = path.count("/x")
        children = "".join(
            f"<sitemap><loc>{self.site.url}{path}/x{n}</loc></sitemap>" for n in range(3 if depth < 8 else 0)
        )
        body = f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{children}</sitemapindex>'
        self._send(200, body.encode(), {"Content-Type": "application/xml"})

    def _huge_sitemap(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.end_headers()
        try:
            self.wfile.write(b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">')
            for n in range(1_000_000):
                self.wfile.write(f"<url><loc>{self.site.url}/p{n}</loc></url>".encode())
            self.wfile.write(b"</urlset>")
        except OSError:
            return
