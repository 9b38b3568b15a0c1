"""A bot: what the ``model`` field of a request names. Its fields, their validation, the bots file.

``calypso.services.bots`` finds a workspace's bots; this module only says what
a valid bot is.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from calypso.citations.inference import AttributionMode
from calypso.config import Settings
from calypso.dialects.styles import MarkerStyle
from calypso.errors import InvalidNamespace, InvalidRequest
from calypso.models import SourcesPolicy
from calypso.scope import DEFAULT_WORKSPACE, MAX_PASSAGES, RetrievalScope, check_namespace
from calypso.validation import WholeNumber, invalid_request_from

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
    "attribution",
)
MAX_DOCUMENT_IDS = 1000
MAX_SYSTEM_PROMPT = 32_000


class BotsFileError(Exception):
    """The bots file cannot be loaded; the message names the file and the problem."""


def _problem(message: str) -> PydanticCustomError:
    # A custom error keeps our full-sentence message as is; its type becomes the error code.
    return PydanticCustomError("invalid_value", message)


class Bot(BaseModel):
    """One bot's configuration; constructing it validates every field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    namespace: str | None  # None: no knowledge base, answers from general knowledge, citations null
    document_ids: tuple[StrictStr, ...] | None = None  # None: the whole namespace
    passage_count: WholeNumber = Field(5, ge=1, le=MAX_PASSAGES)
    include_citations: StrictBool = True
    marker_style: MarkerStyle = "numeric"  # chat: [n] + Sources appendix, or [Source N]
    inline_citations: StrictBool = False  # responses: [[n]](url) links by default
    sources_policy: SourcesPolicy = "visible"
    system_prompt: StrictStr | None = Field(None, max_length=MAX_SYSTEM_PROMPT)
    generator: StrictStr | None = None  # a generator registry name; None: the configured default
    generator_options: dict[str, Any] = Field(default_factory=dict)  # temperature, max_tokens, model, …
    # Citations for sentences the model left uncited (citations/inference.py); None: CALYPSO_ATTRIBUTION.
    attribution: AttributionMode | None = None
    source: Literal["api", "file", "default"] = "api"
    created_at: int = 0
    updated_at: int = 0

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not isinstance(value, str) or not _ID.fullmatch(value):
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
        raise invalid_request_from(exc, values) from exc
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


def bot_scope(bot: Bot) -> RetrievalScope:
    """What the bot answers from: its namespace (none: no knowledge base), documents and passage count."""
    return RetrievalScope(
        namespaces=(bot.namespace,) if bot.namespace is not None else (),
        document_ids=bot.document_ids,
        passage_count=bot.passage_count,
    )
