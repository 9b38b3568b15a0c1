"""Bots: what the ``model`` field of a request names, and the scope it answers from.

For now one built-in bot, ``calypso-rag-agent``, configured from the
settings; bot management (API, TOML, workspaces) extends this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from calypso.config import Settings
from calypso.errors import NotFound

DEFAULT_BOT_ID = "calypso-rag-agent"


@dataclass(frozen=True)
class Bot:
    id: str
    namespace: str | None  # None: no knowledge base, answers from general knowledge, citations null
    document_ids: tuple[str, ...] | None = None
    passage_count: int = 5
    include_citations: bool = True
    marker_style: str = "numeric"  # chat completions: "numeric" ([n] + Sources appendix) or "source" ([Source N])
    inline_citations: bool = False  # responses: [[n]](url) links by default
    sources_policy: str = "visible"  # "visible" or "hidden"
    system_prompt: str | None = None
    generator: str | None = None  # None: the configured default
    created_at: int = 0


def default_bot(settings: Settings) -> Bot:
    return Bot(id=DEFAULT_BOT_ID, namespace=settings.default_namespace, passage_count=settings.passage_count)


class BotDirectory:
    """Looks bots up by id."""

    def __init__(self, settings: Settings) -> None:
        self._bots = {DEFAULT_BOT_ID: default_bot(settings)}

    def get(self, bot_id: str | None) -> Bot:
        bot = self._bots.get(bot_id or DEFAULT_BOT_ID)
        if bot is None:
            raise NotFound(
                f"The model {bot_id!r} does not exist; use one of: {', '.join(sorted(self._bots))} (see GET /v1/models).",
                param="model",
                code="model_not_found",
            )
        return bot

    def all(self) -> list[Bot]:
        return sorted(self._bots.values(), key=lambda b: b.id)
