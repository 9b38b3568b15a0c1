"""The `calypso` command: serve, ingest, worker, search, ask, mcp, keys, export, import, settings. Thin: it calls the modules."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from pydantic import ValidationError

from calypso.cli.admin import cmd_keys, cmd_settings
from calypso.cli.knowledge import cmd_ask, cmd_ingest, cmd_reindex, cmd_search
from calypso.cli.portable import add_commands as add_portable_commands
from calypso.cli.serving import cmd_dev_upstream, cmd_mcp, cmd_serve, cmd_worker
from calypso.cli.sources import add_source_commands
from calypso.config import Settings, settings_problems
from calypso.logs import configure, log_format


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="calypso", description="Self-hosted grounded-answer server.")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_home(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--home", help="data directory (default: $CALYPSO_HOME, else the user's data directory)")
        return p

    serve = with_home(sub.add_parser("serve", help="serve the HTTP API (and the xAI gRPC API)"))
    serve.add_argument("--host", default=None, help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default 8080)")
    serve.add_argument(
        "--grpc-port",
        type=int,
        default=None,
        help="port for xAI's gRPC API, the xai-sdk client (default 50051; 0: off)",
    )
    serve.add_argument("--demo", action="store_true", help="ingest the bundled demo documents if missing")
    serve.set_defaults(func=cmd_serve)

    dev = sub.add_parser(
        "dev-upstream", help="a scripted OpenAI-compatible model server, to try the model path without a model"
    )
    dev.add_argument("--port", type=int, default=8089, help="port (default 8089)")
    dev.set_defaults(func=cmd_dev_upstream)

    ingest = with_home(sub.add_parser("ingest", help="ingest files and folders"))
    ingest.add_argument("paths", nargs="+")
    ingest.add_argument("--namespace", default=None, help="namespace (default: general)")
    ingest.add_argument(
        "--no-wait",
        action="store_true",
        help="only submit the files (workers of `calypso serve` or `calypso worker` finish them)",
    )
    ingest.set_defaults(func=cmd_ingest)

    reindex = with_home(sub.add_parser("reindex", help="re-embed every passage with the configured embedding model"))
    reindex.add_argument(
        "--no-wait", action="store_true", help="only queue the documents (workers of `calypso serve` embed them)"
    )
    reindex.set_defaults(func=cmd_reindex)

    worker = with_home(sub.add_parser("worker", help="run ingestion workers until stopped (PostgreSQL only)"))
    worker.add_argument("--threads", type=int, default=None, help="worker threads (default: CALYPSO_INGEST_WORKERS)")
    worker.set_defaults(func=cmd_worker)

    search = with_home(sub.add_parser("search", help="print the top passages for a query"))
    search.add_argument("query")
    search.add_argument("--namespace", default=None)
    search.add_argument("-k", type=int, default=5, help="number of passages")
    search.set_defaults(func=cmd_search)

    ask = with_home(sub.add_parser("ask", help="answer a question with citations"))
    ask.add_argument("question")
    ask.add_argument("--namespace", default=None)
    ask.add_argument("--stream", action="store_true", help="print the answer as it is generated")
    ask.add_argument("-k", type=int, default=None, help="passages to retrieve (default: CALYPSO_PASSAGE_COUNT)")
    ask.add_argument("--generator", default=None, help="extractive or upstream (default: CALYPSO_GENERATOR)")
    ask.set_defaults(func=cmd_ask)

    mcp = with_home(sub.add_parser("mcp", help="serve the MCP tools over stdio (Claude Desktop, Cursor, VS Code)"))
    mcp.add_argument("--url", default=None, help="relay to a running server's /mcp instead of opening --home")
    mcp.add_argument("--api-key", default=None, help="key for --url (default: $CALYPSO_API_KEY)")
    mcp.add_argument("--workspace", default="default", help="workspace to read on --home (default: default)")
    mcp.set_defaults(func=cmd_mcp)

    keys = with_home(sub.add_parser("keys", help="create, list and revoke workspace API keys"))
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="a new key for a workspace")
    create.add_argument("--workspace", required=True)
    create.add_argument("--name", default="")
    listing = keys_sub.add_parser("list", help="keys (never their secrets)")
    listing.add_argument("--workspace", default=None)
    revoke = keys_sub.add_parser("revoke", help="revoke a key at once")
    revoke.add_argument("key_id")
    for keys_parser in (create, listing, revoke):
        keys_parser.add_argument("--home", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    keys.set_defaults(func=cmd_keys)

    add_portable_commands(sub, "data directory (default: $CALYPSO_HOME, else the user's data directory)")
    add_source_commands(sub, with_home)

    with_home(sub.add_parser("settings", help="where the data directory is, and every setting")).set_defaults(
        func=cmd_settings
    )
    return parser


def _survive_narrow_terminals() -> None:
    """Print what a terminal cannot show as escapes instead of failing: an answer quoting a Chinese
    passage must not end in UnicodeEncodeError under an ASCII or Latin-1 locale (UTF-8 ones show it)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "utf-8"
        reconfigure = getattr(stream, "reconfigure", None)
        try:
            "中😀".encode(encoding)
        except (UnicodeEncodeError, LookupError):
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    from calypso.bots import BotsFileError
    from calypso.errors import StorageError

    _survive_narrow_terminals()
    args = build_parser().parse_args(argv)
    # A server logs what it does; a one-shot command prints its result, with warnings only unless asked.
    quiet = "INFO" if args.command in ("serve", "worker", "dev-upstream", "mcp") else "WARNING"
    configure(os.environ.get("CALYPSO_LOG_LEVEL", quiet), log_format())
    try:
        command: Callable[[argparse.Namespace], int] = args.func  # set by each subparser's set_defaults
        return command(args)
    except BotsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except StorageError as exc:  # at start: data directory in use, database unreachable, a failed migration
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except ValidationError as exc:
        if exc.title != Settings.__name__:
            raise
        for line in settings_problems(exc):
            print(f"error: {line}", file=sys.stderr)
        return 2
