"""Question in, grounded answer out: retrieve, prompt, generate, compose citations.

``Answerer.stream`` yields events as they happen (retrieval, plain-text
deltas, citation markers with their verified quotes, tool calls) and ends
with ``Done`` carrying the ``GroundedAnswer``; ``Answerer.answer`` drains it.
The API dialects only render these events.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import Any

from calypso.citations.claims import SentenceTracker
from calypso.citations.composer import AnswerComposer
from calypso.citations.events import AnswerEvent, Done, MarkerEvent, Retrieved, SentenceEvent, TextEvent, ToolCallsEvent
from calypso.citations.grounded import GroundedAnswer, Quote, Source
from calypso.citations.inference import AttributionMode, Attributor
from calypso.citations.relevance import NameCheck, answers_question
from calypso.citations.support import SUPPORT_THRESHOLD, best_evidence
from calypso.config import Settings, revealed
from calypso.errors import InvalidRequest
from calypso.generation import phrases, registry
from calypso.generation.base import Finish, GenerationRequest, Generator, TextDelta, ToolCalls
from calypso.generation.prompts import build_messages
from calypso.generation.similarity import EmbeddingSimilarity
from calypso.generation.slots import UpstreamSlots
from calypso.generation.upstream import UpstreamConfig
from calypso.models import Page, Passage
from calypso.retrieval.conversation_query import search_query
from calypso.scope import DEFAULT_WORKSPACE, RetrievalScope
from calypso.services.documents import DocumentService
from calypso.services.search import SearchService
from calypso.text.languages import detect

_ROLES = {"system", "developer", "user", "assistant", "tool"}


@dataclass(frozen=True)
class AskRequest:
    """One question as the answering service takes it; built once by ``services/turns.py`` and never changed."""

    messages: list[dict[str, Any]]
    scope: RetrievalScope  # no namespaces: answer without retrieval, citations null
    include_citations: bool = True
    system_prompt: str | None = None
    generator: str | None = None  # registry name; None: the configured default
    generator_model: str | None = None  # upstream model name; None: CALYPSO_LLM_MODEL
    temperature: float | None = None
    max_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    workspace: str = DEFAULT_WORKSPACE
    attribution: AttributionMode | None = None  # off | fill | verify; None: CALYPSO_ATTRIBUTION
    # The reply's format for the upstream (Chat Completions' response_format); None: plain text.
    response_format: dict[str, Any] | None = None
    # Other sampling options for the upstream as Chat Completions names them (top_p, stop, seed…).
    upstream_options: dict[str, Any] = field(default_factory=dict)
    retrieve: bool = True  # False: the client forbade tools (tool_choice "none"), so no file search either
    # Seed 004 (chat, conversations): no retrieval after a tool result. Responses searches the last user
    # turn again, so the text that follows a function call cites, as OpenAI's file_search would.
    search_after_tool: bool = False
    # Seed 004 searches the last user message as written. Responses searches the conversation: a short
    # follow-up with the user turn before it (``retrieval/conversation_query.py``).
    search_conversation: bool = False
    # The request's names for tools and response_format, for the 400 a generator without them gives.
    params: tuple[str, str] = ("tools", "response_format")

    @property
    def knowledge_base(self) -> bool:
        return self.scope.knowledge_base

    @property
    def citing(self) -> bool:
        """Whether citations can exist in the answer (known before generation starts)."""
        return self.scope.knowledge_base and self.include_citations


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") in ("text", "input_text", "output_text")
            and isinstance(part.get("text"), str)
        )
    return ""


def validate_messages(messages: list[dict[str, Any]]) -> None:
    if not messages:
        raise InvalidRequest(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
            param="messages",
            code="empty_array",
        )
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise InvalidRequest(
                f"messages[{i}] has an unknown role {message.get('role') if isinstance(message, dict) else message!r}; "
                f"use one of {', '.join(sorted(_ROLES))}.",
                param=f"messages[{i}].role",
            )
    last = messages[-1]
    if last["role"] not in ("user", "tool"):
        raise InvalidRequest("The last message must be a user message (or a tool result).", param="messages")
    if last["role"] == "user" and not message_text(last).strip():
        raise InvalidRequest("The last user message is empty; ask a question.", param="messages")


# The extractive answerer's own sentences claim nothing about the documents: "not a claim", never "unsupported".
OWN_SENTENCES = frozenset(
    (*phrases.NOT_FOUND.values(), *phrases.NO_KNOWLEDGE_BASE.values(), *phrases.QUOTED_IN.values())
)


def _track(tracker: SentenceTracker, event: TextEvent | MarkerEvent) -> list[SentenceEvent]:
    """Feed ``event`` to ``tracker``; the sentences whose status it made final."""
    if isinstance(event, MarkerEvent):
        if event.segment is not None:
            tracker.cited(event.segment)
        return []
    tracker.text(event.text)
    before = len(tracker.sentences)
    settled = tracker.settled()
    return [SentenceEvent(s, number, tracker.sentence_text(s)) for number, s in enumerate(settled, start=before)]


class Answerer:
    def __init__(self, documents: DocumentService, search: SearchService, settings: Settings | None = None) -> None:
        """``documents`` gives the pages a quote's page is found on; ``search`` the passages an answer rests on."""
        self.documents = documents
        self.search = search
        self.settings = settings or documents.settings
        self._generators: dict[str, Generator] = {}
        # One bound for every model on the upstream server (CALYPSO_LLM_MAX_CONNECTIONS), not one per model.
        self._upstream_slots = UpstreamSlots(self.settings.llm_max_connections, self.settings.llm_pool_timeout_seconds)
        self._pages = lru_cache(maxsize=256)(self._load_pages)

    # -- generators --------------------------------------------------------
    def default_generator_name(self) -> str:
        name = self.settings.generator
        if name == "auto":
            return "upstream" if self.settings.llm_base_url else "extractive"
        return name

    def generator(self, name: str | None = None, model: str | None = None) -> Generator:
        name = name or self.default_generator_name()
        key = f"{name}:{model or ''}"
        if key not in self._generators:
            self._generators[key] = self._build_generator(name, model)
        return self._generators[key]

    def _build_generator(self, name: str, model: str | None = None) -> Generator:
        if name == "extractive":
            return self._extractive()
        if name != "upstream":
            return registry.create(name)
        s = self.settings
        if not s.llm_base_url:
            raise InvalidRequest(
                "The upstream generator needs CALYPSO_LLM_BASE_URL (an OpenAI-compatible /v1 URL).", param="model"
            )
        return registry.create(
            "upstream",
            config=UpstreamConfig(
                base_url=s.llm_base_url,
                api_key=revealed(s.llm_api_key),
                model=model or s.llm_model or "",
                timeout_seconds=s.llm_timeout_seconds,
                max_connections=s.llm_max_connections,
                pool_timeout_seconds=s.llm_pool_timeout_seconds,
                max_retries=s.llm_max_retries,
            ),
            slots=self._upstream_slots,
        )

    def _extractive(self) -> Generator:
        """The built-in answerer, choosing sentences with the search's embedding model when there is one.

        The model is the server's own (a ``CachedEmbedder``): the question's vector is the one search
        stored, and sentences already seen are cache reads."""
        embedder = self.search.embedder  # the model search used: the question's vector is a cache read
        weight = self.settings.extractive_semantic_weight
        if embedder is None or weight <= 0:
            return registry.create("extractive")
        return registry.create("extractive", similarity=EmbeddingSimilarity(embedder), semantic_weight=weight)

    async def aclose(self) -> None:
        """Close the generators' connections; they are rebuilt on the next question."""
        generators, self._generators = list(self._generators.values()), {}
        for generator in generators:
            close = getattr(generator, "aclose", None)
            if close is not None:
                await close()

    # -- quotes ------------------------------------------------------------
    def _load_pages(self, workspace: str, document_id: str) -> tuple[Page, ...]:
        return tuple(self.documents.pages(document_id, workspace))

    def _page_at(self, passage: Passage, offset: int) -> tuple[int, str]:
        chunk = passage.chunk
        if chunk.page_start == chunk.page_end:
            return chunk.page_start, passage.page_label
        for page in self._pages(passage.document.workspace, passage.document.id):
            if page.start <= offset < page.end:
                return page.number, page.label
        return chunk.page_start, passage.page_label

    def find_quote(self, segment_text: str, source: Source, asked_in: str = "") -> Quote:
        """``asked_in``: the question's language, taken for a segment too short to tell its own."""
        passage = source.passage
        # The semantic feature (calypso.citations.semantic) only on request: it costs 46-380 ms a segment here.
        embedder = self.search.embedder if self.settings.support_semantic else None
        # Across languages (an English answer citing a Chinese passage) the search model reads it by meaning.
        evidence = best_evidence(
            segment_text, passage.chunk.text, embedder=embedder, across=self.search.embedder, asked_in=asked_in
        )
        threshold = self.settings.support_threshold
        threshold = SUPPORT_THRESHOLD if threshold is None else threshold
        document_start = passage.chunk.start + evidence.start
        page_number, page_label = self._page_at(passage, document_start)
        return Quote(
            text=evidence.text,
            passage_start=evidence.start,
            passage_end=evidence.end,
            document_start=document_start,
            document_end=passage.chunk.start + evidence.end,
            page_number=page_number,
            page_label=page_label,
            support=round(evidence.score, 4),
            supported=evidence.score >= threshold,
        )

    def check_supported(self, request: AskRequest) -> None:
        """A 400 naming the parameter when the request needs what its generator cannot do (function tools,
        structured output: the built-in extractive answerer writes neither)."""
        generator = self.generator(request.generator, request.generator_model)
        tools_param, format_param = request.params
        if request.tools and not generator.calls_tools:
            raise InvalidRequest(
                f"Function tools need an upstream model; this bot answers with the {generator.name} generator, "
                "which cannot call them. Configure CALYPSO_LLM_BASE_URL (docs/agents.md), or send only file_search.",
                param=tools_param,
                code="unsupported_parameter",
            )
        if request.response_format and not generator.writes_json:
            raise InvalidRequest(
                f"Structured output needs an upstream model; this bot answers with the {generator.name} "
                "generator, which writes sentences of the documents, not JSON. Configure CALYPSO_LLM_BASE_URL "
                "(docs/agents.md), or ask for text.",
                param=format_param,
                code="unsupported_parameter",
            )

    def _searches(self, request: AskRequest) -> bool:
        if not request.scope.knowledge_base or not request.retrieve:
            return False
        return request.messages[-1]["role"] != "tool" or request.search_after_tool

    def attribution_mode(self, request: AskRequest) -> AttributionMode:
        """The request's (its bot's) mode, else the server's; off where citations cannot exist (and for JSON,
        whose text is the client's data: nothing is inferred into it)."""
        if not request.citing or not self._searches(request):
            return "off"
        mode = request.attribution or self.settings.attribution
        return mode

    # -- the pipeline ------------------------------------------------------
    async def _retrieve(self, request: AskRequest) -> tuple[list[Passage] | None, str | None]:
        scope = request.scope
        if not self._searches(request):
            return None, None  # seed 004: no retrieval on a tool-result turn (nor when tools are forbidden)
        if request.search_conversation:
            query = search_query(request.messages, message_text)
        else:
            query = next((message_text(m) for m in reversed(request.messages) if m.get("role") == "user"), "")
        if scope.passage_count is None:  # an answer reads CALYPSO_PASSAGE_COUNT passages, a search another count
            scope = replace(scope, passage_count=self.settings.passage_count)
        return await self.search.search_async(query, scope, request.workspace), query

    async def stream(self, request: AskRequest) -> AsyncGenerator[AnswerEvent, None]:
        validate_messages(request.messages)
        generator = self.generator(request.generator, request.generator_model)
        passages, query = await self._retrieve(request)
        sources = [Source(i, p) for i, p in enumerate(passages or [], start=1)]
        yield Retrieved(sources, query, citing=request.knowledge_base and request.include_citations)

        generation = GenerationRequest(
            messages=build_messages(
                request.messages,
                passages,
                request.system_prompt,
                structured=request.response_format is not None,
                tools=bool(request.tools),
            ),
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            tools=request.tools,
            tool_choice=request.tool_choice,
            response_format=request.response_format,
            options=request.upstream_options,
            passages=passages or [],
            question=query or "",
            searched=passages is not None,
        )
        mode = self.attribution_mode(request)
        asked_in = detect(query or "", "")  # a model answers in the question's language
        find_quote = NameCheck(query or "", partial(self.find_quote, asked_in=asked_in), sources)
        attributor = Attributor(sources, find_quote, mode, OWN_SENTENCES) if mode != "off" and sources else None
        composer = AnswerComposer(
            sources, find_quote, self.settings.unsupported_citations == "drop", attributor=attributor
        )
        tracker = SentenceTracker(fixed=OWN_SENTENCES)
        finish: Finish | None = None
        tool_calls: list[dict[str, Any]] | None = None
        events = generator.stream(generation)
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    for produced in composer.feed(event.text):
                        yield produced
                        for sentence in _track(tracker, produced):
                            yield sentence
                elif isinstance(event, ToolCalls):
                    tool_calls = event.calls
                    yield ToolCallsEvent(event.calls)
                elif isinstance(event, Finish):
                    finish = event
        finally:
            await events.aclose()  # stops the upstream request if our consumer went away
        for produced in composer.flush():
            yield produced
            for sentence in _track(tracker, produced):
                yield sentence
        finish = finish or Finish("stop")
        answer = composer.finish(
            generator=generator.name,
            model=finish.model,
            knowledge_base=request.knowledge_base,
            citations_enabled=request.include_citations,
            retrieval_ran=passages is not None,
            finish_reason=finish.reason,
            tool_calls=tool_calls,
            prompt_tokens=finish.usage.prompt_tokens,
            completion_tokens=finish.usage.completion_tokens,
            attribution=mode,
        )
        before = len(tracker.sentences)
        for number, status in enumerate(tracker.finish(answer), start=before):
            yield SentenceEvent(status, number, answer.text[status.start : status.end])
        answer.sentences = tracker.sentences
        if query and answer.cited_sources:
            answer.answers_question = answers_question(query, answer)
        yield Done(answer)

    async def answer(self, request: AskRequest) -> GroundedAnswer:
        async for event in self.stream(request):
            if isinstance(event, Done):
                return event.answer
        raise RuntimeError("the answer stream ended without a result")
