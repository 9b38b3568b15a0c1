"""One turn, prepared once: what a surface parsed in; the frozen ``AskRequest`` and the turn's policy out.

Every surface (Responses, Chat Completions, conversations, the xAI gRPC chat, MCP's ``ask``, ``calypso ask``)
parses its wire format into a ``TurnInput`` and calls ``TurnPreparer.prepare_async`` (``prepare`` where no event
loop runs). What a turn may be answered from and shown with is decided here, the same way for all of them: the
bot a request names, the scope a tool or argument narrows it to (each store it names looked up), the request's
options over the bot's, whether sources are hidden (the bot's or the workspace's policy), whether inline links
are shown, and the 400 for what the bot's generator cannot do.

Store reads off the event loop, one rule: a surface on an event loop awaits ``prepare_async``, which runs every
store read of the turn (bot, named stores, their file filters, the sources policy) in one worker thread; the
decisions that read no store run after it, on the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from calypso.bots import Bot, bot_scope
from calypso.config import Settings
from calypso.dialects.styles import PLAIN, RenderStyle, style_for
from calypso.errors import CalypsoError, NotFound
from calypso.models import RankingOptions
from calypso.retrieval.filters import Predicate
from calypso.scope import DEFAULT_WORKSPACE, RetrievalScope, check_namespace
from calypso.services.answering import Answerer, AskRequest, validate_messages
from calypso.services.bots import BotService
from calypso.services.keys import PolicyService
from calypso.services.vector_stores import VectorStoreService

# A store the request names that does not exist, in the surface's own words: (store id, the service's 404) -> error.
MissingStore = Callable[[str, NotFound], CalypsoError]


@dataclass(frozen=True)
class Narrowing:
    """Where a request's own tool or argument says to search, over its bot's scope (nothing: the bot's scope)."""

    namespaces: tuple[str, ...] | None = None  # replace the bot's namespaces (names already checked by the surface)
    look_up: tuple[tuple[str, str], ...] = ()  # (store id, param): each must be a usable vector store (404, 400)
    bot_documents: bool = True  # keep the bot's document_ids (a tool narrows within them); False: the stores whole
    passage_count: int | None = None
    ranking: RankingOptions | None = None
    filters: tuple[Predicate, ...] = ()  # file attributes a document must match (a file_search tool's filters)
    missing: MissingStore | None = None  # None: the vector stores' own 404


@dataclass(frozen=True)
class TurnInput:
    """What a surface parsed of one question; every option left None falls back to the bot's, then the server's."""

    messages: list[dict[str, Any]]
    workspace: str = DEFAULT_WORKSPACE
    bot: str | None = None  # the id the request names (``model``); None: the default bot
    narrowing: Narrowing = field(default_factory=Narrowing)
    inline_citations: bool | None = None  # include flags: asked (True), refused (False), the bot's default (None)
    generator: str | None = None  # a generator the caller chose over the bot's (``calypso ask --generator``)
    temperature: float | None = None
    max_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None  # Chat Completions function tools for the upstream
    tool_choice: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    upstream_options: Mapping[str, Any] = field(default_factory=dict)
    retrieve: bool = True  # False: the client forbade tools, so no file search either
    search_after_tool: bool = False  # see AskRequest: Responses searches again after a tool result
    search_conversation: bool = False  # see AskRequest: Responses searches the conversation, not the last turn
    params: tuple[str, str] = ("tools", "response_format")  # the request's names for tools and response_format


@dataclass(frozen=True)
class TurnPolicy:
    """How a turn's answer may be shown, decided once for every surface."""

    sources_hidden: bool  # the bot's or the workspace's sources policy: grounding state ``hidden``
    inline_links: bool  # ``[[n]](url)`` links (Responses, xAI): asked for or the bot's default; never when hidden
    chat_style: RenderStyle  # Chat Completions and conversations: the bot's markers, hidden, or plain for JSON


@dataclass(frozen=True)
class PreparedTurn:
    bot: Bot
    ask: AskRequest
    policy: TurnPolicy


@dataclass(frozen=True)
class _Read:
    """What a turn reads from the stores (``TurnPreparer.read``), before anything is decided."""

    parsed: TurnInput
    bot: Bot
    scope: RetrievalScope
    sources_hidden: bool


class TurnPreparer:
    def __init__(
        self,
        settings: Settings,
        bots: BotService,
        policies: PolicyService,
        stores: VectorStoreService,
        answering: Answerer,
    ) -> None:
        self.settings = settings
        self.bots = bots
        self.policies = policies
        self.stores = stores
        self.answering = answering

    def namespace(self, name: str | None, param: str = "namespace") -> str:
        """The namespace a request names, or the default one; InvalidNamespace naming ``param``."""
        return check_namespace(self.settings.namespace_or_default(name), param)

    async def prepare_async(self, parsed: TurnInput) -> PreparedTurn:
        """``prepare`` for a surface on an event loop: the store reads in a worker thread, the rest here."""
        return self.decide(await asyncio.to_thread(self.read, parsed))

    def prepare(self, parsed: TurnInput) -> PreparedTurn:
        """The turn's request and policy; raises the surface's 4xx (NotFound, InvalidRequest) naming the field."""
        return self.decide(self.read(parsed))

    # -- the two halves -------------------------------------------------------------------------
    def read(self, parsed: TurnInput) -> _Read:
        """Every store read of a turn (blocking): the bot, the stores the request names, the sources policy."""
        bot = self.bots.get(parsed.bot, workspace=parsed.workspace)
        scope = self._scope(bot, parsed.narrowing, parsed.workspace)
        validate_messages(parsed.messages)
        hidden = self.policies.sources_hidden(parsed.workspace, bot.sources_policy)
        return _Read(parsed, bot, scope, hidden)

    def decide(self, read: _Read) -> PreparedTurn:
        """The request, over the bot's options, and its policy; a 400 for what the generator cannot do."""
        parsed, bot = read.parsed, read.bot
        defaults = bot.generator_options
        ask = AskRequest(
            messages=list(parsed.messages),
            scope=read.scope,
            include_citations=bot.include_citations,
            system_prompt=bot.system_prompt,
            generator=parsed.generator or bot.generator,
            generator_model=defaults.get("model"),
            temperature=parsed.temperature if parsed.temperature is not None else defaults.get("temperature"),
            max_tokens=parsed.max_tokens if parsed.max_tokens is not None else defaults.get("max_tokens"),
            tools=parsed.tools,
            tool_choice=parsed.tool_choice,
            workspace=parsed.workspace,
            attribution=bot.attribution,
            response_format=parsed.response_format,
            upstream_options=dict(parsed.upstream_options),
            retrieve=parsed.retrieve,
            search_after_tool=parsed.search_after_tool,
            search_conversation=parsed.search_conversation,
            params=parsed.params,
        )
        self.answering.check_supported(ask)  # before any stream opens: a 400 naming tools or the format
        hidden = read.sources_hidden
        inline = parsed.inline_citations if parsed.inline_citations is not None else bot.inline_citations
        style = style_for(bot.marker_style, hidden)
        if ask.response_format is not None and not hidden:
            style = PLAIN  # JSON content as the model wrote it: no markers, no "Sources:" appendix
        return PreparedTurn(bot, ask, TurnPolicy(hidden, inline and not hidden, style))

    def _scope(self, bot: Bot, narrowing: Narrowing, workspace: str) -> RetrievalScope:
        """The bot's scope, narrowed; the named stores looked up first (a 404 or an expired store's 400)."""
        scope = bot_scope(bot)
        if narrowing.namespaces is not None:
            documents = scope.document_ids if narrowing.bot_documents else None
            scope = replace(scope, namespaces=narrowing.namespaces, document_ids=documents)
        if narrowing.passage_count is not None:
            scope = replace(scope, passage_count=narrowing.passage_count)
        if narrowing.ranking is not None:
            scope = replace(scope, ranking=narrowing.ranking)
        for store_id, param in narrowing.look_up:
            try:
                self.stores.check_usable(workspace, store_id, param)
            except NotFound as exc:
                if narrowing.missing is None:
                    raise
                raise narrowing.missing(store_id, exc) from exc
        for predicate in narrowing.filters:
            ids = self.stores.matching_documents(workspace, scope.namespaces, predicate)
            allowed = scope.document_ids
            # A bot restricted to documents never widens beyond them.
            scope = replace(scope, document_ids=tuple(sorted(ids if allowed is None else ids & set(allowed))))
        return scope
