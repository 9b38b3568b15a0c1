"""Time added by Calypso over the upstream's own: time to first token and full answer.

    .venv/bin/python -m bench.answer_latency            # SciFact (5,183 passages) and 200k synthetic
    .venv/bin/python -m bench.answer_latency --quick    # SciFact and 20k synthetic, fewer questions

The fake upstream replays a fixed 60-token answer (with split [Source N]
markers) at a fixed pace: first token after 50 ms, then 5 ms per token.
"Upstream alone" streams it straight from the fake with httpx; "Calypso"
is ``Answerer.stream`` (retrieval, prompt, upstream, marker parsing, quote
verification) on the same questions. The difference is Calypso's cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx

from bench.common import beir as be
from bench.common.served import build_home
from bench.common.stats import percentile
from bench.common.synthetic import synthetic_passages
from calypso.citations.events import TextEvent
from calypso.config import Settings
from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.scope import RetrievalScope
from calypso.services import open_services
from calypso.services.answering import Answerer, AskRequest, Done

ANSWER = (
    "The study reports a clear association between the exposure and the outcome [Source 1]. "
    "A second cohort found a smaller effect that was not significant after adjustment [Source 2]. "
    "Mechanistic work points to an inflammatory pathway [Source 3][Source 1], although the evidence "
    "remains limited to observational designs and small samples [Source 4]."
)
FIRST_TOKEN_DELAY = 0.05
TOKEN_DELAY = 0.005


def script() -> Script:
    return Script.from_text(ANSWER, token_size=6, first_token_delay=FIRST_TOKEN_DELAY, token_delay=TOKEN_DELAY)


async def upstream_alone(fake: FakeUpstream, question: str) -> tuple[float, float]:
    fake.script(script())
    body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": question}]}
    async with httpx.AsyncClient(timeout=30) as client:
        start = time.perf_counter()
        first = None
        async with client.stream("POST", f"{fake.base_url}/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if first is None and line.startswith("data: {"):
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    if choices[0].get("delta", {}).get("content"):
                        first = time.perf_counter() - start
        return first or float("nan"), time.perf_counter() - start


async def through_calypso(answerer: Answerer, fake: FakeUpstream, question: str) -> tuple[float, float, int]:
    fake.script(script())
    start = time.perf_counter()
    first = None
    segments = 0
    async for event in answerer.stream(
        AskRequest([{"role": "user", "content": question}], RetrievalScope(("general",)))
    ):
        if first is None and isinstance(event, TextEvent):
            first = time.perf_counter() - start
        if isinstance(event, Done):
            segments = len(event.answer.segments)
    return first or float("nan"), time.perf_counter() - start, segments


def measure(label: str, passages: list[str], questions: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp, FakeUpstream() as fake:
        home = Path(tmp)
        build_home(home, passages)
        settings = Settings(home=home, generator="upstream", llm_base_url=fake.base_url, llm_model="fake-model")
        services = open_services(settings)
        answerer = services.answering

        async def run() -> tuple[list, list]:
            await through_calypso(answerer, fake, questions[0])  # warm: index load, connection
            direct, ours = [], []
            for question in questions:
                direct.append(await upstream_alone(fake, question))
                ours.append(await through_calypso(answerer, fake, question))
            await answerer.aclose()
            return direct, ours

        direct, ours = asyncio.run(run())
        services.close()
    for name, index in (("first token", 0), ("full answer", 1)):
        up = [d[index] * 1000 for d in direct]
        cal = [o[index] * 1000 for o in ours]
        added = [c - u for c, u in zip(cal, up)]
        print(
            f"{label:>10} {len(passages):>8,} {name:>12} {percentile(up, 50):9.1f} {percentile(cal, 50):9.1f} "
            f"{percentile(added, 50):9.1f} {percentile(added, 99):9.1f}"
        )
    print(f"{'':>10} {'':>8} {'segments':>12} {sum(o[2] for o in ours) / len(ours):9.1f} per answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    root = be.scifact_dir()
    questions = list(be.load_queries(root).values())[: 30 if args.quick else 100]
    print(
        f"{len(questions)} SciFact questions; fake upstream: first token {FIRST_TOKEN_DELAY * 1000:.0f} ms, "
        f"{TOKEN_DELAY * 1000:.0f} ms/token; times in ms"
    )
    print(f"{'kb':>10} {'passages':>8} {'':>12} {'upstream':>9} {'calypso':>9} {'added p50':>9} {'added p99':>9}")
    measure("SciFact", list(be.load_corpus(root).values()), questions)
    measure("synthetic", synthetic_passages(20_000 if args.quick else 200_000), questions)


if __name__ == "__main__":
    main()
