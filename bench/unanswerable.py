"""Does the default answerer say "not found" when the documents do not answer? (issue 24)

The Alps PDF is ingested with the server's defaults (hybrid search, the bundled model embedded) and three
sets are asked of it with the default extractive answerer:

- the 39 Alps questions (answerable): answered, and the gold answer inside a cited segment;
- 60 SciFact claims (seed 0 shuffle of queries.jsonl): off-topic, to be declined;
- ``NEAR_TOPIC``: 15 questions written for this benchmark about mountains, Switzerland and travel that the
  Alps article does not answer, to be declined.

A decline is an answer that cites nothing and is the answerer's own "not found" sentence. These sets are
what ``generation.sentence_pick.MIN_COVERAGE`` was set on; a held-out set is checked elsewhere.

    .venv/bin/python -m bench.unanswerable [--keyword-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
from pathlib import Path

from bench.common import beir as be
from calypso.citations.grounded import GroundedAnswer, grounded_sources_state
from calypso.config import Settings
from calypso.generation import phrases
from calypso.scope import RetrievalScope
from calypso.services import open_services
from calypso.services.answering import AskRequest
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload

NEAR_TOPIC = [
    "What is the population of Zurich?",
    "Who was the first person to climb Mount Everest?",
    "How many ski resorts are there in Colorado?",
    "What is the capital city of Austria?",
    "Which company makes Swiss army knives?",
    "What is the average salary of a mountain guide in France?",
    "When did Switzerland join the United Nations?",
    "What is the tallest mountain in the Andes?",
    "Who won the 2018 Winter Olympics downhill race?",
    "What is the recipe for Swiss fondue?",
    "How many people visit Disneyland Paris each year?",
    "Which river flows through Vienna?",
    "What is the GDP of Liechtenstein?",
    "How much does a lift ticket in Zermatt cost?",
    "Who designed the Eiffel Tower?",
]


def declined(answer: GroundedAnswer) -> bool:
    cited = any(segment.citations for segment in answer.segments)
    return not cited and answer.text.strip() in phrases.NOT_FOUND.values()


def not_grounded(answer: GroundedAnswer) -> bool:
    """Declined, or reported as not found (``missing``): quotes that do not answer the question (issue 39)."""
    return declined(answer) or grounded_sources_state(answer) == "missing"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keyword-only", action="store_true", help="no embedding model")
    args = parser.parse_args()
    root = be.data_root()
    rows = [json.loads(line) for line in open(root / "alps-wiki-qa/alps_qa_with_pdf_pages.jsonl", encoding="utf-8")]
    claims = list(be.load_queries(root / "beir-scifact").values())
    random.Random(0).shuffle(claims)
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=Path(home), generator="extractive")
        if args.keyword_only:
            settings = settings.model_copy(update={"embedding_model": "none"})
        services = open_services(settings)
        try:
            services.ingestion.ingest(Upload((root / "alps-wiki-qa/alps_wiki.pdf").read_bytes(), "alps_wiki.pdf"))
            embed_all(services.vectors)
            scope = RetrievalScope(namespaces=(settings.default_namespace,))

            def ask(question: str) -> GroundedAnswer:
                request = AskRequest([{"role": "user", "content": question}], scope, generator="extractive")
                return asyncio.run(services.answering.answer(request))

            alps = [ask(r["question"]) for r in rows]
            answered = sum(not declined(a) for a in alps)
            shown = sum(not not_grounded(a) for a in alps)
            gold = 0
            for r, a in zip(rows, alps):
                answers = [r["answer"]] if isinstance(r.get("answer"), str) else list(r.get("answers") or [])
                cited = " ".join(s.text for s in a.segments if s.citations).lower()
                gold += any(x and x.lower() in cited for x in answers)
            off_answers = [ask(c) for c in claims[:60]]
            near_answers = [ask(q) for q in NEAR_TOPIC]
            off = sum(map(declined, off_answers))
            near = sum(map(declined, near_answers))
            off_missing = sum(map(not_grounded, off_answers))
            near_missing = sum(map(not_grounded, near_answers))
        finally:
            services.close()
    mode = "keyword only" if args.keyword_only else "hybrid (server default)"
    print(f"Alps PDF, {mode}, default extractive answerer")
    print(f"  Alps questions answered {answered}/39, gold answer inside a cited segment {gold}/39")
    print(f"  declined: SciFact claims {off}/60, near-topic questions {near}/{len(NEAR_TOPIC)}")
    print(f"  declined overall {off + near}/{60 + len(NEAR_TOPIC)} ({(off + near) / (60 + len(NEAR_TOPIC)):.0%})")
    print(f"  Alps questions shown as grounded (state available) {shown}/39")
    print(
        f"  declined or not found (state missing): SciFact claims {off_missing}/60, near-topic {near_missing}/"
        f"{len(NEAR_TOPIC)}"
    )


if __name__ == "__main__":
    main()
