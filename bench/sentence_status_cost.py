"""What the per-sentence status costs per answer (issue 24), beside ``bench/inference_cost.py``.

Same setup as inference_cost.py: the Alps PDF, the 39 questions, the fake upstream in markerless mode
(a sentence copied from each of the five retrieved passages, then an unsupported one) streamed in
4-character tokens, ``attribution`` fill. Each answer's composer events are recorded from
``Answerer.stream``; then, in the same process, they are fed again to

- a fresh ``SentenceTracker`` (what streaming statuses cost: the text after each event, cuts settled), and
- ``sentence_support`` over the finished answer (the one-pass status, the reference),

and the wall time of each is the cost per answer. The whole answer's p50 is printed beside them.

    .venv/bin/python -m bench.sentence_status_cost
"""

from __future__ import annotations

import asyncio
import statistics
import time

from bench.common.alps import alps_answerer, alps_questions
from calypso.citations.claims import SentenceTracker, sentence_support
from calypso.citations.events import AnswerEvent, Done, MarkerEvent, TextEvent
from calypso.citations.grounded import GroundedAnswer
from calypso.scope import RetrievalScope
from calypso.services.answering import OWN_SENTENCES, Answerer, AskRequest

UNSUPPORTED = "My neighbour's grey cat prefers warm sofas to cold mountain passes."


async def record(answerer: Answerer, question: str) -> tuple[list[AnswerEvent], GroundedAnswer, float]:
    request = AskRequest(
        [{"role": "user", "content": question}], RetrievalScope(namespaces=("alps",)), generator="upstream"
    )
    events: list[AnswerEvent] = []
    started = time.perf_counter()
    answer = None
    async for event in answerer.stream(request):
        events.append(event)
        if isinstance(event, Done):
            answer = event.answer
    assert answer is not None
    return events, answer, (time.perf_counter() - started) * 1000


def tracked(events: list[AnswerEvent], answer: GroundedAnswer) -> float:
    started = time.perf_counter()
    tracker = SentenceTracker(fixed=OWN_SENTENCES)
    for event in events:
        if isinstance(event, MarkerEvent) and event.segment is not None:
            tracker.cited(event.segment)
        elif isinstance(event, TextEvent):
            tracker.text(event.text)
            tracker.settled()
    tracker.finish(answer)
    elapsed = (time.perf_counter() - started) * 1000
    assert tracker.sentences == answer.sentences
    return elapsed


def one_pass(answer: GroundedAnswer) -> float:
    started = time.perf_counter()
    sentence_support(answer, fixed=OWN_SENTENCES)
    return (time.perf_counter() - started) * 1000


def main() -> None:
    rows = alps_questions()
    with alps_answerer(UNSUPPORTED) as answerer:
        asyncio.run(record(answerer, str(rows[0]["question"])))  # warm up
        recorded = [asyncio.run(record(answerer, str(row["question"]).strip())) for row in rows]
    whole = [ms for _, _, ms in recorded]
    streaming = [tracked(events, answer) for events, answer, _ in recorded]
    reference = [one_pass(answer) for _, answer, _ in recorded]
    sentences = statistics.mean(len(answer.sentences) for _, answer, _ in recorded)
    texts = statistics.mean(sum(isinstance(e, TextEvent) for e in events) for events, _, _ in recorded)
    print(f"{'what':<38} {'p50 ms':>8} {'p90 ms':>8}")
    for name, times in [
        ("whole answer (stream, attribution fill)", whole),
        ("streamed statuses (SentenceTracker)", streaming),
        ("one-pass statuses (sentence_support)", reference),
    ]:
        p90 = sorted(times)[int(0.9 * (len(times) - 1))]
        print(f"{name:<38} {statistics.median(times):>8.2f} {p90:>8.2f}")
    print(f"({len(rows)} questions; {sentences:.1f} sentences and {texts:.0f} text events per answer)")


if __name__ == "__main__":
    main()
