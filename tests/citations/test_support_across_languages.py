"""An answer's sentence and its passage in different languages: support is read by meaning (issue 43, item 3).

The passages are real: CMRC 2018's Chinese paragraphs and XQuAD's German one (``../shared/data/multilingual``);
the English sentences were written for this test, some saying what a passage says, some what it does not.
"""

from __future__ import annotations

import json

import pytest
from tests_support import REPO, eval_data_dir

from calypso.citations.support import SUPPORT_THRESHOLD, best_evidence, support_score
from calypso.embeddings import multilingual_e5
from calypso.embeddings.local_onnx import LocalOnnxEmbedder

pytestmark = pytest.mark.skipif(not multilingual_e5.available(), reason="the 'embed' extra is not installed")


def _paragraph(corpus: str, paragraph_id: str) -> str:
    with (eval_data_dir() / "multilingual" / corpus / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if row["_id"] == paragraph_id:
                return str(row["text"])
    raise LookupError(paragraph_id)


@pytest.fixture(scope="module")
def model() -> multilingual_e5.MultilingualE5Embedder:
    return multilingual_e5.MultilingualE5Embedder()


CLAIMS = REPO / "bench" / "data" / "crosslingual" / "en_claims_zh_passages.jsonl"


def test_english_sentences_against_chinese_paragraphs(model) -> None:
    """48 English claims written for 12 CMRC paragraphs, half said there and half not: by words alone none is
    supported; by meaning most said are and most not said are not (e5-small reads English against Chinese far
    less sharply than against German: bench/crosslingual_support.py)."""
    claims = [json.loads(line) for line in CLAIMS.read_text(encoding="utf-8").splitlines() if line.strip()]
    paragraphs = {c["paragraph"]: _paragraph("cmrc2018-zh", c["paragraph"]) for c in claims}
    said = [c for c in claims if c["supported"]]
    not_said = [c for c in claims if not c["supported"]]
    assert not any(support_score(c["claim"], paragraphs[c["paragraph"]]) >= SUPPORT_THRESHOLD for c in said)
    found = sum(support_score(c["claim"], paragraphs[c["paragraph"]], across=model) >= SUPPORT_THRESHOLD for c in said)
    refused = sum(
        support_score(c["claim"], paragraphs[c["paragraph"]], across=model) < SUPPORT_THRESHOLD for c in not_said
    )
    assert found >= len(said) // 2 and refused >= len(not_said) * 2 // 3, (found, refused)
    dinosaur = paragraphs["DEV_216"]
    evidence = best_evidence(said[11]["claim"], dinosaur, across=model)  # Godefroit announced it in 2008
    assert evidence.text == dinosaur[evidence.start : evidence.end] and "2008" in evidence.text


def test_an_english_sentence_against_a_german_passage(model) -> None:
    panthers = _paragraph("xquad-xling-en-de", "xquad-de:000:000")  # the Panthers' 2015 defence
    said = "Fellow lineman Mario Addison added 6½ sacks."  # the English original of the German sentence
    evidence = best_evidence(said, panthers, across=model)
    assert evidence.score >= SUPPORT_THRESHOLD and evidence.text.startswith("Mario Addison, ebenfalls Lineman")
    assert support_score("The Panthers' stadium was rebuilt with a retractable roof.", panthers, across=model) < (
        SUPPORT_THRESHOLD
    )


def test_another_number_is_another_claim_in_any_language(model) -> None:
    panthers = _paragraph("xquad-xling-en-de", "xquad-de:000:000")
    said = "The Panthers defense gave up just 308 points, ranking sixth in the league."
    assert support_score(said, panthers, across=model) >= SUPPORT_THRESHOLD
    assert support_score(said.replace("308", "380"), panthers, across=model) < SUPPORT_THRESHOLD


def test_one_language_and_a_model_without_a_cut_stay_lexical(model) -> None:
    english = "The Alps are a habitat for 30,000 species of wildlife."
    assert support_score(english, english, across=model) == support_score(english, english)
    panthers = _paragraph("xquad-xling-en-de", "xquad-de:000:000")
    said = "Kawann Short led the Panthers in sacks with 11."
    assert support_score(said, panthers, across=LocalOnnxEmbedder()) == support_score(said, panthers)
