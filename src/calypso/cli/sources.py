"""`calypso sources add|list|sync|remove`: synced sources, here or through the server holding the data directory.

The same wire shapes as ``/v1/sources`` either way: through a running server the command calls its API;
otherwise it opens the knowledge base and runs a sync in this process. A password is read from the
environment variable ``--password-env`` names (never from the command line, where `ps` would show it).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from calypso.cli.common import command_settings
from calypso.cli.remote import ServerClient, running_server
from calypso.errors import CalypsoError


def add_source_commands(sub: Any, with_home: Callable[[argparse.ArgumentParser], argparse.ArgumentParser]) -> None:
    sources = with_home(sub.add_parser("sources", help="add, list, sync and remove synced sources"))
    commands = sources.add_subparsers(dest="sources_command", required=True)
    add = commands.add_parser("add", help="add a website, folder, git repository or IMAP mailbox")
    add.add_argument("type", choices=("website", "folder", "git", "imap"))
    add.add_argument("--namespace", default=None, help="namespace its documents go to (default: general)")
    add.add_argument("--url", help="website: start page or sitemap.xml; git: clone URL or local path")
    add.add_argument("--path", help="folder: a directory on the server under CALYPSO_SOURCE_ROOTS")
    add.add_argument("--branch", help="git: branch (default main)")
    add.add_argument("--include", action="append", help="glob of files to take (repeatable)")
    add.add_argument("--exclude", action="append", help="glob of files to leave out (repeatable)")
    add.add_argument("--host", help="imap: server host")
    add.add_argument("--port", type=int, help="imap: port (993 for tls, 143 for starttls)")
    add.add_argument("--security", choices=("tls", "starttls"), help="imap: tls (default) or starttls")
    add.add_argument("--username", help="imap: user name")
    add.add_argument("--password-env", help="imap: the environment variable holding the password or app token")
    add.add_argument("--folder", action="append", dest="folders", help="imap: folder to sync (repeatable)")
    add.add_argument("--since", help="imap: only messages since this date (YYYY-MM-DD)")
    add.add_argument("--schedule", help="sync every: '15m', '6h', '1d' (default: only when asked)")
    add.add_argument("--no-wait", action="store_true", help="queue the first sync instead of running it now")
    commands.add_parser("list", help="sources with their last sync")
    sync = commands.add_parser("sync", help="sync a source now")
    sync.add_argument("source_id")
    sync.add_argument("--no-wait", action="store_true", help="queue the sync for a worker")
    remove = commands.add_parser("remove", help="remove a source and the documents it brought")
    remove.add_argument("source_id")
    for parser in (add, sync, remove, commands.choices["list"]):
        parser.add_argument("--home", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    sources.set_defaults(func=cmd_sources)


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"type": args.type}
    for name in ("namespace", "url", "path", "branch", "include", "exclude", "host", "port", "security"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    for name in ("username", "folders", "since", "schedule"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    if args.password_env:
        password = os.environ.get(args.password_env)
        if not password:
            raise CalypsoError(f"The environment variable {args.password_env} is not set: it should hold the password.")
        body["password"] = password
    return body


def _line(source: dict[str, Any]) -> str:
    last = source.get("last_sync") or {}
    counts = ", ".join(f"{last.get(k, 0)} {k}" for k in ("added", "updated", "removed", "unchanged", "failed"))
    origin = source["settings"].get("url") or source["settings"].get("path") or source["settings"].get("host")
    synced = f"last sync {last.get('status')}: {counts}" if last else "never synced"
    return f"{source['id']}  {source['type']:<7} {source['namespace']:<16} {source['status']:<8} {origin}  ({synced})"


def cmd_sources(args: argparse.Namespace) -> int:
    settings = command_settings(args)
    server = running_server(settings)
    try:
        call, close = _remote(ServerClient(server)) if server is not None else _local(settings)
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    try:
        command = args.sources_command
        if command == "add":
            source = call("add", _body(args), None)
            if not args.no_wait:
                source = call("sync", {}, source["id"])
            print(_line(source))
        elif command == "list":
            for source in call("list", {}, None)["data"]:
                print(_line(source))
        elif command == "sync":
            source = call("sync" if not args.no_wait else "queue", {}, args.source_id)
            print(_line(source))
            for error in (source.get("last_sync") or {}).get("errors", []):
                print(f"  {error['item']}: {error['message']}")
        else:
            call("remove", {}, args.source_id)
            print(f"removed {args.source_id} and its documents")
    except CalypsoError as exc:
        print(f"error: {exc.message}" + (f" ({exc.param})" if exc.param else ""), file=sys.stderr)
        return 1
    finally:
        close()
    return 0


Call = Callable[[str, dict[str, Any], str | None], dict[str, Any]]


def _remote(client: ServerClient) -> tuple[Call, Callable[[], None]]:
    def call(action: str, body: dict[str, Any], source_id: str | None) -> dict[str, Any]:
        if action == "add":
            return client._call("POST", "/v1/sources", json=body)[1]
        if action == "list":
            return client._call("GET", "/v1/sources")[1]
        if action in ("sync", "queue"):
            params = {"wait": "true" if action == "sync" else "false"}
            return client._call("POST", f"/v1/sources/{source_id}/sync", params=params)[1]
        return client._call("DELETE", f"/v1/sources/{source_id}")[1]

    return call, client.close


def _local(settings: Any) -> tuple[Call, Callable[[], None]]:
    from calypso.api.routes.sources import source_object
    from calypso.services import open_services

    services = open_services(settings, exclusive=True)
    sources = services.sources

    def call(action: str, body: dict[str, Any], source_id: str | None) -> dict[str, Any]:
        if action == "add":
            return source_object(sources.create(body))
        if action == "list":
            return {"data": [source_object(s) for s in sources.list_sources()]}
        if action in ("sync", "queue"):
            return source_object(sources.sync(str(source_id), wait=action == "sync"))
        return source_object(sources.delete(str(source_id)))

    return call, services.close
