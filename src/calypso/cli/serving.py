"""The long-running commands: `calypso serve`, `worker`, `mcp` and the scripted upstream `dev-upstream`."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from calypso.banner import generator_line, ocr_line, port_in_use, search_summary, storage_line
from calypso.cli.common import command_settings, raise_open_files_limit
from calypso.cli.remote import remove_record, running_server, write_record
from calypso.errors import CalypsoError
from calypso.logs import log_format


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from calypso.api.app import create_app
    from calypso.api.auth import auth_enabled
    from calypso.demo import ingest_demo
    from calypso.grpc_api import missing_dependency
    from calypso.services import open_services

    settings = command_settings(args)
    raise_open_files_limit()
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


def cmd_worker(args: argparse.Namespace) -> int:
    import signal

    from calypso.services import open_services
    from calypso.services.embed_worker import EmbedWorkers

    settings = command_settings(args)
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
    syncers = services.sources.workers(max(settings.source_workers, 1), role="worker")
    workers.start()
    embedders.start()
    syncers.start()
    embedding = f", embedding with {services.vectors.model}" if services.vectors.model else ""
    print(f"calypso worker: {count} thread(s) ingesting{embedding}; stop with SIGTERM or Ctrl-C", flush=True)
    try:
        while not stop.wait(0.5):  # a timed wait, so the main thread runs the signal handlers promptly
            time.sleep(0)
    finally:
        # A running job finishes, or is released at its next batch for another worker to take.
        embedders.stop()
        syncers.stop(settings.job_lease_seconds)
        workers.stop(settings.job_lease_seconds)
        services.close()
    print("calypso worker: stopped", flush=True)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    """MCP over stdio: on the data directory, or relayed to a running server (--url, or the one that holds it)."""
    import anyio

    from calypso.api.mcp import stdio
    from calypso.errors import DataDirectoryInUse

    settings = command_settings(args)
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
