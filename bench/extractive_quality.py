"""How well the built-in extractive answer cites itself, on the Alps article (issue 12).

The Alps Wikipedia article (PDF, then HTML) goes into a temporary knowledge base
through ``DocumentService.ingest``; each of the 39 SQuAD questions is asked through
``Answerer.stream`` with the extractive generator (the path ``/v1/responses`` takes),
and the final ``GroundedAnswer`` is scored:

* cited: share of the answer's non-space characters that lie inside a cited segment
  (the spaces between two cited sentences belong to neither, so they are not counted);
* fact: the gold supporting sentence lies inside one cited segment (compared with
  whitespace, case and Wikipedia footnote markers like ``[83]`` normalised away);
* fact|ans: the gold sentence or the gold answer string lies inside one cited segment;
* answer: the gold answer string appears in the answer text (case-insensitive);
* sentences per answer, cited segments per answer and answer length in characters;
* dirty: answers holding a control character, a footnote marker ("[24]"), markdown
  emphasis or a word broken by a line-end hyphen ("exam- ple").

``--similarity model`` (the default) chooses sentences with the embedding model too, as the
server does (``CALYPSO_EXTRACTIVE_SEMANTIC_WEIGHT``, ``--weight`` to try another), ``none`` by
words only. Both load the model, and retrieval is the same in both, so the runs differ only in
the sentence choice: ``--retrieval keywords`` (the default: no passage is embedded, so search is
BM25 alone) or ``hybrid`` (every passage embedded first, as a server's embedding worker would,
so search fuses BM25 with the vectors and has the question's vector cached before the answer).
Every question is asked twice: the first pass embeds each candidate sentence (cold cache),
the second finds them in the content-hash cache (warm); the time per answer is reported for
both (p50/p99, the whole ``Answerer.stream``).

    .venv/bin/python -m bench.extractive_quality [--similarity model|none] [--weight W]
        [--retrieval keywords|hybrid] [--verbose]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common.paths import data_dir
from bench.common.stats import percentile
from calypso.citations.events import Done
from calypso.citations.grounded import GroundedAnswer
from calypso.config import Settings
from calypso.scope import RetrievalScope
from calypso.services import open_services
from calypso.services.answering import Answerer, AskRequest
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload
from calypso.text.sentences import sentence_spans

# What a cleaned answer never holds: control characters, footnote markers, markdown emphasis, "exam- ple".
_DIRTY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\u200b]|\[\d{1,3}\]|\*\*|[a-z]- [a-z]")
_FOOTNOTE = re.compile(r"\[\d{1,3}\]|\[citation needed\]|\[note \d+\]", re.I)


def norm(text: str) -> str:
    """Lower case, footnote markers, double quotes and soft hyphens dropped, whitespace folded."""
    text = _FOOTNOTE.sub("", text.replace("\u00ad", ""))
    text = re.sub(r"[\"“”„]", "", text)
    return " ".join(text.split()).lower().rstrip(".")


@dataclass
class Score:
    qid: str
    cited_chars: int
    chars: int
    fact_cited: bool
    fact_or_answer_cited: bool
    answer_present: bool
    sentences: int
    segments: int
    length: int
    dirty: bool


def score(row: dict, answer: GroundedAnswer) -> Score:
    text = answer.text
    covered = [False] * len(text)
    for segment in answer.segments:
        if segment.citations:
            for i in range(segment.start, segment.end):
                covered[i] = True
    chars = sum(1 for ch in text if not ch.isspace())
    cited_chars = sum(1 for i, ch in enumerate(text) if covered[i] and not ch.isspace())
    cited_texts = [norm(s.text) for s in answer.segments if s.citations]
    fact = " ".join(row["facts"])
    gold = norm(row["answer"])
    sentences = [fact[a:b] for a, b in sentence_spans(fact)]
    if len(sentences) > 1:  # a two-sentence fact: the sentence that holds the answer is the fact
        fact = next((x for x in sentences if gold in norm(x)), fact)
    fact_cited = any(norm(fact) in s for s in cited_texts)
    return Score(
        qid=row["qid"],
        cited_chars=cited_chars,
        chars=chars,
        fact_cited=fact_cited,
        fact_or_answer_cited=fact_cited or any(gold in s for s in cited_texts),
        answer_present=gold in norm(text),
        sentences=len(sentence_spans(text)),
        segments=sum(1 for s in answer.segments if s.citations),
        length=len(text),
        dirty=bool(_DIRTY.search(text)),
    )


async def ask_all(
    answerer: Answerer, rows: list[dict], namespace: str, seconds: list[float]
) -> list[tuple[dict, GroundedAnswer]]:
    out = []
    scope = RetrievalScope(namespaces=(namespace,))
    for row in rows:
        request = AskRequest([{"role": "user", "content": row["question"].strip()}], scope, generator="extractive")
        answer = None
        t0 = time.perf_counter()
        async for event in answerer.stream(request):
            if isinstance(event, Done):
                answer = event.answer
        seconds.append(time.perf_counter() - t0)
        assert answer is not None
        out.append((row, answer))
    return out


def run(
    filename: str, rows: list[dict], verbose: bool, weight: float, timings: dict[str, list[float]], hybrid: bool
) -> list[Score]:
    path = data_dir() / "alps-wiki-qa" / filename
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(
            home=Path(home),
            generator="extractive",
            embedding_model="minilm-l6-v2-int8",
            extractive_semantic_weight=weight,
        )
        services = open_services(settings)
        try:
            assert services.vectors.embedder is not None, "the local embedding model is not installed"
            services.vectors.embedder.embed(["load the model before timing"])
            services.ingestion.ingest(Upload(path.read_bytes(), filename, "alps"))
            if hybrid:
                embed_all(services.vectors)
            answerer = Answerer(services.documents, services.search)
            answered = asyncio.run(ask_all(answerer, rows, "alps", timings.setdefault("cold", [])))
            again = asyncio.run(ask_all(answerer, rows, "alps", timings.setdefault("warm", [])))
            assert [a.text for _, a in again] == [a.text for _, a in answered], "a cached vector changed an answer"
        finally:
            services.close()
    scores = [score(row, answer) for row, answer in answered]
    if verbose:
        for (row, answer), s in zip(answered, scores, strict=True):
            flags = f"cited {s.cited_chars / max(1, s.chars):4.0%} fact {'Y' if s.fact_cited else '-'}"
            flags += f" ans {'Y' if s.answer_present else '-'}"
            print(f"--- {s.qid} [{flags}] {row['question'].strip()}  (gold: {row['answer']})")
            for segment in answer.segments:
                numbers = ",".join(str(c.retrieval_number) for c in segment.citations)
                print(f"    [{segment.start}:{segment.end} <- {numbers}] {segment.text!r}")
            print(f"    text: {answer.text!r}")
    return scores


def summary(name: str, scores: list[Score]) -> str:
    n = len(scores)
    cited = sum(s.cited_chars for s in scores) / max(1, sum(s.chars for s in scores))
    return (
        f"{name:<15} {cited:6.1%} {sum(s.fact_cited for s in scores):>5}/{n} "
        f"{sum(s.fact_or_answer_cited for s in scores):>5}/{n} {sum(s.answer_present for s in scores):>5}/{n} "
        f"{sum(s.sentences for s in scores) / n:>6.1f} {sum(s.segments for s in scores) / n:>6.1f} "
        f"{sum(s.length for s in scores) / n:>6.0f} {sum(s.dirty for s in scores):>5}/{n}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--similarity", choices=("model", "none"), default="model")
    parser.add_argument("--weight", type=float, default=None, help="semantic weight (default: the server's)")
    parser.add_argument("--retrieval", choices=("keywords", "hybrid"), default="keywords")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args()
    weight = args.weight if args.weight is not None else Settings().extractive_semantic_weight
    weight = 0.0 if args.similarity == "none" else weight
    path = data_dir() / "alps-wiki-qa" / "alps_qa_with_pdf_pages.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    t0 = time.perf_counter()
    lines = []
    timings: dict[str, list[float]] = {}
    for filename in ("alps_wiki.pdf", "alps_wiki.html"):
        lines.append(summary(filename, run(filename, rows, args.verbose, weight, timings, args.retrieval == "hybrid")))
    print(
        f"{'document':<15} {'cited':>6} {'fact':>7} {'fact|ans':>8} {'answer':>7} {'sent.':>6} {'segs':>6} {'chars':>6} {'dirty':>7}"
    )
    for line in lines:
        print(line)
    print(
        f"({len(rows)} questions per document, similarity {args.similarity}, weight {weight}, "
        f"retrieval {args.retrieval}, "
        f"{time.perf_counter() - t0:.0f}s)"
    )
    for name, seconds in timings.items():
        print(
            f"time per answer, {name} cache: p50 {percentile(seconds, 50) * 1000:.1f} ms, "
            f"p99 {percentile(seconds, 99) * 1000:.1f} ms ({len(seconds)} answers)"
        )


if __name__ == "__main__":
    main()
