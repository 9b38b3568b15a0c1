"""What the commands share: the settings a command line makes, the data directory it uses (and says so),
the files it reads."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from calypso.cli.remote import discovered_home
from calypso.config import Settings
from calypso.errors import CalypsoError

if TYPE_CHECKING:
    from calypso.services import Services


class Overrides(TypedDict, total=False):
    """The settings a command line can override (the rest come from the environment)."""

    home: Path
    host: str
    port: int
    grpc_port: int
    demo: bool


def home_source(args: argparse.Namespace) -> str:
    """Why this data directory: the flag, the environment, ./.calypso found here, or the default."""
    if getattr(args, "home", None):
        return "--home"
    if os.environ.get("CALYPSO_HOME"):
        return "CALYPSO_HOME"
    found = discovered_home()
    return found[1] if found is not None else "default"


def command_settings(args: argparse.Namespace) -> Settings:
    overrides: Overrides = {}
    if getattr(args, "home", None):
        overrides["home"] = Path(args.home)
    elif not os.environ.get("CALYPSO_HOME") and (found := discovered_home()) is not None:
        overrides["home"] = found[0]  # `make serve`'s ./.calypso: the knowledge base the user just served
    if getattr(args, "host", None) is not None:
        overrides["host"] = args.host
    if getattr(args, "port", None) is not None:
        overrides["port"] = args.port
    if getattr(args, "grpc_port", None) is not None:
        overrides["grpc_port"] = args.grpc_port
    if getattr(args, "demo", False):
        overrides["demo"] = True
    return Settings(**overrides)


def files_of(paths: list[str]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        else:
            yield path


def raise_open_files_limit() -> None:
    """Let a server open as many files as the system allows it: each large keyword segment keeps three open
    for its searches' reads (retrieval/bm25_segments.py), and 1024, a common default, is a few hundred."""
    import contextlib
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):  # some systems cap it below the hard limit (macOS: OPEN_MAX)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def where(settings: Settings) -> str:
    """Where the knowledge base lives, as a user can find it again."""
    if settings.database_url:
        return "the PostgreSQL database of CALYPSO_DATABASE_URL"
    return str(settings.home.resolve())


def empty_knowledge_base(settings: Settings, namespace: str, found: list[str]) -> int:
    """Say that there is nothing to search and where we looked; the exit status of search and ask."""
    others = f" Namespaces with documents there: {', '.join(found)} (use --namespace)." if found else ""
    print(
        f"error: the knowledge base at {where(settings)} has no documents in namespace {namespace!r}.{others} "
        "Add some with `calypso ingest PATH...`, or point --home / CALYPSO_HOME at the data directory you "
        "ingested into (`calypso settings` shows the current one).",
        file=sys.stderr,
    )
    return 1


def missing_knowledge_base(settings: Settings) -> bool:
    # An embedded data directory that was never created is empty: look without creating it.
    return not settings.database_url and not settings.database_path.exists()


def open_knowledge_base(args: argparse.Namespace) -> tuple[Services, str] | int:
    """The services and the namespace search and ask read, or their exit status when there is nothing to read:
    2 for a bad namespace, 1 (having said where it looked) for an empty knowledge base."""
    from calypso.scope import check_namespace
    from calypso.services import open_services

    settings = command_settings(args)
    try:
        namespace = check_namespace(settings.namespace_or_default(args.namespace))
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    if missing_knowledge_base(settings):
        return empty_knowledge_base(settings, namespace, [])
    services = open_services(settings)
    found = services.documents.namespaces()
    if namespace not in found:
        services.close()
        return empty_knowledge_base(settings, namespace, found)
    return services, namespace
