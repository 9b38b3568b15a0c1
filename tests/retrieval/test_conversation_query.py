"""The conversation query rule: short follow-ups are searched with the turn before them (issue 25)."""

from __future__ import annotations

import pytest

from calypso.retrieval.conversation_query import is_follow_up, search_query


def _text(message: dict) -> str:
    return message["content"]


@pytest.mark.parametrize("text", ["Who?", "And in 2021?", "What about gift cards?", "为什么？", "谁？"])
def test_short_turns_are_follow_ups(text: str) -> None:
    assert is_follow_up(text)


@pytest.mark.parametrize(
    "text",
    [
        "When did Hannibal cross the Alps?",
        "0-dimensional biomaterials show inductive properties.",
        "锣鼓经是什么意思呢？",
    ],
)
def test_standalone_questions_are_not(text: str) -> None:
    assert not is_follow_up(text)


def test_the_query_of_a_conversation() -> None:
    first = {"role": "user", "content": "When did Hannibal cross the Alps?"}
    answer = {"role": "assistant", "content": "In 218 BC."}
    assert search_query([first], _text) == first["content"]  # one question: as written
    follow_up = [first, answer, {"role": "user", "content": "Who?"}]
    assert search_query(follow_up, _text) == "When did Hannibal cross the Alps? Who?"
    tool_turn = [*follow_up, {"role": "assistant", "content": None}, {"role": "tool", "content": "x"}]
    assert search_query(tool_turn, lambda m: m["content"] or "") == "When did Hannibal cross the Alps? Who?"
    standalone = [first, answer, {"role": "user", "content": "How high is Mont Blanc in metres?"}]
    assert search_query(standalone, _text) == "How high is Mont Blanc in metres?"
