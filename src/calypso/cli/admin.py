"""The operator's commands: `calypso keys` and `calypso settings`."""

from __future__ import annotations

import argparse
import sys

from calypso.cli.common import command_settings, home_source, where
from calypso.cli.remote import running_server
from calypso.config import settings_table
from calypso.errors import CalypsoError


def cmd_keys(args: argparse.Namespace) -> int:
    from calypso.services import open_services

    settings = command_settings(args)
    services = open_services(settings)
    keys = services.keys
    try:
        if args.keys_command == "create":
            record, plaintext = keys.create(args.workspace, args.name)
            print(f"{record.id}  workspace {record.workspace}")
            print(f"key: {plaintext}")
            print("Store it now: only its hash is kept.")
            server = running_server(settings)
            served = f"; the server at {server.url} accepts it now" if server else ""
            print(f"Kept in the knowledge base at {where(settings)} ({home_source(args)}){served}.")
        elif args.keys_command == "list":
            for key in keys.list_keys(args.workspace):
                state = "revoked" if key.revoked_at else "active"
                print(f"{key.id}  {key.workspace:20} {key.prefix}…  {state:8} {key.name}")
        else:
            key = keys.revoke(args.key_id)
            print(f"revoked {key.id} (workspace {key.workspace})")
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    finally:
        services.close()
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    settings = command_settings(args)
    print(f"data directory: {where(settings)} ({home_source(args)})")
    server = running_server(settings)
    if server is not None:
        print(f"served by: {server.url} (PID {server.pid}; CLI commands send their work there)")
    if not settings.database_url:
        print(
            f"knowledge base: {settings.database_path.resolve()}"
            + ("" if settings.database_path.exists() else " (not created yet)")
        )
    print()
    rows = settings_table()
    name_width = max(len(name) for name, _, _ in rows)
    default_width = min(max(len(default) for _, default, _ in rows), 32)
    for name, default, help_ in rows:
        print(f"{name:{name_width}}  {default:{default_width}}  {help_}")
    return 0
