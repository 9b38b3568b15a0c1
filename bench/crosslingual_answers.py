"""The default answerer asked in one language over paragraphs in another (issue 43): answered and declined.

XQuAD's ``xquad-xling-zh-en`` (Chinese questions, English paragraphs) and ``xquad-xling-en-de`` (English
questions, German paragraphs) from ``../shared/data/multilingual``. Each set's paragraphs of articles 000-039
are ingested (one text document each) on the server's defaults and embedded; then

* answerable: the first ``-n`` questions whose paragraph is in the base, asked through ``Answerer.stream``
  with the extractive generator; counted when the answer text holds a gold answer;
* unanswerable: every third question of articles 040-047 (left out of the base, so nothing answers them);
  counted as declined when nothing is cited.

    .venv/bin/python -m bench.crosslingual_answers [-n 100] [--set xquad-xling-zh-en]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from bench.common.paths import data_dir
from bench.multilingual_answers import ask_all, score
from calypso.config import Settings
from calypso.services import open_services
from calypso.services.answering import Answerer
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload

SETS = ("xquad-xling-zh-en", "xquad-xling-en-de")
FIRST_LEFT_OUT = 40  # articles from this one on are not in the base


def run_set(name: str, n: int) -> None:
    root = data_dir() / "multilingual" / name
    corpus = [json.loads(line) for line in (root / "corpus.jsonl").open(encoding="utf-8")]
    questions = {r["_id"]: r["text"] for r in map(json.loads, (root / "queries.jsonl").open(encoding="utf-8"))}
    rows = [json.loads(line) for line in (root / "answers.jsonl").open(encoding="utf-8")]
    left_out = {d["_id"] for d in corpus if int(d["_id"].split(":")[1]) >= FIRST_LEFT_OUT}
    answerable = [r for r in rows if r["context_id"] not in left_out][:n]
    unanswerable = [r for r in rows if r["context_id"] in left_out][::3][:n]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home))
        services = open_services(settings)
        try:
            for doc in corpus:
                if doc["_id"] not in left_out:
                    services.ingestion.ingest(Upload(f"{doc['text']}\n".encode(), f"{doc['_id']}.txt", name))
            embed_all(services.vectors)
            answerer = Answerer(services.documents, services.search, settings)
            asked = asyncio.run(ask_all(answerer, [questions[r["query_id"]] for r in answerable], name))
            refused = asyncio.run(ask_all(answerer, [questions[r["query_id"]] for r in unanswerable], name))
            asyncio.run(answerer.aclose())
        finally:
            services.close()
    answered = sum(score(row, answer).answer for row, answer in zip(answerable, asked, strict=True))
    declined = sum(not any(segment.citations for segment in answer.segments) for answer in refused)
    print(
        f"{name} ({settings.embedding_model}): gold answer quoted {answered}/{len(answerable)}, "
        f"unanswerable declined {declined}/{len(unanswerable)} ({time.perf_counter() - started:.0f} s)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=100, help="questions per kind and set")
    parser.add_argument("--set", choices=SETS, action="append", help="only this set (repeatable)")
    args = parser.parse_args()
    for name in args.set or SETS:
        run_set(name, args.n)


if __name__ == "__main__":
    main()
