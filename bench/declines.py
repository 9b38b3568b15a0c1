"""How often ``citations.declines.is_decline`` takes a sentence of real documents for a decline.

Every sentence of the corpora is a statement *from* a source, never one *about* the sources not
answering, so each hit is a false positive: a sentence that would get no inferred citation and count as
"not a claim". Prints the hit rate per corpus and the first hits to read.

    python -m bench.declines [--limit 3000]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from calypso.citations.declines import is_decline
from calypso.text.sentences import sentence_spans

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
CORPORA = {
    "SciFact (en)": DATA / "beir-scifact" / "corpus.jsonl",
    "CMRC 2018 (zh)": DATA / "multilingual" / "cmrc2018-zh" / "corpus.jsonl",
    "XQuAD (de)": DATA / "multilingual" / "xquad-de" / "corpus.jsonl",
}


def sentences(path: Path, limit: int) -> list[str]:
    out: list[str] = []
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            text = json.loads(line)["text"]
            out += [text[a:b] for a, b in sentence_spans(text)]
            if len(out) >= limit:
                break
    return out[:limit]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=3000, help="sentences per corpus")
    args = parser.parse_args()
    for name, path in CORPORA.items():
        corpus = sentences(path, args.limit)
        started = time.perf_counter()
        hits = [s for s in corpus if is_decline(s)]
        per_sentence_us = (time.perf_counter() - started) / max(len(corpus), 1) * 1e6
        rate = len(hits) / max(len(corpus), 1)
        print(
            f"{name}: {len(hits)} of {len(corpus)} sentences taken for declines ({rate:.2%}), {per_sentence_us:.1f} µs each"
        )
        for hit in hits[:5]:
            print(f"    {hit[:160]}")


if __name__ == "__main__":
    main()
