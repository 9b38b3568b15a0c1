"""Synced sources (issue 46): a first sync's speed, and what a second sync with a few changes reads and replaces.

    flock /tmp/cpu-timing.lock .venv/bin/python -m bench.source_sync
    flock /tmp/cpu-timing.lock .venv/bin/python -m bench.source_sync --pages 100 --files 200 --messages 50

Three sources, each into its own namespace of one fresh SQLite knowledge base (keyword search, no embedding
model): a website of ``--pages`` pages listed by its sitemap with ``lastmod`` (a real HTTP server on loopback,
``calypso.sources.fake_site``; 1,000 requests/s allowed so that the rate limit is not what is measured), a
folder of ``--files`` Markdown files, and, where Debian's dovecot-imapd is installed, a mailbox of
``--messages`` messages (``testkit/dovecot.py``, IMAPS on loopback). Then 10 items change and 5 go (a
mailbox: 10 arrive and 5 are expunged, as messages never change under their UID) and each source syncs
again. Printed per source: the first sync's items/s; the second's counts, the items it read (each item
fetched or opened, counted by wrapping the connector), for the website the HTTP requests and pages fetched
with a body (the server's count), and the passages replaced: passages that left with the old documents
and entered with the new, checked against the documents that changed (every other document kept its id).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from calypso.config import Settings
from calypso.services import Services, open_services
from calypso.sources.fake_site import FakeSite
from calypso.sources.model import Found, Known, Scan

WORDS = (
    "court agency ruling notice hearing permit district council budget tariff appeal statute clause schedule "
    "filing deadline review board member policy section annex report minutes decision order registry fee"
).split()


def text(seed: int, words: int = 350) -> str:
    rng = random.Random(seed)
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return f"Item {seed} keyword{seed}. {body}."


class Counted:
    """A connector whose items' loads are counted: what a sync really read."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.loads = inner, 0

    def scan(self, known: dict[str, Known], scan: Scan) -> Iterator[Found]:
        for found in self.inner.scan(known, scan):
            load = found.load

            def counted(before: Known | None, load: Any = load) -> Any:
                self.loads += 1
                return load(before)

            yield Found(found.external_id, found.version, counted, found.pending)


def counting(services: Services) -> list[Counted]:
    made: list[Counted] = []
    build = services.sources.syncer._connector

    def wrapped(source: Any) -> Counted:
        made.append(Counted(build(source)))
        return made[-1]

    services.sources.syncer._connector = wrapped
    return made


def documents(services: Services, namespace: str) -> dict[str, tuple[str, int]]:
    """external id -> (document id, passages) of a namespace."""
    found: dict[str, tuple[str, int]] = {}
    after = None
    while True:
        page = services.documents.list_documents(namespace, 100, after)
        for doc in page.items:
            found[str(doc.metadata.get("external_id"))] = (doc.id, doc.chunk_count)
        if not page.has_more:
            return found
        after = page.items[-1].id


def report(name: str, unit: str, n: int, services: Services, source_id: str, change: Any, made: list[Counted]) -> None:
    namespace = services.sources.get(source_id).namespace
    started = time.perf_counter()
    first = services.sources.sync(source_id, wait=True).last_sync or {}
    elapsed = time.perf_counter() - started
    print(
        f"{name}: first sync of {n} {unit}: {elapsed:.2f} s, {first['added'] / elapsed:.1f} {unit}/s "
        f"({first['added']} added, {first['failed']} failed, {first['passages_added']} passages)"
    )
    before = documents(services, namespace)
    changed, removed = change()
    started = time.perf_counter()
    second = services.sources.sync(source_id, wait=True).last_sync or {}
    elapsed = time.perf_counter() - started
    after = documents(services, namespace)
    kept = [e for e in before if e not in changed and e not in removed]
    assert all(after[e][0] == before[e][0] for e in kept), "an unchanged document was replaced"
    expected_out = sum(before[e][1] for e in (*changed, *removed) if e in before)
    expected_in = sum(after[e][1] for e in after if e in changed or e not in before)  # changed, or new
    assert second["passages_removed"] == expected_out and second["passages_added"] == expected_in, second
    counts = ", ".join(f"{second[k]} {k}" for k in ("added", "updated", "removed", "unchanged", "failed"))
    print(
        f"{name}: second sync: {elapsed:.2f} s; {counts}; {made[-1].loads} {unit} read; passages replaced: "
        f"{second['passages_removed']} out, {second['passages_added']} in (exactly the changed documents')"
    )


def website(services: Services, pages: int) -> None:
    made = counting(services)
    with FakeSite() as site:
        then = time.time() - 86400
        for n in range(pages):
            site.put(
                f"/page{n}",
                f"<html><title>Page {n}</title><body><h1>Page {n}</h1><p>{text(n)}</p></body></html>",
                when=then,
            )
        body = {"type": "website", "namespace": "site", "url": f"{site.url}/sitemap.xml", "requests_per_second": 1000}
        body["max_pages"] = pages + 10
        source = services.sources.create(body)

        def change() -> tuple[list[str], list[str]]:
            site.reset_counts()
            step = max(2, pages // 10)
            changed = [f"/page{n}" for n in range(0, pages, step)][:10]
            removed = [f"/page{n}" for n in range(1, pages, step)][:5]
            for path in changed:
                site.put(path, f"<html><body><p>{text(10_000 + int(path[5:]))}</p></body></html>")
            for path in removed:
                site.remove(path)
            return [site.url + p for p in changed], [site.url + p for p in removed]

        report("website", "pages", pages, services, source.id, change, made)
        print(
            f"website: second sync: {site.requests} HTTP requests, {sum(site.fetched.values())} pages fetched "
            "with a body (robots.txt and the sitemap are the rest)"
        )


def folder(services: Services, root: Path, files: int) -> None:
    made = counting(services)
    old = time.time() - 3600
    for n in range(files):
        path = root / f"d{n // 100}" / f"file{n}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# File {n}\n\n{text(n)}\n")
        os.utime(path, (old, old))
    source = services.sources.create({"type": "folder", "namespace": "folder", "path": str(root)})

    def change() -> tuple[list[str], list[str]]:
        step = max(2, files // 10)
        changed = [f"d{n // 100}/file{n}.md" for n in range(0, files, step)][:10]
        removed = [f"d{n // 100}/file{n}.md" for n in range(1, files, step)][:5]
        for k, relative in enumerate(changed):
            (root / relative).write_text(f"# Changed\n\n{text(20_000 + k)}\n")
            os.utime(root / relative, (old + 60, old + 60))
        for relative in removed:
            (root / relative).unlink()
        return changed, removed

    report("folder", "files", files, services, source.id, change, made)


def mailbox(services: Services, messages: int) -> None:
    from testkit import dovecot

    reason = dovecot.available()
    if reason is not None:
        print(f"mailbox: not measured: {reason}")
        return
    made = counting(services)
    with tempfile.TemporaryDirectory(prefix="calypso-bench-dovecot-") as root, dovecot.Dovecot(Path(root)) as server:
        names = [server.deliver(dovecot.message(f"Notice {n}", text(n))) for n in range(messages)]
        body = {"type": "imap", "namespace": "mail", "host": "127.0.0.1", "port": server.tls_port, "verify_tls": False}
        source = services.sources.create(body | {"username": dovecot.USER, "password": dovecot.PASSWORD})

        def change() -> tuple[list[str], list[str]]:
            by_subject = {d.title: str(d.metadata.get("external_id")) for d in _all(services, "mail")}
            for n in range(10):
                server.deliver(dovecot.message(f"New {n}", text(30_000 + n)))
            for name in names[:5]:
                server.expunge(name)
            return [], [by_subject[f"Notice {n}"] for n in range(5)]

        report("mailbox", "messages", messages, services, source.id, change, made)


def _all(services: Services, namespace: str) -> list[Any]:
    return list(services.documents.list_documents(namespace, 100_000).items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="calypso-bench-sources-") as tmp:
        root = Path(tmp)
        (root / "shared").mkdir()
        settings = Settings(
            home=root / "home", crawl_allow_private=True, source_roots=str(root / "shared"), embedding_model="none"
        )
        services = open_services(settings)
        try:
            website(services, args.pages)
            folder(services, root / "shared", args.files)
            mailbox(services, args.messages)
        finally:
            services.close()
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


if __name__ == "__main__":
    main()
