"""The `calypso` command: serve, ingest, worker, search, ask, mcp, keys, settings. Thin: it calls the modules."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from pydantic import ValidationError

from calypso.banner import generator_line, ocr_line, port_in_use, search_summary, storage_line
from calypso.cli_remote import RunningServer, ServerClient, discovered_home, remove_record, running_server, write_record
from calypso.config import Settings, settings_problems, settings_table
from calypso.errors import CalypsoError
from calypso.locators import locator_style
from calypso.logs import configure, log_format

if TYPE_CHECKING:
    from calypso.models import Passage
    from calypso.services import Services
    from calypso.services.vectors import VectorService


class _Overrides(TypedDict, total=False):
    """The settings a command line can override (the rest come from the environment)."""

    home: Path
    host: str
    port: int
    grpc_port: int
    demo: bool


def _home_source(args: argparse.Namespace) -> str:
    """Why this data directory: the flag, the environment, ./.calypso found here, or the default."""
    if getattr(args, "home", None):
        return "--home"
    if os.environ.get("CALYPSO_HOME"):
        return "CALYPSO_HOME"
    found = discovered_home()
    return found[1] if found is not None else "default"


def _settings(args: argparse.Namespace) -> Settings:
    overrides: _Overrides = {}
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


def _files(paths: list[str]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        else:
            yield path


def _raise_open_files_limit() -> None:
    """Let a server open as many files as the system allows it: each large keyword segment keeps three open
    for its searches' reads (retrieval/bm25_segments.py), and 1024, a common default, is a few hundred."""
    import contextlib
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):  # some systems cap it below the hard limit (macOS: OPEN_MAX)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from calypso.api.app import create_app
    from calypso.api.auth import auth_enabled
    from calypso.demo import ingest_demo
    from calypso.grpc_api import missing_dependency
    from calypso.services import open_services

    settings = _settings(args)
    _raise_open_files_limit()
    services = open_services(settings, exclusive=True)
    if settings.demo:
        added = ingest_demo(services.ingestion)
        print(f"demo knowledge base: {added} new document(s) in namespace '{settings.default_namespace}'")
    # Indexes build in the background so the port opens at once; a query that comes first waits for its namespace.
    threading.Thread(target=services.search.warm_up, name="index-warm-up", daemon=True).start()

    print(generator_line(settings))
    print(search_summary(services.search.embedder))
    print(storage_line(settings))
    print(ocr_line(settings))
    print(f"HTTP API on http://{settings.host}:{settings.port}/v1 (OpenAPI: /openapi.json; playground: /)")
    print(f"MCP (streamable HTTP) at http://{settings.host}:{settings.port}/mcp; `calypso mcp` serves stdio clients")
    grpc_port = settings.grpc_port
    if grpc_port:
        notice = missing_dependency()
        if notice:
            print(notice)
            grpc_port = 0
        elif port_in_use(settings.host, grpc_port):
            print(
                f"xAI gRPC API: OFF, port {grpc_port} is in use by another process "
                "(another `calypso serve`?); pick one with --grpc-port (0: off)."
            )
            grpc_port = 0
        else:
            print(f"xAI gRPC API (xai-sdk) on {settings.host}:{grpc_port} (--grpc-port 0 turns it off)")
    if settings.otlp_endpoint:
        print(f"Tracing: a span per request to {settings.otlp_endpoint} (OTLP/HTTP)")
    if auth_enabled(settings):
        print("Auth: ON, API keys required (create one with `calypso keys create --workspace NAME`).")
    else:
        print(
            f"Auth: OFF, every request uses the 'default' workspace (CALYPSO_AUTH={settings.auth}, host {settings.host})."
        )
    shown_host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    if not write_record(settings.home, f"http://{shown_host}:{settings.port}", auth_enabled(settings)):
        print(f"Could not write {settings.home / 'server.json'}: CLI commands will not find this server.")
    closed = threading.Event()

    def close() -> None:  # at the app's shutdown (SIGTERM included), or below when uvicorn returns
        if not closed.is_set():
            closed.set()
            remove_record(settings.home)
            services.close()

    try:
        uvicorn.run(
            create_app(settings, services, grpc_port=grpc_port, on_shutdown=close),
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level,
            # httptools parses HTTP in C (h11, the fallback, is pure Python); the event loop stays asyncio's,
            # which gRPC's aio server (same loop) supports, whatever else is installed.
            loop="asyncio",
            # JSON: uvicorn's records go through ours (calypso.logs), not its own text handlers.
            log_config=None if log_format() == "json" else uvicorn.config.LOGGING_CONFIG,
        )
    finally:
        close()  # the port was taken, or startup failed: the app never shut down
    return 0


def cmd_dev_upstream(args: argparse.Namespace) -> int:
    """The test suite's scripted upstream on a port: it answers like a model that writes no markers (a
    sentence of each of the first two passages, streamed), so Calypso's inferred citations show."""
    import time

    from calypso.generation.fake_upstream import FAKE_MODEL, FakeUpstream, Script

    with FakeUpstream(default=Script.markerless(quote=(1, 2)), port=args.port) as fake:
        print(f"Scripted upstream (not a model) on {fake.base_url}; in another terminal:")
        print(f"  CALYPSO_LLM_BASE_URL={fake.base_url} CALYPSO_LLM_MODEL={FAKE_MODEL} calypso serve --demo")
        try:
            while True:
                time.sleep(60)
                fake.requests.clear()  # it keeps what it was sent, for tests; a long run need not
                fake.headers.clear()
        except KeyboardInterrupt:
            return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    import mimetypes

    from calypso.cli_progress import FileProgress, IngestSummary, extent
    from calypso.services import open_services
    from calypso.services.ingestion import Upload

    settings = _settings(args)
    server = running_server(settings)
    if server is not None:
        return _ingest_through(server, args, settings)
    print(f"knowledge base: {_where(settings)} ({_home_source(args)})", file=sys.stderr)
    services = open_services(settings, exclusive=True)
    files = list(_files(args.paths))
    summary = IngestSummary()
    try:
        for path in files:
            # Waiting (the default) runs each file's job right here, its progress drawn on stderr.
            progress = None if args.no_wait else FileProgress(path.name, sys.stderr)
            try:
                # The type an HTTP client would declare for this name, so a file is refused or taken
                # exactly as the API would (a .json is refused by both; a .py is text in both).
                upload = Upload(
                    path.read_bytes(), path.name, args.namespace, media_type=mimetypes.guess_type(path.name)[0]
                )
                result = services.ingestion.ingest(
                    upload, wait=not args.no_wait, on_progress=progress.update if progress else None
                )
            except (CalypsoError, OSError) as exc:
                summary.failed += 1
                print(f"refused   {path}: {getattr(exc, 'message', exc)}")
                continue
            finally:
                if progress is not None:
                    progress.close()
            doc = result.document
            if not result.created:
                summary.duplicates += 1
                state = "duplicate"
            elif doc.status == "in_progress":
                summary.submitted += 1
                print(f"submitted {path} -> {doc.id} (namespace {doc.namespace})")
                continue
            else:
                summary.completed += 1
                summary.pages += doc.page_count if locator_style(doc.media_type, doc.page_count) != "heading" else 0
                summary.passages += doc.chunk_count
                state = "ingested "
            print(
                f"{state} {path} -> {doc.id} ({extent(doc.media_type, doc.page_count, doc.chunk_count, doc.metadata)}, "
                f"namespace {doc.namespace})",
                flush=True,
            )
        if summary.completed and not settings.database_url:
            # Built here and saved as a snapshot by close(), so the next `calypso serve` loads the index
            # from disk instead of building it before its first answer.
            services.search.index(settings.namespace_or_default(args.namespace))
        if summary.completed and not args.no_wait:  # keyword-searchable already; now the vectors
            _embed_queued(services.vectors)
    finally:
        services.close()
    print(summary.line())
    return 1 if summary.failed else 0  # any refused file is a failure a script must see


def _embed_queued(vectors: VectorService) -> int:
    """Give queued documents their vectors here, with a progress line (searchable by keywords meanwhile)."""
    from calypso.services.embed_worker import embed_all

    queued, model = vectors.pending(), vectors.model
    if not queued or model is None:
        return 0

    def progress(docs: int, passages: int) -> None:
        print(
            f"\rembedding {docs}/{queued} documents, {passages} passages ({model})", end="", file=sys.stderr, flush=True
        )

    started = time.perf_counter()
    total = embed_all(vectors, on_progress=progress)
    elapsed = time.perf_counter() - started
    print(f"\rembedded {total} passages in {elapsed:.1f}s with {model}" + " " * 20, file=sys.stderr, flush=True)
    return total


def cmd_reindex(args: argparse.Namespace) -> int:
    """Re-embed every passage with the configured model (after changing CALYPSO_EMBEDDING_MODEL)."""
    from calypso.services import open_services

    services = open_services(_settings(args), exclusive=True)
    try:
        queued = services.vectors.reindex()
        print(f"queued {queued} document(s) for new vectors")
        if not args.no_wait:
            _embed_queued(services.vectors)
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    finally:
        services.close()
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    import signal

    from calypso.services import open_services
    from calypso.services.embed_worker import EmbedWorkers

    settings = _settings(args)
    if not settings.database_url:
        # SQLite has one writing process per data directory (its lock): there, `calypso serve` is the worker.
        print(
            "error: `calypso worker` needs PostgreSQL (set CALYPSO_DATABASE_URL). On the embedded SQLite "
            "backend `calypso serve` runs the ingestion workers itself (CALYPSO_INGEST_WORKERS).",
            file=sys.stderr,
        )
        return 1
    services = open_services(settings)
    count = args.threads or max(settings.ingest_workers, 1)
    workers = services.ingestion.workers(count, role="worker")
    embedders = EmbedWorkers(services.vectors, max(settings.embed_workers, 1), role="worker")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    workers.start()
    embedders.start()
    embedding = f", embedding with {services.vectors.model}" if services.vectors.model else ""
    print(f"calypso worker: {count} thread(s) ingesting{embedding}; stop with SIGTERM or Ctrl-C", flush=True)
    try:
        while not stop.wait(0.5):  # a timed wait, so the main thread runs the signal handlers promptly
            time.sleep(0)
    finally:
        # A running job finishes, or is released at its next batch for another worker to take.
        embedders.stop()
        workers.stop(settings.job_lease_seconds)
        services.close()
    print("calypso worker: stopped", flush=True)
    return 0


def _where(settings: Settings) -> str:
    """Where the knowledge base lives, as a user can find it again."""
    if settings.database_url:
        return "the PostgreSQL database of CALYPSO_DATABASE_URL"
    return str(settings.home.resolve())


def _empty_knowledge_base(settings: Settings, namespace: str, found: list[str]) -> int:
    """Say that there is nothing to search and where we looked; the exit status of search and ask."""
    others = f" Namespaces with documents there: {', '.join(found)} (use --namespace)." if found else ""
    print(
        f"error: the knowledge base at {_where(settings)} has no documents in namespace {namespace!r}.{others} "
        "Add some with `calypso ingest PATH...`, or point --home / CALYPSO_HOME at the data directory you "
        "ingested into (`calypso settings` shows the current one).",
        file=sys.stderr,
    )
    return 1


def _missing_knowledge_base(settings: Settings) -> bool:
    # An embedded data directory that was never created is empty: look without creating it.
    return not settings.database_url and not settings.database_path.exists()


def _open_knowledge_base(args: argparse.Namespace) -> tuple[Services, str] | int:
    """The services and the namespace search and ask read, or their exit status when there is nothing to read:
    2 for a bad namespace, 1 (having said where it looked) for an empty knowledge base."""
    from calypso.scope import check_namespace
    from calypso.services import open_services

    settings = _settings(args)
    try:
        namespace = check_namespace(args.namespace or settings.default_namespace)
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    if _missing_knowledge_base(settings):
        return _empty_knowledge_base(settings, namespace, [])
    services = open_services(settings)
    found = services.documents.namespaces()
    if namespace not in found:
        services.close()
        return _empty_knowledge_base(settings, namespace, found)
    return services, namespace


def _ingest_through(server: RunningServer, args: argparse.Namespace, settings: Settings) -> int:
    """``calypso ingest`` into a served data directory: each file goes to the server's upload API."""
    import mimetypes

    from calypso.cli_progress import IngestSummary, extent

    print(f"knowledge base: {_where(settings)}, served by {server.url}: sending the files there", file=sys.stderr)
    summary = IngestSummary()
    try:
        client = ServerClient(server)
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    try:
        for path in _files(args.paths):
            try:
                doc, created = client.upload(
                    path, args.namespace, mimetypes.guess_type(path.name)[0], wait=not args.no_wait
                )
            except (CalypsoError, OSError) as exc:
                summary.failed += 1
                print(f"refused   {path}: {getattr(exc, 'message', exc)}")
                continue
            if doc["status"] == "failed":
                summary.failed += 1
                print(f"refused   {path}: {(doc.get('last_error') or {}).get('message', 'ingestion failed')}")
                continue
            if doc["status"] == "in_progress":
                summary.submitted += 1
                print(f"submitted {path} -> {doc['id']} (namespace {doc['namespace']})")
                continue
            if created:
                summary.completed += 1
                pages = doc["page_count"]
                summary.pages += pages if locator_style(doc["media_type"], pages) != "heading" else 0
                summary.passages += doc["chunk_count"]
            else:
                summary.duplicates += 1
            state = "ingested " if created else "duplicate"
            print(
                f"{state} {path} -> {doc['id']} "
                f"({extent(doc['media_type'], doc['page_count'], doc['chunk_count'], doc.get('metadata'))}, namespace {doc['namespace']})",
                flush=True,
            )
    finally:
        client.close()
    print(summary.line())
    return 1 if summary.failed else 0


def _search_through(server: RunningServer, args: argparse.Namespace, settings: Settings) -> int:
    namespace = args.namespace or settings.default_namespace
    print(f"knowledge base: {_where(settings)}, served by {server.url}", file=sys.stderr)
    try:
        client = ServerClient(server)
        try:
            hits = client.search(args.query, namespace, args.k)
        finally:
            client.close()
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    if not hits:
        print("no passages found")
    for rank, hit in enumerate(hits, start=1):
        attributes = hit["attributes"]
        preview = " ".join(hit["content"][0]["text"].split())[:240]
        print(f"{rank:2d}. {hit['score']:7.3f}  {attributes['label']}  [chunk {attributes['chunk_index']}]")
        print(f"    {preview}")
    return 0


def _ask_through(server: RunningServer, args: argparse.Namespace, settings: Settings) -> int:
    """``calypso ask`` on a served knowledge base: the server's answer with its numbered sources, then the
    sentences nothing supports, as the local answer prints them."""
    print(f"knowledge base: {_where(settings)}, served by {server.url}", file=sys.stderr)
    try:
        client = ServerClient(server)
        try:
            reply = client.ask(args.question)
        finally:
            client.close()
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    message = reply["choices"][0]["message"]
    status = message.get("_aicore", {})
    print(message.get("content") or "")
    for span in status.get("claims", {}).get("unsupported_spans", []):
        label = "not supported" if span["status"] == "unsupported" else "weakly supported"
        print(f'{label}: "{" ".join(span["text"].split())}"')
    print(f"\n(answered by {status.get('generator')}; retrieval {status.get('retrieval_status')}; via {server.url})")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    settings = _settings(args)
    server = running_server(settings)
    if server is not None:
        return _search_through(server, args, settings)
    opened = _open_knowledge_base(args)
    if isinstance(opened, int):
        return opened
    services, namespace = opened
    try:
        passages: list[Passage] = services.search.search(args.query, namespace, max_results=args.k)
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    finally:
        services.close()
    if not passages:
        print("no passages found")
    for rank, passage in enumerate(passages, start=1):
        preview = " ".join(passage.chunk.text.split())[:240]
        print(f"{rank:2d}. {passage.score:7.3f}  {passage.display_label}  [chunk {passage.chunk.chunk_index}]")
        print(f"    {preview}")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    import asyncio

    from calypso.citations.events import Done, MarkerEvent, TextEvent
    from calypso.dialects.text import render_evidence, render_numbered
    from calypso.services.turns import Narrowing, TurnInput

    settings = _settings(args)
    server = running_server(settings)
    # The server's default bot searches the default namespace; another namespace is read here (SQLite
    # serves readers beside the server), with this process's own index of it.
    if server is not None and settings.namespace_or_default(args.namespace) == settings.default_namespace:
        return _ask_through(server, args, settings)
    opened = _open_knowledge_base(args)
    if isinstance(opened, int):
        return opened
    services, namespace = opened
    answerer = services.answering
    # The default bot's turn, over the namespace asked for (its documents whole) and the generator chosen.
    narrowing = Narrowing((namespace,), bot_documents=False, passage_count=args.k)
    parsed = TurnInput([{"role": "user", "content": args.question}], narrowing=narrowing, generator=args.generator)

    async def run() -> int:
        answer = None
        turn = await services.turns.prepare_async(parsed)
        async for event in answerer.stream(turn.ask):
            if args.stream and isinstance(event, TextEvent):
                print(event.text, end="", flush=True)
            elif args.stream and isinstance(event, MarkerEvent) and event.segment is not None:
                shown = {c.retrieval_number: c.display_number for c in event.segment.citations}
                numbers = [shown[n] for n in event.placement.valid_numbers if n in shown]
                print(" " + "".join(f"[{n}]" for n in numbers), end="", flush=True)
            elif isinstance(event, Done):
                answer = event.answer
        await answerer.aclose()
        assert answer is not None
        if not args.stream:
            print(render_numbered(answer))
        print()
        print(render_evidence(answer))
        print(f"\n(answered by {answer.generator}; retrieval {answer.retrieval_status})")
        return 0

    try:
        return asyncio.run(run())
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    finally:
        services.close()


def cmd_mcp(args: argparse.Namespace) -> int:
    """MCP over stdio: on the data directory, or relayed to a running server (--url, or the one that holds it)."""
    import anyio

    from calypso.api.mcp import stdio
    from calypso.errors import DataDirectoryInUse

    settings = _settings(args)
    url = args.url
    if url is None and not settings.database_url:
        server = running_server(settings)
        if server is not None:  # `calypso serve` holds the directory: share its knowledge base through its /mcp
            print(
                f"{settings.home} is served by PID {server.pid} at {server.url}: relaying to its /mcp", file=sys.stderr
            )
            url = server.url
    if url:
        try:
            anyio.run(stdio.serve_remote, url, args.api_key or os.environ.get("CALYPSO_API_KEY"))
        except CalypsoError as exc:  # unreachable, or the key refused: said before any MCP message
            print(f"error: {exc.message}", file=sys.stderr)
            return 1
        return 0
    try:
        anyio.run(stdio.serve_home, settings, args.workspace)
    except DataDirectoryInUse as exc:
        print(
            f"error: {exc.message} To share the running server's knowledge base, use "
            "`calypso mcp --url http://127.0.0.1:8080` (with --api-key when it needs keys).",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from calypso.services import open_services

    settings = _settings(args)
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
            print(f"Kept in the knowledge base at {_where(settings)} ({_home_source(args)}){served}.")
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
    settings = _settings(args)
    print(f"data directory: {_where(settings)} ({_home_source(args)})")
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


if __name__ == "__main__":
    sys.exit(main())
