"""Bots: what the ``model`` field of a request names, and the scope it answers from.

A workspace's bots come from three sources, looked up in this order:

1. bots created through ``/v1/bots`` (stored in SQLite, per workspace);
2. bots declared in the TOML file ``CALYPSO_BOTS_FILE`` (loaded once at start;
   read-only through the API, since the file is the source of truth);
3. ``calypso-rag-agent``, present in every workspace, answering from the
   default namespace.

A bot in an earlier source hides one with the same id in a later source, so a
workspace overrides ``calypso-rag-agent`` by creating (or PATCHing) a bot with
that id, and deleting the override brings the built-in back.
"""

from __future__ import annotations

import json
import logging
import re
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from calypso.answering import AskRequest
from calypso.config import Settings
from calypso.errors import Conflict, InvalidNamespace, InvalidRequest, NotFound, StorageError
from calypso.knowledge import DEFAULT_WORKSPACE, check_namespace
from calypso.store.bots import BotStore, StoredBot
from calypso.store.sqlite import SQLiteStore

log = logging.getLogger("calypso.bots")

DEFAULT_BOT_ID = "calypso-rag-agent"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# The settings a client may set; everything else on a Bot is bookkeeping.
CONFIG_FIELDS = (
    "namespace",
    "document_ids",
    "passage_count",
    "include_citations",
    "marker_style",
    "inline_citations",
    "sources_policy",
    "system_prompt",
    "generator",
    "generator_options",
)
MAX_DOCUMENT_IDS = 1000
MAX_SYSTEM_PROMPT = 32_000


class BotConflict(Conflict):
    """409: the id is taken, or the bot cannot be changed through the API."""

    default_code = "bot_exists"


class BotsFileError(Exception):
    """The bots file cannot be loaded; the message names the file and the problem."""


def _problem(message: str) -> PydanticCustomError:
    # A custom error type keeps our full-sentence message as is (see _invalid).
    return PydanticCustomError("calypso", message)


class Bot(BaseModel):
    """One bot's configuration; constructing it validates every field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    namespace: str | None  # None: no knowledge base, answers from general knowledge, citations null
    document_ids: tuple[StrictStr, ...] | None = None  # None: the whole namespace
    passage_count: Annotated[StrictInt, Field(ge=1, le=50)] = 5
    include_citations: StrictBool = True
    marker_style: Literal["numeric", "source"] = "numeric"  # chat: [n] + Sources appendix, or [Source N]
    inline_citations: StrictBool = False  # responses: [[n]](url) links by default
    sources_policy: Literal["visible", "hidden"] = "visible"
    system_prompt: StrictStr | None = Field(None, max_length=MAX_SYSTEM_PROMPT)
    generator: StrictStr | None = None  # a generator registry name; None: the configured default
    generator_options: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens, model, …
    source: Literal["api", "file", "default"] = "api"
    created_at: int = 0
    updated_at: int = 0

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not isinstance(value, str) or not _ID.match(value):
            raise _problem(
                f"Invalid bot id {value!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit."
            )
        return value

    @field_validator("namespace")
    @classmethod
    def _check_namespace(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                check_namespace(value)
            except InvalidNamespace as exc:
                raise PydanticCustomError(
                    "invalid_namespace", exc.message + " Use null for a bot without a knowledge base."
                ) from exc
        return value

    @field_validator("document_ids")
    @classmethod
    def _check_documents(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        # An empty list would retrieve nothing at all: almost certainly a mistake.
        if not value:
            raise _problem("document_ids is empty; use null to search the whole namespace, or list at least one id.")
        if len(value) > MAX_DOCUMENT_IDS:
            raise _problem(f"document_ids lists {len(value)} ids; the limit is {MAX_DOCUMENT_IDS}.")
        if any(not i for i in value):
            raise _problem("document_ids contains an empty id.")
        return tuple(dict.fromkeys(value))  # drop repeats, keep order

    @field_validator("generator_options")
    @classmethod
    def _check_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key, option in value.items():
            number = isinstance(option, (int, float)) and not isinstance(option, bool)
            if key == "temperature" and not (number and 0 <= option <= 2):
                raise _problem(f"generator_options.temperature must be a number from 0 to 2, got {option!r}.")
            if key == "max_tokens" and not (isinstance(option, int) and not isinstance(option, bool) and option >= 1):
                raise _problem(f"generator_options.max_tokens must be a positive integer, got {option!r}.")
            if key == "model" and not (isinstance(option, str) and option):
                raise _problem(f"generator_options.model must be a non-empty string, got {option!r}.")
        try:
            json.dumps(value)  # stored as JSON; TOML dates and the like would not survive
        except (TypeError, ValueError) as exc:
            raise _problem(f"generator_options must hold JSON values only: {exc}.") from None
        return value

    def config(self) -> dict[str, Any]:
        """The client-settable fields, JSON-ready (what the store keeps)."""
        data = self.model_dump(include=set(CONFIG_FIELDS))
        if data["document_ids"] is not None:
            data["document_ids"] = list(data["document_ids"])
        return data


def _param(loc: tuple) -> str | None:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or None


def _invalid(exc: ValidationError) -> InvalidRequest:
    error = exc.errors()[0]
    param = _param(tuple(error["loc"]))
    if error["type"] == "invalid_namespace":
        return InvalidNamespace(error["msg"], param=param)
    if error["type"] == "calypso":
        return InvalidRequest(error["msg"], param=param, code="invalid_value")
    return InvalidRequest(f"Invalid value for {param}: {error['msg']}.", param=param, code="invalid_value")


def validate_bot(
    data: Mapping[str, Any], *, default_namespace: str, source: str = "api", created_at: int = 0, updated_at: int = 0
) -> Bot:
    """A Bot from client (or bots file) fields; InvalidRequest naming the param when anything is wrong.

    An omitted namespace means the default one; an explicit null means no knowledge base.
    """
    for key in data:
        if key not in CONFIG_FIELDS and key != "id":
            raise InvalidRequest(
                f"Unrecognized bot field {key!r}; accepted: id, {', '.join(CONFIG_FIELDS)}.",
                param=str(key),
                code="unknown_parameter",
            )
    if "id" not in data:
        raise InvalidRequest("Missing required parameter: id.", param="id", code="missing_required_parameter")
    values = {
        "namespace": default_namespace,
        **data,
        "source": source,
        "created_at": created_at,
        "updated_at": updated_at,
    }
    try:
        bot = Bot.model_validate(values)
    except ValidationError as exc:
        raise _invalid(exc) from exc
    # Checked on input only: a stored bot whose plugin went away must still load (and fail when asked).
    from calypso.generation import registry

    if bot.generator is not None and bot.generator not in registry.available():
        raise InvalidRequest(
            f"Unknown generator {bot.generator!r}; use one of: {', '.join(registry.available())}, or null for the default.",
            param="generator",
            code="invalid_value",
        )
    return bot


def default_bot(settings: Settings, created_at: int = 0) -> Bot:
    return Bot(
        id=DEFAULT_BOT_ID,
        namespace=settings.default_namespace,
        passage_count=settings.passage_count,
        source="default",
        created_at=created_at,
        updated_at=created_at,
    )


def load_bots_file(path: Path, settings: Settings, loaded_at: int = 0) -> dict[str, dict[str, Bot]]:
    """The bots declared in a TOML file, by workspace then id; BotsFileError naming the file and the problem."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise BotsFileError(
            f"Bots file {path} (CALYPSO_BOTS_FILE) does not exist; create it or unset the setting."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise BotsFileError(f"Bots file {path} is not valid TOML: {exc}.") from exc
    except OSError as exc:
        raise BotsFileError(f"Cannot read bots file {path}: {exc}.") from exc
    extra = sorted(set(data) - {"bots"})
    if extra:
        raise BotsFileError(
            f"Bots file {path}: unknown top-level key {extra[0]!r}; declare each bot as a [[bots]] table."
        )
    entries = data.get("bots", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise BotsFileError(f"Bots file {path}: 'bots' must be an array of tables, written [[bots]].")
    bots: dict[str, dict[str, Bot]] = {}
    for n, entry in enumerate(entries, start=1):
        entry = dict(entry)
        where = f"Bots file {path}, [[bots]] #{n}" + (
            f" (id {entry['id']!r})" if isinstance(entry.get("id"), str) else ""
        )
        workspace = entry.pop("workspace", DEFAULT_WORKSPACE)
        if not isinstance(workspace, str) or not workspace:
            raise BotsFileError(f"{where}: workspace must be a non-empty string, got {workspace!r}.")
        if entry.get("namespace") == "":
            entry["namespace"] = None  # TOML has no null: an empty namespace means no knowledge base
        try:
            bot = validate_bot(
                entry,
                default_namespace=settings.default_namespace,
                source="file",
                created_at=loaded_at,
                updated_at=loaded_at,
            )
        except InvalidRequest as exc:
            raise BotsFileError(f"{where}: {exc.message}") from exc
        if bot.id in bots.setdefault(workspace, {}):
            raise BotsFileError(f"{where}: bot id {bot.id!r} is declared twice in workspace {workspace!r}.")
        bots[workspace][bot.id] = bot
    return bots


class BotDirectory:
    """The bots of every workspace: stored, then declared in the bots file, then the built-in default."""

    def __init__(self, settings: Settings, store: SQLiteStore | None = None) -> None:
        # store None: only file and default bots (create/update/delete refuse).
        self.settings = settings
        self._store = BotStore(store) if store is not None else None
        started = int(time.time())
        self._default = default_bot(settings, started)
        self._file: dict[str, dict[str, Bot]] = (
            load_bots_file(settings.bots_file, settings, started) if settings.bots_file else {}
        )
        # The default workspace's file bots; tests add bots here directly as a seam.
        self._bots = self._file.setdefault(DEFAULT_WORKSPACE, {})
        if self._store is not None:
            for workspace, bot_id in self._store.keys():
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
            bots.update({s.id: self._from_store(s) for s in self._store.list(workspace)})
        return sorted(bots.values(), key=lambda b: b.id)

    # -- management --------------------------------------------------------
    def _require_store(self) -> BotStore:
        if self._store is None:
            raise StorageError("Bot management needs a store: build BotDirectory(settings, kb.store).")
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

        def apply(current: dict | None) -> dict:
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


def ask_request(bot: Bot, messages: list[dict], **options: Any) -> AskRequest:
    """What a bot's configuration says to retrieve and how to answer; request options win over the bot's."""
    defaults = bot.generator_options
    for name in ("temperature", "max_tokens"):
        if options.get(name) is None and defaults.get(name) is not None:
            options[name] = defaults[name]
    scope = {
        "namespace": bot.namespace,
        "knowledge_base": bot.namespace is not None,
        "document_ids": list(bot.document_ids) if bot.document_ids is not None else None,
        "passage_count": bot.passage_count,
    }
    scope.update({k: v for k, v in options.items() if k in scope and v is not None})
    rest = {k: v for k, v in options.items() if k not in scope}
    return AskRequest(
        messages=messages,
        include_citations=bot.include_citations,
        system_prompt=bot.system_prompt,
        generator=bot.generator,
        generator_model=defaults.get("model"),
        **scope,
        **rest,
    )
