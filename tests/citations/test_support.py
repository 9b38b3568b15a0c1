"""calypso.citations.support: exact evidence spans, sane scores, held-out quality floor."""

from __future__ import annotations

import gzip
import json
import os
import random
import sys
from pathlib import Path

import pytest

from calypso.citations.support import (
    SUPPORT_THRESHOLD,
    Evidence,
    best_evidence,
    split_sentences,
    support_score,
)

REPO = Path(__file__).resolve().parents[2]

# bench/attribution_quality.py at SUPPORT_THRESHOLD printed 70.4 macro-F1 on the ID file
# (held out: the model and threshold were fitted on the OOD file). Fail on a 2-point drop.
ID_MACRO_F1_FLOOR = 0.684


def _data(*parts: str) -> Path:
    """A file of the shared evaluation data; skip when absent, fail under CI."""
    path = Path(os.environ.get("CALYPSO_EVAL_DATA", REPO.parent / "shared" / "data")).joinpath(*parts)
    if not path.exists():
        message = f"evaluation data not found: {path} (set CALYPSO_EVAL_DATA)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _assert_exact(passage: str, ev: Evidence) -> None:
    assert 0 <= ev.start <= ev.end <= len(passage)
    assert ev.text == passage[ev.start : ev.end]
    assert ev.text == ev.text.strip()
    assert 0.0 <= ev.score <= 1.0


# ------------------------------------------------------------------ small cases
def test_empty_inputs() -> None:
    assert best_evidence("", "") == Evidence(0, 0, "", 0.0)
    assert best_evidence("Anything at all.", "") == Evidence(0, 0, "", 0.0)
    assert best_evidence("Anything at all.", " \n\t ") == Evidence(0, 0, "", 0.0)
    assert best_evidence("claim", None) == Evidence(0, 0, "", 0.0)  # type: ignore[arg-type]
    ev = best_evidence("", "  First sentence here. Second one.")
    assert ev.text == "First sentence here." and ev.score == 0.0
    _assert_exact("  First sentence here. Second one.", ev)
    assert support_score("", "Some passage.") == 0.0
    assert support_score("Some claim.", "") == 0.0
    assert support_score("the of and", "The passage is here.") == 0.0  # no content words
    assert split_sentences("") == [] and split_sentences("   ") == []


def test_picks_the_supporting_sentence_and_whole_sentences() -> None:
    passage = (
        "The Golden Gate Bridge is a suspension bridge in California. It spans the strait between "
        "San Francisco Bay and the Pacific Ocean. Construction began on January 5, 1933. "
        "The bridge opened to traffic on May 27, 1937, and was then the longest suspension span."
    )
    ev = best_evidence("The bridge opened to traffic in 1937.", passage, max_sentences=1)
    _assert_exact(passage, ev)
    assert ev.text.startswith("The bridge opened to traffic on May 27, 1937")
    assert ev.text.endswith("span.")
    assert ev.score >= SUPPORT_THRESHOLD
    two = best_evidence("The bridge spans the strait and construction began in 1933.", passage, max_sentences=2)
    _assert_exact(passage, two)
    assert two.text.startswith("It spans the strait") and two.text.endswith("1933.")
    one = best_evidence("The bridge spans the strait and construction began in 1933.", passage, max_sentences=1)
    assert len(split_sentences(one.text)) == 1
    # The score does not depend on how wide a span is returned.
    claim = "The bridge spans the strait and construction began in 1933."
    assert one.score == two.score == support_score(claim, passage)


def test_negation_mismatch_lowers_the_score() -> None:
    claim = "Aspirin reduces the risk of a second heart attack in adults."
    agrees = "In the trial, aspirin reduced the risk of a second heart attack in adults by a fifth."
    denies = "In the trial, aspirin did not reduce the risk of a second heart attack in adults."
    assert support_score(claim, agrees) > support_score(claim, denies)
    negated_claim = "Aspirin does not reduce the risk of a second heart attack in adults."
    assert support_score(negated_claim, denies) > support_score(negated_claim, agrees)


def test_number_mismatch_lowers_the_score() -> None:
    claim = "The bridge opened to traffic in 1937 after four years of work."
    right = "The bridge opened to traffic in 1937, after four years of work by 11 crews."
    wrong = "The bridge opened to traffic in 1957, after four years of work by 11 crews."
    assert support_score(claim, right) > support_score(claim, wrong)
    assert support_score("It costs $21.38 per hour.", "The wage is $21.38 per hour.") > support_score(
        "It costs $21.38 per hour.", "The wage is $20.33 per hour."
    )


def test_unrelated_passage_is_below_threshold() -> None:
    claim = "Photosynthesis converts light energy into chemical energy stored in glucose."
    unrelated = "The 1998 World Cup final was played in Saint-Denis. France beat Brazil 3-0."
    related = "Photosynthesis is the process that converts light energy into chemical energy, stored in glucose."
    assert support_score(claim, unrelated) < SUPPORT_THRESHOLD <= support_score(claim, related)


def test_cjk_emoji_and_odd_text_keep_exact_offsets() -> None:
    passage = "😀 Emoji first. 東京は日本の首都です。大阪は大きな都市です。\n\nΑθήνα είναι η πρωτεύουσα.  "
    ev = best_evidence("東京は日本の首都", passage, max_sentences=1)
    _assert_exact(passage, ev)
    assert ev.text == "東京は日本の首都です。"
    assert ev.score > best_evidence("東京は日本の首都", "大阪は大きな都市です。").score
    for claim in ("😀", "Αθήνα πρωτεύουσα", "🙂🙃 ..." * 50, "[1]", "</s>", "1.", "\u200b", "a\x00b"):
        for text in (passage, "😀" * 3000, "no stop at all " * 200, "...!!!???", "\n\n\n", "x", "e.g. Dr. No."):
            for width in (0, 1, 2, 5):
                _assert_exact(text, best_evidence(claim, text, max_sentences=width))
    for start, end in split_sentences(passage):
        assert passage[start:end] == passage[start:end].strip() != ""


def test_citation_markers_and_list_numbers_are_ignored() -> None:
    passage = "Choose a type of peach tree that grows in your climate."
    assert support_score("1. Choose a type of peach tree that grows in your climate [2].", passage) == pytest.approx(
        support_score("Choose a type of peach tree that grows in your climate.", passage)
    )


def test_splitter_keeps_abbreviations_and_quotes() -> None:
    text = 'Dr. Smith met J. R. R. Tolkien, e.g. at Oxford. He said "yes." Then it ended! Fig. 2 shows it.'
    sentences = [text[s:e] for s, e in split_sentences(text)]
    assert sentences == [
        "Dr. Smith met J. R. R. Tolkien, e.g. at Oxford.",
        'He said "yes."',
        "Then it ended!",
        "Fig. 2 shows it.",
    ]
    long_run = "word " * 1000
    spans = split_sentences(long_run)
    assert len(spans) > 1 and all(e - s <= 600 for s, e in spans)


# ------------------------------------------------------------------ real passages
def _scifact_docs(n: int) -> list[tuple[str, list[str]]]:
    """n SciFact abstracts with at least 4 sentences: (abstract text, its gold sentences)."""
    corpus_path = _data("beir-scifact", "corpus.jsonl")
    sentences_path = _data("beir-scifact", "corpus_sentences.jsonl.gz")
    texts = {}
    with open(corpus_path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            texts[d["_id"]] = d["text"]
    docs = []
    with gzip.open(sentences_path, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            sents = [s.strip() for s in d["sentences"] if len(s.split()) >= 8]
            text = texts.get(d["_id"], "")
            if len(sents) >= 4 and all(s in text for s in sents):
                docs.append((text, sents))
            if len(docs) == n:
                break
    return docs


def test_scifact_own_sentence_beats_unrelated_abstract() -> None:
    docs = _scifact_docs(200)
    assert len(docs) == 200
    rng = random.Random(7)
    wins = found = 0
    for i, (text, sents) in enumerate(docs):
        source = sents[rng.randrange(len(sents))]
        words = source.split()
        claim = " ".join(words[1 : max(4, int(len(words) * 0.8))])  # a clipped copy, not the exact sentence
        other = docs[(i + 1 + rng.randrange(len(docs) - 1)) % len(docs)][0]
        own = best_evidence(claim, text)
        _assert_exact(text, own)
        _assert_exact(other, best_evidence(claim, other))
        wins += own.score > support_score(claim, other)
        found += source in own.text
    assert wins >= 0.9 * len(docs), wins
    assert found >= 0.9 * len(docs), found


def test_exact_spans_on_attributionbench_passages() -> None:
    path = _data("attributionbench", "test_ood_all_subset_balanced.jsonl")
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f][:400]
    for r in rows:
        for passage in r["references"] or [""]:
            for width in (1, 2, 3):
                ev = best_evidence(r["claim"], passage, max_sentences=width)
                _assert_exact(passage, ev)
                assert (ev.text == "") == (passage.strip() == "")


# ------------------------------------------------------------------ quality floor
def test_threshold_separates_supported_from_unsupported_claims() -> None:
    # On the file it was fitted on (AttributionBench OOD, real claims and cited passages), the
    # threshold must sit between the two classes -- most supported claims at or above it, most
    # unsupported ones below -- and be the macro-F1-best cut it is documented to be.
    root = _data("attributionbench", "test_ood_all_subset_balanced.jsonl").parents[1]
    sys.path.insert(0, str(REPO / "bench"))
    import attribution_quality as aq

    rows = aq.load_attributionbench(aq.OOD_FILE, root)
    labels = [e.label for e in rows]
    scores = [support_score(e.claim, e.evidence) for e in rows]
    supported = [s for s, y in zip(scores, labels) if y]
    unsupported = [s for s, y in zip(scores, labels) if not y]
    assert len(supported) > 500 and len(unsupported) > 500
    assert sum(s >= SUPPORT_THRESHOLD for s in supported) >= 0.80 * len(supported)
    assert sum(s < SUPPORT_THRESHOLD for s in unsupported) >= 0.75 * len(unsupported)
    _, best_f1 = aq.best_threshold(labels, scores)
    assert aq.macro_f1(labels, [s >= SUPPORT_THRESHOLD for s in scores]) >= best_f1 - 0.005


def test_attributionbench_id_macro_f1_floor() -> None:
    root = _data("attributionbench", "test_all_subset_balanced_sampled500.jsonl").parents[1]
    sys.path.insert(0, str(REPO / "bench"))
    import attribution_quality as aq

    rows = aq.load_attributionbench(aq.ID_FILE, root)
    labels = [e.label for e in rows]
    predicted = [support_score(e.claim, e.evidence) >= SUPPORT_THRESHOLD for e in rows]
    f1 = aq.macro_f1(labels, predicted)
    assert f1 >= ID_MACRO_F1_FLOOR, f"ID macro-F1 {f1:.3f} < {ID_MACRO_F1_FLOOR}"
    # And it must beat the plain overlap baseline even when that one's threshold is tuned on ID.
    base = [aq.overlap_score(e.claim, e.evidence) for e in rows]
    _, base_f1 = aq.best_threshold(labels, base)
    assert f1 > base_f1
