"""Answer events in, Responses streaming events out; the non-streamed reply is the same renderer, replayed.

``ResponsesStreamRenderer`` returns each streaming event as a dict
``{"type": ..., **fields}`` without ``sequence_number`` or SSE framing (the
route numbers and frames them). Event order, as OpenAI streams a
file-search answer::

    response.created, response.in_progress
    [output_item.added (file_search_call), file_search_call.in_progress/.searching/.completed]
                                                        -- when retrieval ran
    output_item.added (message), content_part.added      -- with the first text (always, but for a
                                                            turn that only calls functions)
    output_text.delta … with output_text.annotation.added after the delta that closes its segment,
                       and output_text.sentence_status (Calypso's) once a sentence's status is final
    output_text.done, content_part.done, output_item.done (message),
    [output_item.added (function_call), function_call_arguments.delta/.done, output_item.done] per call
    [output_item.done (file_search_call)], response.completed
    -- or, on failure at any point: error, response.failed

The file_search_call's ``output_item.done`` comes last: its results carry ``source_index`` (display
numbers) and ``cited``, which exist only once the answer is written, and a streamed item must equal
the completed one (the numbers a client sees in annotations match the results').

``render_response`` replays a finished answer through the same renderer, so
the non-streamed reply equals ``response.completed`` and inline links and
annotations have one implementation.
"""

from __future__ import annotations

from typing import Any

from calypso.citations.events import (
    AnswerEvent,
    Done,
    MarkerEvent,
    Retrieved,
    SentenceEvent,
    TextEvent,
    ToolCallsEvent,
    answer_events,
)
from calypso.citations.grounded import GroundedAnswer, Source
from calypso.citations.offsets import OffsetMap
from calypso.dialects.content import place_claims, sentence_status
from calypso.dialects.responses import (
    InlineLinker,
    RenderOptions,
    aicore_metadata,
    all_source_urls,
    file_citation,
    file_search_results,
    url_citation,
)
from calypso.dialects.responses_wire import ResponseWire, function_call_item, new_id, output_text, usage


class ResponsesStreamRenderer:
    """One reply's streaming events, built as the answer events arrive.

    Call ``opening()`` first, then ``feed(event)`` for each answer event
    (``Retrieved`` first, ``Done`` last); after ``Done``, ``response`` is the
    completed response object. ``failed(...)`` gives the closing events of a
    stream that cannot finish.
    """

    def __init__(self, wire: ResponseWire, options: RenderOptions) -> None:
        self.wire = wire
        self.options = options
        self.response: dict[str, Any] | None = None  # set by Done
        self._query: str | None = None
        self._sources: list[Source] = []
        self._linker: InlineLinker | None = None
        self._output_index = 0  # the message's index in ``output``: 1 after a file_search_call
        self._message_open = False  # its output_item.added was sent (with the first text)
        self._tool_calls: list[dict[str, Any]] = []  # the model's function calls, announced after the text
        self._parts: list[str] = []
        self._length = 0
        self._annotations: list[dict[str, Any]] = []

    def opening(self) -> list[dict[str, Any]]:
        return [
            {"type": "response.created", "response": self.wire.skeleton("in_progress", [])},
            {"type": "response.in_progress", "response": self.wire.skeleton("in_progress", [])},
        ]

    def feed(self, event: AnswerEvent) -> list[dict[str, Any]]:
        if isinstance(event, Retrieved):
            return self._retrieved(event.sources, event.query)
        if isinstance(event, TextEvent):
            return self._delta(event.text)
        if isinstance(event, MarkerEvent):
            return self._marker(event)
        if isinstance(event, SentenceEvent):
            return self._sentence(event)
        if isinstance(event, ToolCallsEvent):
            self._tool_calls = list(event.calls)
            return []  # announced once the text is complete: see _function_calls
        if isinstance(event, Done):
            return self._done(event.answer)
        return []

    def failed(self, code: str | None, message: str, param: str | None = None) -> list[dict[str, Any]]:
        """OpenAI's ``error`` event, then ``response.failed`` carrying the error."""
        return [
            {"type": "error", "code": code, "message": message, "param": param},
            {
                "type": "response.failed",
                "response": self.wire.skeleton("failed", [], error={"code": code, "message": message}),
            },
        ]

    # -- events ---------------------------------------------------------------------------------

    def _item_event(self, kind: str, **fields: object) -> dict[str, Any]:
        return {"type": kind, "item_id": self.wire.message_id, "output_index": self._output_index, **fields}

    def _retrieved(self, sources: list[Source], query: str | None) -> list[dict[str, Any]]:
        self._query, self._sources = query, sources
        self._linker = InlineLinker(sources, self.options) if self.options.inline else None
        out: list[dict[str, Any]] = []
        if query is not None:
            wire = self.wire
            out.append(
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": wire.search_item(query, "in_progress", None),
                }
            )
            for phase in ("in_progress", "searching", "completed"):
                out.append({"type": f"response.file_search_call.{phase}", "output_index": 0, "item_id": wire.search_id})
            self._output_index = 1  # the item itself is done with the answer: see the module docstring
        return out

    def _open(self) -> list[dict[str, Any]]:
        """The message's opening events, the first time it has something to show."""
        if self._message_open:
            return []
        self._message_open = True
        return [
            {
                "type": "response.output_item.added",
                "output_index": self._output_index,
                "item": self.wire.message_item("", [], "in_progress"),
            },
            self._item_event("response.content_part.added", content_index=0, part=output_text("", [])),
        ]

    def _delta(self, text: str) -> list[dict[str, Any]]:
        opening = self._open()
        self._parts.append(text)
        self._length += len(text)
        return [*opening, self._item_event("response.output_text.delta", content_index=0, delta=text, logprobs=[])]

    def _annotation(self, annotation: dict[str, Any]) -> list[dict[str, Any]]:
        opening = self._open()
        self._annotations.append(annotation)
        index = len(self._annotations) - 1
        return [
            *opening,
            self._item_event(
                "response.output_text.annotation.added", content_index=0, annotation_index=index, annotation=annotation
            ),
        ]

    def _text(self) -> str:
        return "".join(self._parts)

    def _marker(self, event: MarkerEvent) -> list[dict[str, Any]]:
        segment = event.segment
        if segment is None or self.options.hidden or not self.options.annotate:
            return []  # a marker that cites nothing, sources hidden, or a JSON reply: nothing to show
        out: list[dict[str, Any]] = []
        if self._linker is None:
            text = self._text()
            for c in event.added:
                out += self._annotation(file_citation(text, segment, c, self._sources[c.retrieval_number - 1]))
            return out
        piece, links = self._linker.links(event.placement, segment, self._length)
        out += self._delta(piece) if piece else []
        # Later links land after this segment, so its offsets in the inline text are final now.
        offsets, text = self._linker.offsets, self._text()
        start, end = offsets.start(segment.start), offsets.end(segment.end)
        for link in links:
            out += self._annotation(url_citation(link, segment, start, end, text))
        return out

    def _sentence(self, event: SentenceEvent) -> list[dict[str, Any]]:
        """A sentence's status, on the text as the client has it (links inserted). Not an OpenAI event: its
        clients skip event types they do not know, and the completed response carries the same status."""
        offsets = self._linker.offsets if self._linker is not None else OffsetMap()
        status = sentence_status(event, offsets, self._text())
        opening = self._open()
        return [*opening, self._item_event("response.output_text.sentence_status", content_index=0, sentence=status)]

    def _function_calls(self, first_index: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(items, streamed events) of the model's function calls, at output indexes from ``first_index``."""
        items, events = [], []
        for index, call in enumerate(self._tool_calls, start=first_index):
            item_id = new_id("fc")
            item = function_call_item(call, item_id, "completed")
            items.append(item)
            opened = function_call_item(call, item_id, "in_progress", arguments="")
            ids = {"item_id": item["id"], "output_index": index}
            events += [
                {"type": "response.output_item.added", "output_index": index, "item": opened},
                {"type": "response.function_call_arguments.delta", **ids, "delta": item["arguments"]},
                {
                    "type": "response.function_call_arguments.done",
                    **ids,
                    "name": item["name"],
                    "arguments": item["arguments"],
                },
                {"type": "response.output_item.done", "output_index": index, "item": item},
            ]
        return items, events

    def _done(self, answer: GroundedAnswer) -> list[dict[str, Any]]:
        wire, options = self.wire, self.options
        text = self._text()
        # A max_output_tokens cut is OpenAI's "incomplete" (reason max_output_tokens), not "completed".
        status = "incomplete" if answer.finish_reason == "length" else "completed"
        message = wire.message_item(text, list(self._annotations), status)
        output = []
        search_done: list[dict[str, Any]] = []
        if answer.retrieval_ran and answer.knowledge_base:
            results = file_search_results(answer.by_display_number, options)
            search = wire.search_item(self._query, "completed", results)
            output.append(search)
            if self._query is not None:  # its output_item.added was streamed
                search_done.append({"type": "response.output_item.done", "output_index": 0, "item": search})
        closing: list[dict[str, Any]] = []
        if self._message_open or not self._tool_calls:  # a turn that only calls functions has no message
            closing = [
                *self._open(),
                self._item_event("response.output_text.done", content_index=0, text=text, logprobs=[]),
                self._item_event("response.content_part.done", content_index=0, part=message["content"][0]),
                {"type": "response.output_item.done", "output_index": self._output_index, "item": message},
            ]
            output.append(message)
        calls, call_events = self._function_calls(len(output))
        output += calls
        response = wire.skeleton(status, output, citations=all_source_urls(answer, options))
        if status == "incomplete":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        response["usage"] = usage(answer)
        # Plain text (no links) keeps the plain answer's offsets: an empty map.
        offsets = self._linker.offsets if self._linker is not None else OffsetMap()
        aicore = place_claims(aicore_metadata(answer, options), offsets, text)
        response["metadata"] = {**response["metadata"], "_aicore": aicore}
        self.response = response
        return [*closing, *call_events, *search_done, {"type": f"response.{status}", "response": response}]


def render_response(
    answer: GroundedAnswer, query: str | None, wire: ResponseWire, options: RenderOptions
) -> dict[str, Any]:
    """The non-streamed reply: the finished answer replayed through the streaming renderer."""
    renderer = ResponsesStreamRenderer(wire, options)
    renderer.feed(Retrieved(answer.sources, query))
    for event in answer_events(answer):
        renderer.feed(event)
    if answer.tool_calls:
        renderer.feed(ToolCallsEvent(answer.tool_calls))
    renderer.feed(Done(answer))
    assert renderer.response is not None
    return renderer.response
