"""The bots service: a workspace's bots (what a bot says about answering is decided in ``services/turns.py``).

A workspace's bots come from three sources, looked up in this order:

1. bots created through ``/v1/bots`` (stored per workspace);
2. bots declared in the TOML file ``CALYPSO_BOTS_FILE`` (loaded once at start;
   read-only through the API, since the file is the source of truth);
3. ``calypso-rag-agent``, present in every workspace, answering from the
   default namespace.

A bot in an earlier source hides one with the same id in a later source, so a
workspace overrides ``calypso-rag-agent`` by creating (or PATCHing) a bot with
that id, and deleting the override brings the built-in back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from calypso.bots import DEFAULT_BOT_ID, Bot, default_bot, load_bots_file, validate_bot
from calypso.config import Settings
from calypso.errors import Conflict, InvalidRequest, NotFound, StorageError
from calypso.models import StoredBot
from calypso.scope import DEFAULT_WORKSPACE
from calypso.store.base import BotStore

log = logging.getLogger("calypso.bots")


class BotConflict(Conflict):
    """409: the id is taken, or the bot cannot be changed through the API."""

    default_code = "bot_exists"


class BotService:
    """The bots of every workspace: stored, then declared in the bots file, then the built-in default."""

    def __init__(self, settings: Settings, store: BotStore | None = None) -> None:
        # store None: only file and default bots (create/update/delete refuse).
        self.settings = settings
        self._store = store
        started = int(time.time())
        self._default = default_bot(settings, started)
        self._file: dict[str, dict[str, Bot]] = (
            load_bots_file(settings.bots_file, settings, started) if settings.bots_file else {}
        )
        if self._store is not None:
            for workspace, bot_id in self._store.keys():  # noqa: SIM118 - a BotStore, not a dict
                if bot_id in self._file.get(workspace, {}):
                    log.warning(
                        "bot %r in workspace %r is stored through the API and hides the one in %s",
                        bot_id,
                        workspace,
                        settings.bots_file,
                    )

    # -- lookups -----------------------------------------------------------
    def _from_store(self, stored: StoredBot) -> Bot:
        try:
            return Bot.model_validate(
                {
                    **stored.config,
                    "id": stored.id,
                    "source": "api",
                    "created_at": stored.created_at,
                    "updated_at": stored.updated_at,
                }
            )
        except ValidationError as exc:
            raise StorageError(f"Stored bot {stored.id!r} in workspace {stored.workspace!r} is invalid: {exc}") from exc

    def find(self, bot_id: str, workspace: str = DEFAULT_WORKSPACE) -> Bot | None:
        """The bot the id names in the workspace, or None."""
        if self._store is not None:
            stored = self._store.get(workspace, bot_id)
            if stored is not None:
                return self._from_store(stored)
        bot = self._file.get(workspace, {}).get(bot_id)
        if bot is not None:
            return bot
        return self._default if bot_id == DEFAULT_BOT_ID else None

    def get(self, model_id: str | None, workspace: str = DEFAULT_WORKSPACE) -> Bot:
        """The bot a request's ``model`` names (none: the default bot); 404 model_not_found otherwise."""
        bot = self.find(model_id or DEFAULT_BOT_ID, workspace)
        if bot is None:
            names = [b.id for b in self.all(workspace)]
            shown = ", ".join(names[:20]) + (", …" if len(names) > 20 else "")
            raise NotFound(
                f"The model {model_id!r} does not exist; use one of: {shown} (see GET /v1/models).",
                param="model",
                code="model_not_found",
            )
        return bot

    def all(self, workspace: str = DEFAULT_WORKSPACE) -> list[Bot]:
        bots = {DEFAULT_BOT_ID: self._default, **self._file.get(workspace, {})}
        if self._store is not None:
            bots.update({s.id: self._from_store(s) for s in self._store.list_bots(workspace)})
        return sorted(bots.values(), key=lambda b: b.id)

    # -- management --------------------------------------------------------
    def _require_store(self) -> BotStore:
        if self._store is None:
            raise StorageError("Bot management needs a store: build BotService(settings, storage.bots).")
        return self._store

    def _read_only(self, bot_id: str, workspace: str) -> BotConflict:
        return BotConflict(
            f"Bot {bot_id!r} is declared in the bots file {self.settings.bots_file}; edit that file and restart "
            "the server to change it.",
            param="id",
            code="bot_read_only",
        )

    def create(self, workspace: str, bot: Bot | Mapping[str, Any]) -> Bot:
        """Store a new bot; 409 bot_exists when the id is taken in the workspace (the built-in default excepted)."""
        store = self._require_store()
        if not isinstance(bot, Bot):
            bot = validate_bot(bot, default_namespace=self.settings.default_namespace)
        if bot.id in self._file.get(workspace, {}):
            raise self._read_only(bot.id, workspace)
        stored = store.insert(workspace, bot.id, bot.config())
        if stored is None:
            raise BotConflict(
                f"A bot with id {bot.id!r} already exists; change it with PATCH /v1/bots/{bot.id} or pick another id.",
                param="id",
            )
        return self._from_store(stored)

    def update(self, workspace: str, bot_id: str, changes: Mapping[str, Any]) -> Bot:
        """Apply a partial update; PATCHing the built-in default stores an override of it."""
        store = self._require_store()
        if not isinstance(changes, Mapping):
            raise InvalidRequest("The request body must be a JSON object.")
        if "id" in changes and changes["id"] != bot_id:
            raise InvalidRequest("A bot's id cannot change; create a new bot and delete this one.", param="id")

        def apply(current: dict[str, Any] | None) -> dict[str, Any]:
            if current is None:
                if bot_id in self._file.get(workspace, {}):
                    raise self._read_only(bot_id, workspace)
                if bot_id != DEFAULT_BOT_ID:
                    raise NotFound(
                        f"No bot {bot_id!r} in this workspace (see GET /v1/bots).", param="id", code="bot_not_found"
                    )
                current = self._default.config()
            merged = {**current, **changes, "id": bot_id}
            return validate_bot(merged, default_namespace=self.settings.default_namespace).config()

        return self._from_store(store.update(workspace, bot_id, apply))

    def delete(self, workspace: str, bot_id: str) -> None:
        """Delete a stored bot; 409 for file-declared and built-in bots, 404 for unknown ids."""
        if self._require_store().delete(workspace, bot_id):
            return
        if bot_id in self._file.get(workspace, {}):
            raise self._read_only(bot_id, workspace)
        if bot_id == DEFAULT_BOT_ID:
            raise BotConflict(
                f"{DEFAULT_BOT_ID} is built in and cannot be deleted; PATCH it to change its settings.",
                param="id",
                code="bot_read_only",
            )
        raise NotFound(f"No bot {bot_id!r} in this workspace (see GET /v1/bots).", param="id", code="bot_not_found")
