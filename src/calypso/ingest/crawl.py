"""Fetch one web page for ingestion, refusing what would make us an SSRF proxy.

Two guards sit below httpx, in the network backend, so no path around them exists:

* every connection goes to an address resolved and checked in the same step (no second lookup an
  attacker's DNS could answer differently), and IPv6 forms that embed an IPv4 address (NAT64, 6to4,
  IPv4-mapped, IPv4-compatible) are judged by that IPv4 address;
* every socket read and write is bounded by one deadline for the whole fetch, redirects included,
  so a server that trickles a byte at a time cannot keep a crawl alive past its timeout.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import socket
import ssl
import time
import typing
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx

from calypso.errors import InvalidRequest, PayloadTooLarge, UnsupportedMediaType, UpstreamError, UpstreamTimeout
from calypso.ingest.formats import crawled_types

TEXT_TYPES = crawled_types()  # HTML, plain text and Markdown, by the table of formats
_MAX_REDIRECTS = 5
_ALLOW_HINT = "Set CALYPSO_CRAWL_ALLOW_PRIVATE=true to allow private and loopback addresses."

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# IPv6 prefixes whose last 32 bits are an IPv4 address that the packet really goes to.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052 well-known prefix
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215 local-use: the operator's own network
_COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated IPv4-compatible (::a.b.c.d)


@dataclass
class FetchedPage:
    url: str  # final URL after redirects
    content: bytes
    media_type: str


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (NAT64, 6to4, IPv4-mapped or -compatible), if any."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):  # :: and ::1 are themselves
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: IPAddress) -> str | None:
    """Why crawling ``address`` is refused ("private", "multicast"...), or None when it is public unicast."""
    inner = embedded_ipv4(address)
    if inner is not None:
        reason = refusal(inner)
        return f"{reason} (embedded in {address})" if reason else None
    if address.is_multicast:
        return "multicast"
    if isinstance(address, ipaddress.IPv6Address) and (address.is_site_local or address in _NAT64_LOCAL):
        return "private"
    if not address.is_global:  # loopback, RFC 1918, link-local, CGNAT, reserved, broadcast, unspecified...
        return "private"
    return None


def _check_url(url: str) -> str:
    """The URL's host name; InvalidRequest (param "url") for anything that is not a fetchable http(s) URL."""
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for "host:99999" and "host:abc"
    except ValueError as exc:  # also "http://[::1" (broken IPv6 literal)
        raise InvalidRequest(f"Cannot crawl {url!r}: it is not a valid URL ({exc}).", param="url") from exc
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidRequest(f"Cannot crawl {url!r}: only absolute http(s) URLs are accepted.", param="url")
    if port == 0:
        raise InvalidRequest(f"Cannot crawl {url!r}: port 0 is not a valid port.", param="url")
    if not _is_ip_literal(host):
        _check_host_name(url, host)
    try:
        httpx.URL(url)  # what httpx will refuse later (odd characters in the host, ...)
    except httpx.InvalidURL as exc:
        raise InvalidRequest(f"Cannot crawl {url!r}: it is not a valid URL ({exc}).", param="url") from exc
    return host


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _check_host_name(url: str, host: str) -> None:
    try:
        ascii_host = host.encode("idna").decode("ascii")  # the form DNS sees; checks label lengths too
    except UnicodeError as exc:
        raise InvalidRequest(
            f"Cannot crawl {url!r}: {host[:80]!r} is not a valid host name ({exc}).", param="url"
        ) from exc
    if len(ascii_host.rstrip(".")) > 253:
        raise InvalidRequest(
            f"Cannot crawl {url!r}: the host name is longer than 253 characters, the DNS limit.", param="url"
        )


_RESOLVERS = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="crawl-dns")


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def timeout(self, timeout: float | None, error: type[Exception]) -> float:
        """The per-operation timeout cut to what is left of the fetch; ``error`` once nothing is left."""
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise error(f"the fetch took longer than its {self.seconds:g} s deadline")
        return remaining if timeout is None else min(timeout, remaining)


class _GuardedStream(httpcore.NetworkStream):
    """A connection whose every read, write and TLS handshake ends by the fetch's deadline."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: _Deadline) -> None:
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._deadline.timeout(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._deadline.timeout(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        timeout = self._deadline.timeout(timeout, httpcore.ConnectTimeout)
        return _GuardedStream(self._stream.start_tls(ssl_context, server_hostname, timeout), self._deadline)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolves each host once, refuses non-public addresses, connects to the checked address."""

    def __init__(self, deadline: _Deadline, allow_private: bool) -> None:
        self._inner = httpcore.SyncBackend()
        self._deadline = deadline
        self._allow_private = allow_private

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        error: httpcore.ConnectError | None = None
        for address in self._addresses(host, port):
            try:
                timeout = self._deadline.timeout(timeout, httpcore.ConnectTimeout)
                stream = self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:  # try the host's next address
                error = exc
                continue
            return _GuardedStream(stream, self._deadline)
        raise error or httpcore.ConnectError(f"no address to connect to for {host}")

    def _addresses(self, host: str, port: int) -> list[str]:
        # getaddrinfo has no timeout of its own: resolve in a helper thread, within the fetch's deadline.
        pending = _RESOLVERS.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
        try:
            infos = pending.result(self._deadline.timeout(None, httpcore.ConnectTimeout))
        except concurrent.futures.TimeoutError:
            pending.cancel()
            raise httpcore.ConnectTimeout(f"resolving {host} took longer than the fetch's deadline") from None
        except (socket.gaierror, UnicodeError) as exc:
            raise InvalidRequest(f"Cannot resolve host {host!r}: {exc}.", param="url") from exc
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not self._allow_private:
            for text in addresses:
                reason = refusal(ipaddress.ip_address(text))
                if reason is not None:
                    raise InvalidRequest(
                        f"Refusing to crawl {host}: it resolves to the {reason} address {text}, "
                        f"which is not a public unicast address. {_ALLOW_HINT}",
                        param="url",
                        code="private_address",
                    )
        return addresses

    def connect_unix_socket(self, *args: typing.Any, **kwargs: typing.Any) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("crawling never uses unix sockets")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _transport(deadline: _Deadline, allow_private: bool) -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport()
    # httpx has no parameter for the network backend; its pool takes one. Same settings otherwise.
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(), network_backend=_GuardedBackend(deadline, allow_private)
    )
    return transport


def fetch_page(url: str, *, timeout: float, max_bytes: int, allow_private: bool) -> FetchedPage:
    """GET ``url`` (following up to 5 redirects, each checked) and return its bytes if they are text.

    ``timeout`` bounds the whole fetch, redirects and a slowly trickled body included.
    """
    deadline = _Deadline(timeout)
    client = httpx.Client(
        transport=_transport(deadline, allow_private),
        timeout=timeout,
        follow_redirects=False,
        headers={"User-Agent": "calypso-crawler/0.1"},
    )
    with client:
        for _ in range(_MAX_REDIRECTS + 1):
            _check_url(url)
            try:
                with client.stream("GET", url) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    if response.status_code >= 400:
                        raise UpstreamError(
                            f"Fetching {url} failed: the server answered HTTP {response.status_code}.",
                            param="url",
                            code=f"http_{response.status_code}",
                        )
                    media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                    if media_type not in TEXT_TYPES:
                        raise UnsupportedMediaType(
                            f"{url} returned {media_type or 'no content type'}; crawling accepts only "
                            f"{', '.join(TEXT_TYPES)}. Upload other files through POST /v1/documents.",
                            param="url",
                        )
                    content = bytearray()
                    for piece in response.iter_bytes():
                        content.extend(piece)
                        if len(content) > max_bytes:
                            raise PayloadTooLarge(
                                f"{url} is larger than {max_bytes:,} bytes (setting CALYPSO_MAX_UPLOAD_BYTES).",
                                param="url",
                            )
                    return FetchedPage(str(response.url), bytes(content), media_type)
            except httpx.TimeoutException as exc:
                raise UpstreamTimeout(
                    f"Fetching {url} timed out: the whole fetch may take {timeout:g} s "
                    "(setting CALYPSO_CRAWL_TIMEOUT_SECONDS).",
                    param="url",
                ) from exc
            except httpx.HTTPError as exc:
                raise UpstreamError(f"Fetching {url} failed: {exc}.", param="url", code="fetch_failed") from exc
    raise UpstreamError(f"Fetching {url} redirected more than {_MAX_REDIRECTS} times.", param="url")


# The website source (``sources/website.py``) fetches many pages under the same guard and deadline rules.
Deadline = _Deadline
guarded_transport = _transport
check_url = _check_url
