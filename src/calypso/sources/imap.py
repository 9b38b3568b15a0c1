"""An IMAP mailbox over TLS (IMAPS) or STARTTLS: the chosen folders' messages since a date, one document each.

A message is identified by its folder, the folder's UIDVALIDITY and its UID; IMAP never changes a message
under a UID, so a known one is never fetched again, and one no longer listed (expunged, moved) is removed.
A folder whose UIDVALIDITY changed is a new folder: its messages are brought again. The message's size
is asked before its body: one over the upload limit is reported and never downloaded. Each message goes
through the e-mail parser (``ingest/parsers/eml.py``), its attachments parts of its document. The server's
address is checked by the crawl's SSRF rule; the password is never logged.
"""

from __future__ import annotations

import contextlib
import datetime
import imaplib
import re
import ssl
from collections.abc import Iterator
from typing import Any

from calypso.errors import UpstreamError
from calypso.sources.hosts import check_host
from calypso.sources.model import ConnectorOptions, Fetched, Found, ItemFailed, Known, NotModified, Scan

_SIZE = re.compile(rb"UID (\d+) RFC822\.SIZE (\d+)|RFC822\.SIZE (\d+) UID (\d+)")


class ImapConnector:
    def __init__(self, settings: dict[str, Any], secrets: dict[str, str], options: ConnectorOptions) -> None:
        self.settings = settings
        self._password = secrets.get("password", "")
        self.options = options

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        if not self.settings["verify_tls"]:  # a server with a self-signed certificate, by the operator's choice
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _check_host(self, host: str) -> None:
        port = self.settings["port"]
        check_host(host, port, allow_private=self.options.allow_private, param="host", action="connect to")

    def _connect(self) -> imaplib.IMAP4:
        host, port = self.settings["host"], self.settings["port"]
        self._check_host(host)
        timeout = self.options.timeout
        try:
            if self.settings["security"] == "tls":
                client: imaplib.IMAP4 = imaplib.IMAP4_SSL(host, port, ssl_context=self._context(), timeout=timeout)
            else:
                client = imaplib.IMAP4(host, port, timeout=timeout)
                client.starttls(self._context())
            client.login(self.settings["username"], self._password)
        except (OSError, imaplib.IMAP4.error) as exc:
            raise UpstreamError(f"Cannot log in to {host}:{port}: {_said(exc)}") from exc
        return client

    def scan(self, known: dict[str, Known], scan: Scan) -> Iterator[Found]:
        client = self._connect()
        try:
            budget = int(self.settings["max_messages"])
            for folder in self.settings["folders"]:
                for found in self._folder(client, folder, scan):
                    if budget <= 0:
                        scan.error(folder, f"More than {self.settings['max_messages']:,} messages: the rest not read.")
                        return
                    budget -= 1
                    yield found
        finally:
            with contextlib.suppress(OSError, imaplib.IMAP4.error):
                client.logout()

    def _folder(self, client: imaplib.IMAP4, folder: str, scan: Scan) -> Iterator[Found]:
        try:
            status, _ = client.select(f'"{folder}"', readonly=True)
            if status != "OK":
                raise imaplib.IMAP4.error(f"cannot open folder {folder!r}")
            validity = (client.response("UIDVALIDITY")[1] or [b"0"])[0]
            criteria = ["ALL"]
            if self.settings.get("since"):
                since = datetime.date.fromisoformat(self.settings["since"]).strftime("%d-%b-%Y")
                criteria = ["SINCE", since]
            _, found = client.uid("SEARCH", *criteria)
            uids = (found[0] or b"").split()
            sizes = self._sizes(client, uids)
        except (OSError, imaplib.IMAP4.error) as exc:
            scan.complete = False  # nothing is removed on a folder's account when it could not be listed
            scan.error(folder, f"Cannot list the folder: {_said(exc)}")
            return
        for uid in uids:
            external = f"{folder}/{validity.decode()}/{uid.decode()}"
            yield Found(external, uid.decode(), self._loader(client, folder, uid.decode(), sizes.get(uid, 0)))

    def _sizes(self, client: imaplib.IMAP4, uids: list[bytes]) -> dict[bytes, int]:
        sizes: dict[bytes, int] = {}
        for start in range(0, len(uids), 500):
            chunk = b",".join(uids[start : start + 500]).decode()
            _, lines = client.uid("FETCH", chunk, "(RFC822.SIZE)")
            for line in lines:
                raw = line[0] if isinstance(line, tuple) else line
                match = _SIZE.search(raw or b"")
                if match:
                    uid, size = (match.group(1), match.group(2)) if match.group(1) else (match.group(4), match.group(3))
                    sizes[uid] = int(size)
        return sizes

    def _loader(self, client: imaplib.IMAP4, folder: str, uid: str, size: int) -> Any:
        def load(known: Known | None) -> Fetched | NotModified:
            if size > self.options.max_bytes:
                raise ItemFailed(f"A message of {size:,} bytes, over the upload limit of {self.options.max_bytes:,}.")
            try:
                _, parts = client.uid("FETCH", uid, "(BODY.PEEK[])")
            except (OSError, imaplib.IMAP4.error) as exc:
                raise ItemFailed(f"Cannot fetch it: {_said(exc)}") from exc
            data = next((part[1] for part in parts if isinstance(part, tuple) and len(part) > 1), None)
            if not data:
                raise ItemFailed("The server sent no message (expunged meanwhile?).")
            if len(data) > self.options.max_bytes:
                raise ItemFailed(f"Larger than the upload limit of {self.options.max_bytes:,} bytes.")
            metadata = {"folder": folder[:512], "uid": int(uid)}
            return Fetched(bytes(data), f"{folder}-{uid}.eml", uid, media_type="message/rfc822", metadata=metadata)

        return load


def _said(exc: BaseException) -> str:
    """The server's or the socket's words, one line (they never hold the password: imaplib sends it, not echoes)."""
    text = exc.args[0] if exc.args else exc
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(str(text).split())[:300] or type(exc).__name__
