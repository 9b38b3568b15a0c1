"""Exact tokens win (issue 42): a query's rare identifiers are not outvoted by the embedding in hybrid search.

Identifier detection is checked on its own (English, Chinese, German). Then the IRS manual (400 pages) and a
knowledge base of statutes (the Federal Register's two airworthiness directives and a short litigation memo)
are ingested and embedded once per backend, SQLite and PostgreSQL, and searched through ``POST /v1/search``
of the real app at the server's default ranking: the page (or passage) that a form number, an error code, a
statute section or a docket number names comes first. The gold pages are found by reading the PDF's text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from tests_support import eval_data_dir

from calypso.api.app import create_app
from calypso.config import Settings
from calypso.ingest.parsers import detect_and_parse
from calypso.models import RankingOptions
from calypso.retrieval.exact_match import exact_matches, exact_weight, rare_terms
from calypso.retrieval.hybrid import default_weights, fuse
from calypso.retrieval.identifiers import identifiers
from calypso.services import Services, open_services
from calypso.services.embed_worker import embed_all
from calypso.services.ingestion import Upload
from testkit.postgres import PgServer

MODEL = "minilm-l6-v2-int8"


# -- detection ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Command Code BMFOL BMF Return Form 1041 Display", ["BMFOL", "BMF", "1041"]),
        ("Does 28 U.S.C. § 1332 or § 1983 apply?", ["§ 1332", "§ 1983"]),
        ("Dobbs, No. 19-1392, decided 2022", ["No. 19-1392", "2022"]),
        ("Error E0x80070005 on the IRS Form W-2 upload", ["E0x80070005", "IRS", "W-2"]),
        ("What does CC TXMOD show?", ["CC", "TXMOD"]),
        ("IRM 2.3.59 exhibit 2.3.59-51", ["IRM", "2.3.59", "2.3.59-51"]),
        ("IL-10 and p53 in CD4+ cells with H3K4me3 and miR-155", ["IL-10", "p53", "CD4", "H3K4me3", "miR-155"]),
        # Ordinary words in capitals, ordinals, decades, grouped numbers and decimals are not identifiers.
        ("WHAT IS THE 15th report of the 1990s on 1,000 genomes at 0.5 mg", []),
        ("How long is the refund window?", []),
    ],
)
def test_identifiers_in_english_queries(query: str, expected: list[str]) -> None:
    assert identifiers(query) == expected


def test_identifiers_in_chinese_and_german_queries() -> None:
    assert identifiers("（2019）京01民终1234号判决的上诉理由是什么？") == ["（2019）京01民终1234号"]
    assert identifiers("(2020)沪0115民初5678号 案件") == ["(2020)沪0115民初5678号"]
    assert identifiers("Wann haftet man nach § 823 BGB auf Schadensersatz?") == ["§ 823", "BGB"]
    assert identifiers("Was regelt § 1004 Abs. 1 BGB?") == ["§ 1004", "BGB"]


# -- the signal and its weight ----------------------------------------------------------------------------------


def test_rare_terms_earn_weight_by_their_share_of_the_query() -> None:
    # 400 passages: a term on one has idf ln(1 + 399.5 / 1.5) = 5.59; the floor is half of that.
    rare = rare_terms({"1041": 3.64, "bmf": 2.15, "bmfol": 0.07, "absent": 0.0}, 400)
    assert rare == {"1041": 3.64}
    assert exact_weight(rare, 3.64) == pytest.approx(1.5)  # the whole query is the code
    assert exact_weight(rare, 7.28) == pytest.approx(0.75)  # half of its idf
    assert exact_weight({}, 7.28) == 0.0
    # Presence, weighted by idf: holding the rarer of two codes counts for more, holding it twice no more.
    signal = exact_matches({"tc902": (4.0, [1, 2]), "cc53": (1.0, [2, 3])})
    assert signal == {1: pytest.approx(0.8), 2: pytest.approx(1.0), 3: pytest.approx(0.2)}


def test_the_exact_signal_outvotes_text_and_embedding_that_agree_on_a_listing() -> None:
    # Both runs prefer the contents page (1) to the exhibit (2); only the exhibit holds the code asked for.
    text, dense = [(1, 5.2), (2, 4.9), (3, 1.0)], [(1, 0.8), (3, 0.6), (2, 0.5)]
    assert [key for key, _ in fuse(text, dense)][0] == 1
    fused = fuse(text, dense, exact={2: 1.0}, exact_weight=1.5)
    assert [key for key, _ in fused][0] == 2
    assert all(0.0 <= score <= 1.0 for _, score in fused)
    assert fuse(text, dense, exact={}, exact_weight=1.5) == fuse(text, dense)  # no identifier: as before


def test_weights_a_request_gives_are_its_own() -> None:
    assert default_weights(None) and default_weights(RankingOptions(score_threshold=0.2))
    assert not default_weights(RankingOptions(text_weight=0.6))
    assert not default_weights(RankingOptions(embedding_weight=0.4))


# -- through the real app, on both backends -----------------------------------------------------------------

IRS = "ingestion-docs/pdf/irs-irm-2.3.59-400p.pdf"
REGISTER = "ingestion-docs/pdf/federal-register-2020-17221.pdf"
# (query, the text whose page is gold): an exhibit's title as its page heading, or a code where it is defined.
IRS_QUERIES = [
    ("Command Code BMFOL BMF Return Form 1041 Display", "Command Code BMFOL BMF Return Form 1041 Display"),
    ("BMFOL Return Form 5500 Display", "Command Code BMFOL Return Form 5500 Display"),
    ("Form 1042 Display", "Command Code BMFOL Return Form 1042 Display"),
    ("BMFOL Return Form 720 Display", "Command Code BMFOL BMF Return Form 720 Display"),
    ("What does CFOL007 mean?", "CFOL007"),
    ("TC902", "TC902"),
]
REGISTER_QUERIES = [
    ("§ 39.13", "§ 39.13"),
    ("Docket No. FAA-2020-0746", "FAA–2020–0746"),
    ("Executive Order 12866", "Executive Order 12866"),
]
CONTENTS_LINE = re.compile(r"2\.3\.59-\d+ $")  # the manual's table of contents lists every exhibit's title

MEMO = """# Litigation memo: claims against the county

## Civil rights claim

The complaint pleads a claim under 42 U.S.C. § 1983 for the deprivation, under color of state law, of rights
secured by the Constitution. A plaintiff must show that a person acting under color of state law caused the
deprivation; a county is liable only where its own policy or custom was the moving force behind it, and
respondeat superior does not apply. Qualified immunity shields the individual officers unless the right was
clearly established at the time of the conduct. We recommend moving to dismiss the official-capacity claims.

## Subject-matter jurisdiction

Federal jurisdiction rests on diversity of citizenship under 28 U.S.C. § 1332: the plaintiff is a citizen of
Oregon, the corporate defendant is incorporated and has its principal place of business in Delaware, and the
amount in controversy exceeds $75,000, exclusive of interest and costs. Complete diversity is required: no
plaintiff may share a state of citizenship with any defendant. The county's joinder would defeat it.

## Federal question

A claim arising under federal law gives jurisdiction under 28 U.S.C. § 1331 whatever the parties'
citizenship, and the court may hear the related state-law claims under supplemental jurisdiction if they form
part of the same case or controversy. The well-pleaded complaint rule looks only at the plaintiff's claim.

## Precedent on remand

The defendants rely on the Supreme Court's decision in No. 19-1392, decided in June 2022, for the proposition
that a right must be deeply rooted in the Nation's history and tradition. The plaintiff answers that the
decision addressed a different right and leaves the county's obligations under state law untouched. The
court of appeals remanded the companion case for further proceedings consistent with that opinion.
"""
MEMO_QUERIES = [
    ("§ 1983", "42 U.S.C. § 1983 for the deprivation"),
    ("28 U.S.C. § 1332", "diversity of citizenship under 28 U.S.C. § 1332"),
    ("No. 19-1392", "decision in No. 19-1392"),
]


def gold_pages(pdf: bytes, filename: str, text: str) -> set[int]:
    """The pages where ``text`` stands, except as a line of the table of contents."""
    parsed, _ = detect_and_parse(pdf, filename)
    pages = set()
    for page in parsed.pages:
        content = parsed.text[page.start : page.end]
        for found in re.finditer(re.escape(text), content):
            if not CONTENTS_LINE.search(content[max(0, found.start() - 20) : found.start()]):
                pages.add(page.number)
    return pages


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def app(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, minilm: object
) -> Iterator[TestClient]:
    """The app over one knowledge base per backend: the IRS manual in "irs", the statutes in "statutes",
    every passage embedded (ingested and embedded once for the module's tests)."""
    url = ""
    if request.param == "postgres":
        server: PgServer = request.getfixturevalue("pg_server")
        url = server.create_database()
    home = tmp_path_factory.mktemp(f"exact-{request.param}")
    settings = Settings(home=home, database_url=url, embedding_model=MODEL)
    services: Services = open_services(settings)
    data = eval_data_dir()
    try:
        uploads = [
            Upload((data / IRS).read_bytes(), "irs-irm-2.3.59.pdf", "irs"),
            Upload((data / REGISTER).read_bytes(), "federal-register-2020-17221.pdf", "statutes"),
            Upload(MEMO.encode(), "litigation-memo.md", "statutes"),
        ]
        for upload in uploads:
            services.ingestion.ingest(upload)
        embed_all(services.vectors)
        with TestClient(create_app(settings, services)) as client:
            yield client
    finally:
        services.close()
        if url:
            request.getfixturevalue("pg_server").drop_database(url)


def first_hit(app: TestClient, query: str, namespace: str) -> dict:
    response = app.post("/v1/search", json={"query": query, "namespace": namespace, "max_num_results": 5})
    assert response.status_code == 200, response.text
    hits = response.json()["data"]
    assert hits, query
    return hits[0]


def pages_of(hit: dict) -> set[int]:
    return set(range(hit["attributes"]["page_number"], hit["attributes"]["page_end"] + 1))


@pytest.mark.parametrize(("query", "gold_text"), IRS_QUERIES)
def test_an_irs_code_finds_its_page_first(app: TestClient, query: str, gold_text: str) -> None:
    gold = gold_pages((eval_data_dir() / IRS).read_bytes(), "irs.pdf", gold_text)
    assert gold and not gold & {3, 4, 5, 6}  # the contents pages are not gold
    hit = first_hit(app, query, "irs")
    assert pages_of(hit) & gold, f"{query!r}: first hit pages {sorted(pages_of(hit))}, gold {sorted(gold)}"


@pytest.mark.parametrize(("query", "gold_text"), REGISTER_QUERIES)
def test_a_statute_section_finds_its_page_first(app: TestClient, query: str, gold_text: str) -> None:
    gold = gold_pages((eval_data_dir() / REGISTER).read_bytes(), "register.pdf", gold_text)
    hit = first_hit(app, query, "statutes")
    assert hit["filename"] == "federal-register-2020-17221.pdf" and pages_of(hit) & gold, (query, hit["attributes"])


@pytest.mark.parametrize(("query", "gold_text"), MEMO_QUERIES)
def test_a_section_or_docket_number_finds_its_passage_first(app: TestClient, query: str, gold_text: str) -> None:
    hit = first_hit(app, query, "statutes")
    assert hit["filename"] == "litigation-memo.md" and gold_text in hit["content"][0]["text"], (query, hit)


def test_weights_a_request_gives_are_used_as_given(app: TestClient) -> None:
    """Explicit weights get plain fusion: the Form 1041 query, given the default weights by hand, ranks the
    contents page first as it did before the exact-match signal (and keyword-only ranks as keywords rank)."""
    query = IRS_QUERIES[0][0]
    explicit = {"hybrid_search": {"text_weight": 0.6, "embedding_weight": 0.4}}
    body = {"query": query, "namespace": "irs", "max_num_results": 5, "ranking_options": explicit}
    response = app.post("/v1/search", json=body)
    assert response.status_code == 200
    assert pages_of(response.json()["data"][0]) & {4, 5}
    assert not pages_of(first_hit(app, query, "irs")) & {4, 5}
