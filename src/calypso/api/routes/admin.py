"""/v1/admin: workspace API keys, workspace policies and reindexing (admin key required)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from calypso.api.auth import require_admin
from calypso.api.deps import Keys, Policies, Vectors
from calypso.models import ApiKey
from calypso.scope import NAME_SCHEMA, check_namespace

WorkspaceName = Annotated[str, Path(json_schema_extra=NAME_SCHEMA)]

router = APIRouter(prefix="/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)])


class CreateKey(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workspace: str = Field(json_schema_extra=NAME_SCHEMA)
    name: str = ""


def key_object(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "object": "api_key",
        "workspace": key.workspace,
        "name": key.name,
        "prefix": key.prefix,
        "created_at": key.created_at,
        "revoked_at": key.revoked_at,
    }


@router.post("/keys")
def create_key(body: CreateKey, keys: Keys) -> JSONResponse:
    """A new key for a workspace; the key itself is in this answer only."""
    record, plaintext = keys.create(body.workspace, body.name)
    return JSONResponse({**key_object(record), "key": plaintext}, status_code=201)


@router.get("/keys")
def list_keys(keys: Keys, workspace: str | None = None) -> dict[str, Any]:
    data = [key_object(k) for k in keys.list_keys(workspace)]
    return {"object": "list", "data": data, "has_more": False}


@router.delete("/keys/{key_id}")
def revoke_key(key_id: str, keys: Keys) -> dict[str, Any]:
    """Revoke at once: the next request with this key gets 401."""
    return key_object(keys.revoke(key_id))


class WorkspacePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sources_policy: Literal["visible", "hidden"]


@router.put("/workspaces/{workspace}/policy")
def set_policy(workspace: WorkspaceName, body: WorkspacePolicy, policies: Policies) -> dict[str, Any]:
    """``hidden`` suppresses sources in every answer of the workspace, whatever the bot says."""
    policies.set_sources_policy(workspace, body.sources_policy)
    return {"object": "workspace.policy", "workspace": workspace, "sources_policy": body.sources_policy}


@router.get("/workspaces/{workspace}/policy")
def get_policy(workspace: WorkspaceName, policies: Policies) -> dict[str, Any]:
    policy = policies.sources_policy(check_namespace(workspace, "workspace"))
    return {"object": "workspace.policy", "workspace": workspace, "sources_policy": policy}


class Reindex(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workspace: str | None = None  # one workspace; absent: all


@router.post("/reindex")
def reindex(vectors: Vectors, body: Reindex | None = None) -> dict[str, Any]:
    """Drop stored vectors and queue every completed document (of ``workspace``, or all) for the configured
    embedding model, after changing it; the embedding workers re-embed while keyword search goes on."""
    queued = vectors.reindex(body.workspace if body is not None else None)
    return {"object": "reindex", "model": vectors.model, "documents_queued": queued}
