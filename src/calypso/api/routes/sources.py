"""/v1/sources: add a synced source (website, folder, git repository, IMAP mailbox), list, read, delete, sync.

A source answers as ``{"id", "object": "source", "type", "namespace", "status", "settings", "schedule_seconds",
"next_sync_at", "last_sync"}``; its secrets (an IMAP password) never appear, only ``has_secret``.
``POST /v1/sources/{id}/sync`` queues a sync (202); ``?wait=true`` answers when it ended (200) with ``last_sync``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from calypso.api.auth import Workspace
from calypso.api.schemas.sources import check_create_source
from calypso.api.serialize import list_object
from calypso.api.validation import json_object
from calypso.services.sources import SourceService, StoredSource

router = APIRouter(prefix="/v1/sources", tags=["sources"])


async def _sources(request: Request) -> SourceService:
    service: SourceService = request.app.state.services.sources
    return service


Sources = Annotated[SourceService, Depends(_sources)]
WAIT = Query(False, description="Answer only when the sync ended, with its counts in last_sync.")


def source_object(source: StoredSource) -> dict[str, Any]:
    """The wire shape of a source: its settings in the clear, never its secrets."""
    last = source.last_sync
    return {
        "id": source.id,
        "object": "source",
        "type": source.type,
        "namespace": source.namespace,
        "status": source.status,
        "created_at": source.created_at,
        "settings": source.settings,
        "has_secret": source.secret is not None,
        "schedule_seconds": source.schedule_seconds,
        "next_sync_at": int(source.next_run_at) if source.next_run_at is not None else None,
        "last_sync": None
        if last is None
        else {**last, "started_at": int(last["started_at"]), "finished_at": int(last["finished_at"])},
    }


@router.post("", status_code=201)
async def create_source(request: Request, sources: Sources, workspace: Workspace) -> JSONResponse:
    """Add a source (`type`: website, folder, git or imap, with its fields; `namespace`; optional `schedule`);
    its first sync is queued at once."""
    body = await json_object(request, 'a JSON object such as {"type": "website", "url": "https://…/sitemap.xml"}')
    source = await asyncio.to_thread(sources.create, check_create_source(body), workspace)
    return JSONResponse(source_object(source), status_code=201)


@router.get("")
def list_sources(sources: Sources, workspace: Workspace) -> dict[str, Any]:
    return list_object([source_object(s) for s in sources.list_sources(workspace)], has_more=False)


@router.get("/{source_id}")
def get_source(source_id: str, sources: Sources, workspace: Workspace) -> dict[str, Any]:
    return source_object(sources.get(source_id, workspace))


@router.delete("/{source_id}")
def delete_source(source_id: str, sources: Sources, workspace: Workspace) -> dict[str, Any]:
    """Delete the source and the documents it brought."""
    deleted = sources.delete(source_id, workspace)
    return {"id": deleted.id, "object": "source.deleted", "deleted": True}


class SyncRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    full: bool = Field(False, description="Read every item again, ignoring versions (with wait=true only).")


@router.post("/{source_id}/sync")
def sync_source(
    source_id: str, sources: Sources, workspace: Workspace, body: SyncRequest | None = None, wait: bool = WAIT
) -> JSONResponse:
    """Sync now: 202 with the source queued, or with `?wait=true` 200 once the sync ended. An item whose version
    did not change is not read, unless `full` (bytes found unchanged still leave their document as it is)."""
    source = sources.sync(source_id, workspace, wait=wait, full=body.full if body is not None else False)
    return JSONResponse(source_object(source), status_code=200 if wait else 202)
