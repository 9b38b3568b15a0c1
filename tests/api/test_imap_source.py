"""An IMAP source against Debian's dovecot-imapd on loopback (``testkit/dovecot.py``), skipped where it is not
installed (CI installs it): TLS and STARTTLS, folders, UID versions, the password sealed and never shown, a
message over the upload limit (a real 50 MB one) never downloaded."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from postgres_support import RawDatabase
from sources_support import assert_error, counts, hits, sources_api, sync

from testkit import dovecot

__all__ = ["sources_api"]


@pytest.fixture(scope="module")
def imap() -> Iterator[dovecot.Dovecot]:
    reason = dovecot.available()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="calypso-dovecot-") as root, dovecot.Dovecot(Path(root)) as server:
        yield server


def mailbox(server: dovecot.Dovecot, **extra: object) -> dict:
    body = {"type": "imap", "namespace": "mail", "host": "127.0.0.1", "port": server.tls_port}
    body |= {"username": dovecot.USER, "password": dovecot.PASSWORD, "verify_tls": False}
    return body | extra


def test_mailbox_synced_by_uid(
    sources_api: httpx.Client, imap: dovecot.Dovecot, raw: RawDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    names = [imap.deliver(dovecot.message(f"Notice {n}", f"The lynx{n} notice about the hearing.")) for n in range(4)]
    imap.deliver(dovecot.message("Filed", "The ocelot filing sits in another folder."), folder="Archive")
    created = sources_api.post("/v1/sources", json=mailbox(imap, folders=["INBOX", "Archive"]))
    assert created.status_code == 201, created.text
    source = created.json()
    assert source["has_secret"] is True and "password" not in source["settings"]
    assert dovecot.PASSWORD not in created.text
    assert dovecot.PASSWORD not in str(raw.execute("SELECT settings, secret FROM sources"))

    assert counts(sync(sources_api, source["id"])) == (5, 0, 0, 0, 0)
    assert hits(sources_api, "lynx2", "mail") and hits(sources_api, "ocelot", "mail")

    imap.expunge(names[0])
    imap.deliver(dovecot.message("Notice 9", "The margay notice arrived later."))
    assert counts(sync(sources_api, source["id"])) == (1, 0, 1, 4, 0)
    assert hits(sources_api, "margay", "mail") and not hits(sources_api, "lynx0", "mail")
    assert dovecot.PASSWORD not in sources_api.get(f"/v1/sources/{source['id']}").text
    assert dovecot.PASSWORD not in caplog.text


def test_starttls_and_a_50_mb_message(sources_api: httpx.Client, imap: dovecot.Dovecot) -> None:
    imap.deliver(dovecot.message("Huge", "x" * (50 * 1024 * 1024)), folder="Big")
    imap.deliver(dovecot.message("Small", "The serval note is small."), folder="Big")
    body = mailbox(imap, port=imap.port, security="starttls", folders=["Big"], namespace="big")
    source = sources_api.post("/v1/sources", json=body).json()
    last = sync(sources_api, source["id"])
    assert (last["added"], last["failed"]) == (1, 1), last
    assert "upload limit" in last["errors"][0]["message"]
    assert hits(sources_api, "serval", "big")


def test_wrong_password_is_reported_not_echoed(sources_api: httpx.Client, imap: dovecot.Dovecot) -> None:
    body = mailbox(imap, password="hunter2-wrong", namespace="nope")
    source = sources_api.post("/v1/sources", json=body).json()
    last = sync(sources_api, source["id"])
    assert last["status"] == "failed" and "log in" in last["errors"][0]["message"]
    assert "hunter2-wrong" not in sources_api.get("/v1/sources").text


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"host": "imap.example.org", "username": "u"}, "password"),
        ({"host": "bad host!", "username": "u", "password": "p"}, "host"),
        ({"host": "imap.example.org", "username": "u", "password": "p", "security": "none"}, "security"),
        ({"host": "imap.example.org", "username": "u", "password": "p", "folders": []}, "folders"),
        ({"host": "imap.example.org", "username": "u", "password": "p", "since": "yesterday"}, "since"),
    ],
)
def test_bad_imap_input(sources_api: httpx.Client, body: dict, param: str) -> None:
    assert_error(sources_api.post("/v1/sources", json={"type": "imap", "namespace": "m", **body}), 400, param)
