"""The crawler's SSRF guard and its deadline, against real sockets on loopback."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpcore
import pytest

from calypso.errors import InvalidRequest, UpstreamError, UpstreamTimeout
from calypso.ingest.crawl import embedded_ipv4, fetch_page, refusal

REFUSED = [
    "127.0.0.1",
    "10.1.2.3",
    "169.254.169.254",  # cloud metadata
    "100.64.0.1",  # carrier-grade NAT
    "0.0.0.0",
    "255.255.255.255",
    "224.0.0.1",  # multicast: is_global is True for these
    "233.252.0.1",
    "239.255.255.250",
    "::1",
    "fe80::1",
    "fc00::1",
    "fec0::1",  # deprecated site-local: is_global is True
    "ff0e::1",  # global-scope multicast
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
    "64:ff9b::e000:1",  # NAT64 of multicast 224.0.0.1
    "64:ff9b:1::a00:1",  # local-use NAT64 prefix
    "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "2002:c0a8:101::1",  # 6to4 of 192.168.1.1
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::127.0.0.1",  # IPv4-compatible
    "::a9fe:a9fe",
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo
]
ALLOWED = ["8.8.8.8", "93.184.215.14", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8"]


@pytest.mark.parametrize("text", REFUSED)
def test_non_public_and_non_unicast_addresses_are_refused(text: str) -> None:
    assert refusal(ipaddress.ip_address(text)) is not None


@pytest.mark.parametrize("text", ALLOWED)
def test_public_unicast_addresses_pass_including_nat64_and_6to4_of_public_ones(text: str) -> None:
    assert refusal(ipaddress.ip_address(text)) is None


def test_embedded_ipv4() -> None:
    assert embedded_ipv4(ipaddress.ip_address("64:ff9b::c000:221")) == ipaddress.ip_address("192.0.2.33")
    assert embedded_ipv4(ipaddress.ip_address("2002:c000:221::")) == ipaddress.ip_address("192.0.2.33")
    assert embedded_ipv4(ipaddress.ip_address("2606:4700::1111")) is None
    assert embedded_ipv4(ipaddress.ip_address("::1")) is None


@pytest.mark.parametrize("text", ["64:ff9b::7f00:1", "2002:a9fe:a9fe::1", "224.0.0.251", "::ffff:10.0.0.1"])
def test_a_host_resolving_to_a_refused_form_is_not_fetched(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    family = socket.AF_INET6 if ":" in text else socket.AF_INET
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [(family, socket.SOCK_STREAM, 6, "", (text, 80))])
    with pytest.raises(InvalidRequest) as info:
        fetch_page("http://innocent.example/", timeout=5, max_bytes=1000, allow_private=False)
    assert info.value.code == "private_address" and info.value.param == "url"
    assert text in info.value.message and "CALYPSO_CRAWL_ALLOW_PRIVATE" in info.value.message


# -- loopback servers ---------------------------------------------------------------------------


@contextmanager
def raw_server(handle) -> Iterator[tuple[int, list[str]]]:
    """A TCP server on loopback; ``handle(conn)`` serves each connection. Yields (port, request lines)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    requests: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # timeout: look at the stop flag again
                continue
            with conn:
                requests.append(conn.recv(65536).decode("latin-1").split("\r\n", 1)[0])
                with contextlib.suppress(OSError):  # the client hung up: what a deadline does
                    handle(conn, stop)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], requests
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def trickle(payload: bytes, interval: float = 0.2):
    def handle(conn: socket.socket, stop: threading.Event) -> None:
        for byte in payload:
            if stop.is_set():
                return
            conn.sendall(bytes([byte]))
            time.sleep(interval)

    return handle


BODY = b"One byte at a time, this page takes twenty seconds to arrive." + b"." * 40
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(BODY)


def test_a_trickled_body_is_cut_at_the_deadline() -> None:
    def handle(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(HEADERS)
        trickle(BODY)(conn, stop)

    with raw_server(handle) as (port, requests), pytest.raises(UpstreamTimeout) as info:
        fetch_page(f"http://127.0.0.1:{port}/slow", timeout=1.0, max_bytes=10_000, allow_private=True)
    assert requests == ["GET /slow HTTP/1.1"]
    assert "CALYPSO_CRAWL_TIMEOUT_SECONDS" in info.value.message and info.value.param == "url"


def test_trickled_headers_are_cut_at_the_deadline() -> None:
    with raw_server(trickle(HEADERS + BODY)) as (port, _), pytest.raises(UpstreamTimeout):
        fetch_page(f"http://127.0.0.1:{port}/", timeout=1.0, max_bytes=10_000, allow_private=True)


def test_the_deadline_covers_redirects_too() -> None:
    # Each hop answers just inside the per-read timeout; together they pass the deadline.
    def handle(conn: socket.socket, stop: threading.Event) -> None:
        time.sleep(0.4)
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 0\r\n\r\n")

    # The deadline, or "too many redirects" if it were per hop.
    with raw_server(handle) as (port, requests), pytest.raises(UpstreamError):
        fetch_page(f"http://127.0.0.1:{port}/", timeout=1.0, max_bytes=10_000, allow_private=True)
    assert len(requests) <= 3


def test_the_address_checked_is_the_address_connected_to(monkeypatch: pytest.MonkeyPatch) -> None:
    # DNS rebinding: a resolver that answers a public address first and loopback afterwards.
    answers = ["8.8.8.8", "127.0.0.1"]
    real_resolve, real_connect = socket.getaddrinfo, httpcore.SyncBackend.connect_tcp
    connected: list[str] = []

    def rebinding(host, port, *args, **kwargs):
        if host != "rebind.example":
            return real_resolve(host, port, *args, **kwargs)
        address = answers.pop(0) if len(answers) > 1 else answers[0]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    def connect(self, host, port, *args, **kwargs):
        connected.append(host)
        if host == "8.8.8.8":  # stay off the network: the public address "does not answer"
            raise httpcore.ConnectError("test: no route to the public address")
        return real_connect(self, host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", connect)

    def handle(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(HEADERS + BODY)

    with raw_server(handle) as (port, requests), pytest.raises(UpstreamError):
        fetch_page(f"http://rebind.example:{port}/", timeout=2.0, max_bytes=10_000, allow_private=False)
    assert connected == ["8.8.8.8"] and requests == []  # the checked address, never loopback


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com:99999/",
        "http://example.com:abc/",
        "http://example.com:0/",
        "http://[::1/",
        "http://[not-an-address]/",
        "http://" + "a" * 64 + ".example/",
        "http://" + ".".join(["abcdefghij"] * 30) + "/",
        "http://exa mple.com/",
        "http://ex\x00ample.com/",
        "http:///path-only",
        "file:///etc/passwd",
    ],
)
def test_malformed_urls_are_invalid_requests(url: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        fetch_page(url, timeout=1.0, max_bytes=1000, allow_private=True)
    assert info.value.param == "url" and info.value.status == 400


def test_a_resolver_that_never_answers_is_cut_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # The system resolver has no timeout of its own; a hung DNS server stands behind this one.
    released = threading.Event()

    def hung_resolver(*args: object, **kwargs: object) -> list:
        released.wait(10)
        return []

    monkeypatch.setattr(socket, "getaddrinfo", hung_resolver)
    try:
        # Waiting out the resolver would end in "no address" (an UpstreamError), not the deadline.
        with pytest.raises(UpstreamTimeout) as info:
            fetch_page("http://calypso-test.invalid/", timeout=0.5, max_bytes=10_000, allow_private=True)
        assert info.value.param == "url" and "CALYPSO_CRAWL_TIMEOUT_SECONDS" in info.value.message
    finally:
        released.set()
