"""The knowledge-base commands: `calypso ingest`, `reindex`, `search` and `ask`, run here or through the
server that holds the data directory."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from calypso.cli.common import command_settings, files_of, home_source, open_knowledge_base, where
from calypso.cli.remote import RunningServer, ServerClient, running_server
from calypso.config import Settings
from calypso.errors import CalypsoError
from calypso.locators import locator_style

if TYPE_CHECKING:
    from calypso.models import Passage
    from calypso.services.vectors import VectorService


def cmd_ingest(args: argparse.Namespace) -> int:
    import mimetypes

    from calypso.cli.progress import FileProgress, IngestSummary, extent
    from calypso.services import open_services
    from calypso.services.ingestion import Upload

    settings = command_settings(args)
    server = running_server(settings)
    if server is not None:
        return _ingest_through(server, args, settings)
    print(f"knowledge base: {where(settings)} ({home_source(args)})", file=sys.stderr)
    services = open_services(settings, exclusive=True)
    files = list(files_of(args.paths))
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

    services = open_services(command_settings(args), exclusive=True)
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


def _ingest_through(server: RunningServer, args: argparse.Namespace, settings: Settings) -> int:
    """``calypso ingest`` into a served data directory: each file goes to the server's upload API."""
    import mimetypes

    from calypso.cli.progress import IngestSummary, extent

    print(f"knowledge base: {where(settings)}, served by {server.url}: sending the files there", file=sys.stderr)
    summary = IngestSummary()
    try:
        client = ServerClient(server)
    except CalypsoError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    try:
        for path in files_of(args.paths):
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
    namespace = settings.namespace_or_default(args.namespace)
    print(f"knowledge base: {where(settings)}, served by {server.url}", file=sys.stderr)
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
    print(f"knowledge base: {where(settings)}, served by {server.url}", file=sys.stderr)
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
    settings = command_settings(args)
    server = running_server(settings)
    if server is not None:
        return _search_through(server, args, settings)
    opened = open_knowledge_base(args)
    if isinstance(opened, int):
        return opened
    services, namespace = opened
    try:
        scope = services.search.scope(namespace, max_results=args.k)
        passages: list[Passage] = services.search.search(args.query, scope)
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

    settings = command_settings(args)
    server = running_server(settings)
    # The server's default bot searches the default namespace; another namespace is read here (SQLite
    # serves readers beside the server), with this process's own index of it.
    if server is not None and settings.namespace_or_default(args.namespace) == settings.default_namespace:
        return _ask_through(server, args, settings)
    opened = open_knowledge_base(args)
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
