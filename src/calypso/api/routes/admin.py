"""/v1/admin/keys: create, list and revoke workspace API keys (admin key required)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from calypso.api.auth import require_admin
from calypso.knowledge import check_namespace
from calypso.store.keys import KeyStore
from calypso.store.policies import PolicyStore

router = APIRouter(prefix="/v1/admin", tags=["admin"], dependencies=[Depends(require_admin)])


class CreateKey(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workspace: str
    name: str = ""


def _keys(request: Request) -> KeyStore:
    return KeyStore(request.app.state.kb.store)


@router.post("/keys")
def create_key(body: CreateKey, request: Request) -> JSONResponse:
    """A new key for a workspace; the key itself is in this answer only."""
    check_namespace(body.workspace, "workspace")  # workspace names follow the namespace rule
    record, plaintext = _keys(request).create(body.workspace, body.name)
    return JSONResponse({**record.to_dict(), "key": plaintext}, status_code=201)


@router.get("/keys")
def list_keys(request: Request, workspace: str | None = None) -> dict:
    data = [k.to_dict() for k in _keys(request).list(workspace)]
    return {"object": "list", "data": data, "has_more": False}


@router.delete("/keys/{key_id}")
def revoke_key(key_id: str, request: Request) -> dict:
    """Revoke at once: the next request with this key gets 401."""
    return _keys(request).revoke(key_id).to_dict()


class WorkspacePolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")
    sources_policy: Literal["visible", "hidden"]


@router.put("/workspaces/{workspace}/policy")
def set_policy(workspace: str, body: WorkspacePolicy, request: Request) -> dict:
    """``hidden`` suppresses sources in every answer of the workspace, whatever the bot says."""
    check_namespace(workspace, "workspace")
    PolicyStore(request.app.state.kb.store).set_sources_policy(workspace, body.sources_policy)
    return {"object": "workspace.policy", "workspace": workspace, "sources_policy": body.sources_policy}


@router.get("/workspaces/{workspace}/policy")
def get_policy(workspace: str, request: Request) -> dict:
    policy = PolicyStore(request.app.state.kb.store).sources_policy(workspace)
    return {"object": "workspace.policy", "workspace": workspace, "sources_policy": policy}
