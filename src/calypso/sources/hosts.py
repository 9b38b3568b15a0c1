"""The address rule every source that connects somewhere follows: the single-page crawl's, against SSRF."""

from __future__ import annotations

import ipaddress
import socket

from calypso.errors import InvalidRequest
from calypso.ingest.crawl import refusal


def check_host(host: str, port: int | None, *, allow_private: bool, param: str, action: str) -> None:
    """Raise ``InvalidRequest`` (``param``) when ``host`` cannot be resolved, or resolves to a private or loopback
    address and ``allow_private`` is off; ``action`` says what was refused ("clone from", "connect to")."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidRequest(f"Cannot resolve host {host!r}: {exc}.", param=param) from exc
    for info in infos:
        reason = refusal(ipaddress.ip_address(info[4][0]))
        if reason is not None and not allow_private:
            raise InvalidRequest(
                f"Refusing to {action} {host}: it resolves to the {reason} address {info[4][0]}. "
                "Set CALYPSO_CRAWL_ALLOW_PRIVATE=true to allow private and loopback addresses.",
                param=param,
                code="private_address",
            )
