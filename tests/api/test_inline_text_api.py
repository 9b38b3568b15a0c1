"""Small text uploads that wait are parsed in the server and stored in one transaction (``parses_in_place``):
Chinese plain text and English Markdown found and cited as before, over two turns through the openai SDK, and
bad or refused uploads answered in OpenAI's error shape with nothing stored."""

from __future__ import annotations

from tests_support import WAIT

POLICY_ZH = "退款政策\n\n礼品卡一律不予退款，也不能兑换现金。\n\n运费由客户承担，除非商品在运输途中损坏。\n"
GUIDE_EN = "# Returns\n\n## Deadline\n\nItems may be returned within 45 days of delivery.\n"


def _upload(http, name: str, data: bytes):
    return http.post("/v1/documents", files={"file": (name, data)}, params=WAIT)


def test_chinese_text_and_english_markdown_answer_two_turns_through_the_sdk(http, openai_client) -> None:
    for name, text in (("退款政策.txt", POLICY_ZH), ("returns.md", GUIDE_EN)):
        response = _upload(http, name, text.encode())
        assert response.status_code in (200, 201), response.text
        assert response.json()["status"] == "completed"
    found = http.post("/v1/search", json={"query": "How many days to return an item?"}).json()["data"]
    assert found[0]["filename"] == "returns.md" and found[0]["attributes"]["locator_label"].endswith("Deadline")

    first = openai_client.responses.create(model="calypso-rag-agent", input="礼品卡可以退款吗？")
    assert "礼品卡一律不予退款" in first.output_text
    second = openai_client.responses.create(
        model="calypso-rag-agent", input="运费由谁承担？", previous_response_id=first.id
    )
    assert "运费由客户承担" in second.output_text
    message = next(o for o in second.output if o.type == "message")
    assert "退款政策.txt" in {getattr(a, "filename", None) for a in message.content[0].annotations}


def test_bad_small_text_uploads_are_openai_errors_and_store_nothing(http) -> None:
    before = http.get("/v1/documents").json()["data"]
    for name, data in (("blank.txt", b" \n\t\n"), ("empty.md", b"")):
        response = _upload(http, name, data)
        assert response.status_code == 400, response.text
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["param"] == "file"
    assert http.get("/v1/documents").json()["data"] == before
