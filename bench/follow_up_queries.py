"""Short follow-ups ("Why?", "And when?"): what the conversation query rule gains, and what it touches.

``retrieval/conversation_query.py`` searches a last user message of at most 4 words together with the
user turn before it. Two figures:

1. Gain, on the Alps PDF (39 SQuAD questions with gold pages, keyword search): each question is asked,
   then a short follow-up about the same passage ("Why?", "When was that?" …); how often the first
   passage of the follow-up's search lies on the question's gold page, searching the follow-up alone
   (the old rule: the last message only) and by the conversation rule.
2. Reach: the share of real standalone questions (SciFact's 1,109 queries, the 39 Alps questions, the
   German and Chinese sets) that the rule would combine if they came second in a conversation. A
   question asked first (or alone) is never changed.

    .venv/bin/python -m bench.follow_up_queries
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from bench.common import beir as be
from calypso.config import Settings
from calypso.models import RankingOptions
from calypso.retrieval.conversation_query import is_follow_up, search_query
from calypso.services import open_services
from calypso.services.ingestion import Upload

FOLLOW_UPS = ("Why?", "When was that?", "Where?", "Tell me more.", "And who?")
KEYWORD = RankingOptions(embedding_weight=0)


def _text(message: dict[str, str]) -> str:
    return message["content"]


def gain(root: Path) -> None:
    rows = [json.loads(line) for line in open(root / "alps_qa_with_pdf_pages.jsonl", encoding="utf-8")]
    with tempfile.TemporaryDirectory() as home:
        services = open_services(Settings(home=Path(home), embedding_model="none"))
        try:
            services.ingestion.ingest(Upload((root / "alps_wiki.pdf").read_bytes(), "alps_wiki.pdf"))
            alone = combined = total = 0
            for row in rows:
                gold = set(row["gold_pdf_pages"])
                for follow_up in FOLLOW_UPS:
                    conversation = [
                        {"role": "user", "content": row["question"]},
                        {"role": "assistant", "content": row["answer"]},
                        {"role": "user", "content": follow_up},
                    ]
                    for query, bucket in ((follow_up, "alone"), (search_query(conversation, _text), "combined")):
                        passages = services.search.search(query, services.search.scope(max_results=1, ranking=KEYWORD))
                        hit = bool(passages) and bool(
                            gold & set(range(passages[0].chunk.page_start, passages[0].chunk.page_end + 1))
                        )
                        if bucket == "alone":
                            alone += hit
                        else:
                            combined += hit
                    total += 1
        finally:
            services.close()
    print(
        f"Alps, {total} follow-ups ({len(FOLLOW_UPS)} per question): first passage on the question's gold page "
        f"{alone}/{total} searching the follow-up alone, {combined}/{total} with the conversation rule"
    )


def reach(data: Path) -> None:
    sets = {
        "SciFact queries": data / "beir-scifact" / "queries.jsonl",
        "xquad-de questions": data / "multilingual" / "xquad-de" / "queries.jsonl",
        "cmrc2018-zh questions": data / "multilingual" / "cmrc2018-zh" / "queries.jsonl",
    }
    for name, path in sets.items():
        texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8")]
        touched = [t for t in texts if is_follow_up(t)]
        example = f", e.g. {touched[0]!r}" if touched else ""
        print(f"{name}: {len(touched)}/{len(texts)} would be combined as a second turn{example}")
    alps = [json.loads(line)["question"] for line in open(data / "alps-wiki-qa" / "alps_qa_with_pdf_pages.jsonl")]
    print(f"Alps questions: {sum(map(is_follow_up, alps))}/{len(alps)} would be combined as a second turn")


def main() -> None:
    t0 = time.perf_counter()
    data = be.data_root()
    reach(data)
    gain(data / "alps-wiki-qa")
    print(f"({time.perf_counter() - t0:.0f}s)")


if __name__ == "__main__":
    main()
