"""`calypso export` and `calypso import`: a knowledge base moved between machines and backends as one file.

Exit status: 0 done; 2 a bad argument or a missing archive; 3 an archive that cannot be imported (truncated,
corrupt, or from a newer Calypso); 4 the target holds conflicting ids; 1 the database (unreachable, full, or
another process holds the data directory). Whenever the status is not 0, the target is unchanged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from calypso.cli.common import command_settings, where
from calypso.errors import ArchiveUnreadable, CalypsoError, Conflict

EXIT_UNREADABLE = 3
EXIT_CONFLICT = 4


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser], home_help: str) -> None:
    export = sub.add_parser("export", help="write the knowledge base (or a workspace or namespace) to one archive file")
    export.add_argument("path", help="the archive to write (a zip file; replaced only once complete)")
    export.add_argument("--workspace", default=None, help="only this workspace (default: all)")
    export.add_argument(
        "--namespace", default=None, help="only this namespace's documents and vector stores (of --workspace)"
    )
    export.add_argument("--home", help=home_help)
    export.set_defaults(func=cmd_export)

    load = sub.add_parser("import", help="read an archive into this knowledge base (SQLite or PostgreSQL)")
    load.add_argument("path", help="an archive `calypso export` wrote")
    load.add_argument("--home", help=home_help)
    load.set_defaults(func=cmd_import)


def cmd_export(args: argparse.Namespace) -> int:
    from calypso.scope import DEFAULT_WORKSPACE, check_namespace
    from calypso.services.portable import Scope, export_knowledge_base

    settings = command_settings(args)
    try:
        namespace = None if args.namespace is None else check_namespace(args.namespace)
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    workspace = args.workspace if args.workspace is not None or namespace is None else DEFAULT_WORKSPACE
    report = export_knowledge_base(settings, Path(args.path), Scope(workspace, namespace))
    carried = ", ".join(f"{n} {table}" for table, n in report.rows.items() if n)
    print(f"exported {carried or 'nothing'} from {where(settings)}")
    print(f"{report.path}: {report.size:,} bytes, {report.files} original files, {report.seconds:.1f} s")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from calypso.services.portable import import_knowledge_base

    settings = command_settings(args)
    try:
        report = import_knowledge_base(settings, Path(args.path))
    except ArchiveUnreadable as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return EXIT_UNREADABLE
    except Conflict as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return EXIT_CONFLICT
    except CalypsoError as exc:
        if exc.status >= 500:
            raise  # the database's own errors: main says them (status 1)
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    counts = report.counts
    added = ", ".join(f"{n} {table}" for table, n in counts.added.items() if n)
    present = sum(counts.present.values())
    print(f"imported {added or 'nothing new'} into {where(settings)}")
    if present:
        print(f"{present} rows were there already and were left as they are")
    if counts.vectors_dropped or counts.queued:
        print(
            f"{counts.vectors_dropped} vectors of another embedding model left out; "
            f"{counts.queued} documents queued for this one (`calypso serve` or `calypso reindex` embeds them)"
        )
    print(f"{report.seconds:.1f} s (archive from Calypso {report.manifest.get('calypso_version', '?')})")
    return 0
