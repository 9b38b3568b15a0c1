"""API keys (each belongs to one workspace; only a hash is kept) and per-workspace policies."""

from __future__ import annotations

import hashlib
import secrets
import time

from calypso.errors import NotFound
from calypso.models import ApiKey, SourcesPolicy
from calypso.scope import check_namespace
from calypso.store.base import KeyStore, PolicyStore

KEY_PREFIX = "cal-"


def hash_key(key: str) -> str:
    # Keys are 256-bit random tokens, so a plain SHA-256 is enough (no stretching needed).
    return hashlib.sha256(key.encode()).hexdigest()


class KeyService:
    def __init__(self, store: KeyStore) -> None:
        self.store = store

    def create(self, workspace: str, name: str = "") -> tuple[ApiKey, str]:
        """A new key; the plaintext is returned once and never stored."""
        check_namespace(workspace, "workspace")  # workspace names follow the namespace rule
        plaintext = KEY_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(f"key_{secrets.token_hex(8)}", workspace, name, plaintext[:10], int(time.time()), None)
        self.store.insert(key, hash_key(plaintext))
        return key, plaintext

    def list_keys(self, workspace: str | None = None) -> list[ApiKey]:
        return self.store.list_keys(workspace)

    def revoke(self, key_id: str) -> ApiKey:
        self.store.revoke(key_id, int(time.time()))
        key = self.store.get(key_id)
        if key is None:
            raise NotFound(f"No API key {key_id!r}; `calypso keys list` shows them.", param="key_id")
        return key

    def workspace_for(self, plaintext: str) -> str | None:
        """The workspace of a live key, or None for an unknown or revoked one."""
        return self.store.workspace_for_hash(hash_key(plaintext))


class PolicyService:
    def __init__(self, store: PolicyStore) -> None:
        self.store = store

    def sources_policy(self, workspace: str) -> SourcesPolicy:
        return self.store.sources_policy(workspace) or "visible"

    def set_sources_policy(self, workspace: str, policy: SourcesPolicy) -> None:
        check_namespace(workspace, "workspace")
        self.store.set_sources_policy(workspace, policy)

    def sources_hidden(self, workspace: str, bot_policy: SourcesPolicy) -> bool:
        """Sources are hidden when the bot's or the workspace's policy says so (grounding state ``hidden``)."""
        return bot_policy == "hidden" or self.sources_policy(workspace) == "hidden"
