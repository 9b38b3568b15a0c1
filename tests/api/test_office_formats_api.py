"""Slides, workbooks and CSV through the real upload API: searchable, cited with "slide N" and "Sheet!A1:B2"."""

from __future__ import annotations

from pathlib import Path

import httpx
import office_files
import pytest
from tests_support import WAIT

MORE = "ingestion-docs-more"
NESTLE = f"{MORE}/xlsx/2023-half-year-analyses-by-segment.xlsx"
SEGMENTS = "'OS-Rev.and results 30 06 2023'"


@pytest.fixture
def office_store(openai_client, data_dir: Path):
    """A vector store holding the Nestlé workbook, the chart deck, the sample deck and the CSV file."""
    store = openai_client.vector_stores.create(name="Office files")
    files = {}
    for name in (
        NESTLE,
        f"{MORE}/pptx/pptx_chart.pptx",
        f"{MORE}/pptx/powerpoint_sample.pptx",
        f"{MORE}/csv/csv-comma.csv",
    ):
        path = data_dir / name
        with path.open("rb") as handle:
            file = openai_client.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=handle)
        assert file.status == "completed", file.last_error
        files[path.name] = file
    return store, files


def _hits(openai_client, store, query: str, filename: str):
    """The store's search hits from ``filename``, each as (text, where: the hit's ``_aicore`` attributes)."""
    results = openai_client.vector_stores.search(vector_store_id=store.id, query=query, max_num_results=10)
    return [(hit.content[0].text, hit.model_extra["_aicore"]) for hit in results.data if hit.filename == filename]


def test_a_number_from_one_cell_is_found_with_its_sheet_named(openai_client, office_store) -> None:
    store, _ = office_store
    hits = _hits(openai_client, store, "Nestlé Health Science sales January–June 2023", Path(NESTLE).name)
    row = "| Nestlé Health Science | 3,318 | 432 | 372 | (60) | (11) | (31) | (152) |"
    located = [(text, where) for text, where in hits if row in text]
    assert located, hits[:1]
    text, where = located[0]
    assert where["locator_label"].startswith(f"{SEGMENTS}!A")
    assert where["page_label"] == where["locator_label"]
    assert "| Sales (a) |" in text  # the header row sits in the same passage as the number
    assert where["label"] == f"{Path(NESTLE).name} ({where['locator_label']})"


def test_slides_are_cited_as_slides_and_chart_data_is_searchable(openai_client, office_store) -> None:
    store, _ = office_store
    hits = _hits(openai_client, store, "Quarterly revenue Q1 Q2 Q3", "pptx_chart.pptx")
    assert hits and hits[0][1]["locator_label"] == "slide 2" and "| Q2 | 20 |" in hits[0][0]
    ducks = _hits(openai_client, store, "saltwater ducks 2021", "pptx_chart.pptx")
    assert ducks and ducks[0][1]["locator_label"] == "slide 1" and "| 2021 | 150 | 110 |" in ducks[0][0]
    notes = _hits(openai_client, store, "final notes on the third slide", "powerpoint_sample.pptx")
    assert notes and notes[0][1]["locator_label"] == "slide 3"
    assert "Notes:\nFinal notes on the third slide." in notes[0][0]
    assert "p. " not in notes[0][1]["label"]
    csv_hits = _hits(openai_client, store, "Preston Lozano Vega-Gentry", "csv-comma.csv")
    assert csv_hits and csv_hits[0][1]["locator_label"] == "A1:L4"  # blocks fit the test settings' 800 characters


def test_an_answer_cites_the_sheet_and_range(openai_client, office_store) -> None:
    store, files = office_store
    response = openai_client.responses.create(
        model="calypso-rag-agent",
        input="What were the sales of Zone NA in January–June 2023?",
        tools=[{"type": "file_search", "vector_store_ids": [store.id], "max_num_results": 5}],
        include=["file_search_call.results"],
    )
    search = next(item for item in response.output if item.type == "file_search_call")
    sheet_results = [r for r in search.results if r.filename == Path(NESTLE).name]
    assert sheet_results and sheet_results[0].attributes["locator_label"].startswith(f"{SEGMENTS}!")
    message = next(item for item in response.output if item.type == "message")
    annotations = [a for part in message.content for a in part.annotations]
    assert annotations and files[Path(NESTLE).name].id in {a.file_id for a in annotations}
    cited = next(a for a in annotations if a.file_id == files[Path(NESTLE).name].id)
    assert cited.model_extra["_aicore"]["locator_label"].startswith(f"{SEGMENTS}!A")
    assert "12,553" in message.content[0].text


@pytest.mark.parametrize(
    ("name", "make", "status", "code"),
    [
        ("budget.xlsx", office_files.encrypted_office_file, 422, "password_protected"),
        ("deck.pptx", office_files.encrypted_office_file, 422, "password_protected"),
        ("bomb.xlsx", lambda: office_files.xlsx_zip_bomb(300), 413, "uncompressed_too_large"),
        ("old.xlsx", office_files.legacy_ole_file, 422, "unprocessable_document"),
        ("cut.xlsx", lambda: office_files.workbook({"S": [["a", 1]] * 50})[:900], 422, "unprocessable_document"),
    ],
)
def test_bad_office_files_get_a_clear_error_and_nothing_is_stored(
    api: httpx.Client, name: str, make, status: int, code: str
) -> None:
    response = api.post("/v1/documents", files={"file": (name, make())}, params=WAIT)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["param"] == "file" and error["type"] == "invalid_request_error"
    assert api.get("/v1/documents").json()["data"] == []


def test_a_small_workbook_through_the_documents_api(api: httpx.Client) -> None:
    data = office_files.workbook({"Fees": [["Service", "Fee (CHF)"], ["Audit", 1200], ["Review", 450.5]]})
    created = api.post("/v1/documents", files={"file": ("fees.xlsx", data)}, params=WAIT)
    assert created.status_code in (200, 201), created.text
    document = created.json()
    assert document["status"] == "completed"
    hits = api.post("/v1/search", json={"query": "audit fee"}).json()["data"]
    assert hits and hits[0]["attributes"]["locator_label"] == "Fees!A1:B3"
    assert hits[0]["content"][0]["text"] == "Sheet: Fees\n| Service | Fee (CHF) |\n| Audit | 1200 |\n| Review | 450.5 |"


def test_a_password_protected_workbook_attached_to_a_store_fails_with_its_reason(openai_client) -> None:
    store = openai_client.vector_stores.create(name="Locked")
    file = openai_client.vector_stores.files.upload_and_poll(
        vector_store_id=store.id, file=("budget.xlsx", office_files.encrypted_office_file())
    )
    assert file.status == "failed" and file.last_error is not None
    assert file.last_error.code == "invalid_file" and "password-protected" in file.last_error.message
    assert openai_client.vector_stores.search(vector_store_id=store.id, query="budget").data == []
