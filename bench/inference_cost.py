"""What inferred attribution costs per answer (issue 17): the answering service with the scripted upstream.

The Alps PDF goes into a temporary knowledge base; for each of the 39 questions the
fake upstream answers in markerless mode (one sentence copied from each of the five
retrieved passages, then an unsupported sentence), streamed in 4-character tokens.
The answer goes through ``Answerer.stream`` with ``attribution`` off, fill and verify;
the figure is the wall time per answer (retrieval, HTTP to the loopback fake, composer),
so fill − off is what inference adds.

    .venv/bin/python -m bench.inference_cost
"""

from __future__ import annotations

import asyncio
import statistics
import time

from bench.common.alps import alps_answerer, alps_questions
from calypso.citations.events import Done
from calypso.scope import RetrievalScope
from calypso.services.answering import Answerer, AskRequest

UNSUPPORTED = "My neighbour's grey cat prefers warm sofas to cold mountain passes."


async def run(answerer: Answerer, rows: list[dict], mode: str) -> tuple[list[float], int]:
    times, inferred = [], 0
    for row in rows:
        request = AskRequest(
            [{"role": "user", "content": row["question"].strip()}],
            RetrievalScope(namespaces=("alps",)),
            generator="upstream",
            attribution=mode,  # type: ignore[arg-type]
        )
        started = time.perf_counter()
        async for event in answerer.stream(request):
            if isinstance(event, Done):
                inferred += event.answer.attribution_counts()["inferred"]
        times.append((time.perf_counter() - started) * 1000)
    return times, inferred


def main() -> None:
    rows = alps_questions()
    with alps_answerer(UNSUPPORTED) as answerer:
        asyncio.run(run(answerer, rows[:3], "fill"))  # warm up
        print(f"{'mode':<7} {'p50 ms':>7} {'p90 ms':>7} {'inferred/answer':>16}")
        for mode in ("off", "fill", "verify"):
            times, inferred = asyncio.run(run(answerer, rows, mode))
            p90 = sorted(times)[int(0.9 * (len(times) - 1))]
            print(f"{mode:<7} {statistics.median(times):>7.1f} {p90:>7.1f} {inferred / len(rows):>16.2f}")
    print(f"({len(rows)} questions, 6 sentences per answer, 5 passages)")


if __name__ == "__main__":
    main()
