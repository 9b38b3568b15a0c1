"""docs/agents.md's scripts run as written against a real server, the fake upstream behind it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from calypso.demo import ingest_demo
from calypso.generation.fake_upstream import FakeUpstream, Script

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
pytest.importorskip("agents")
pytest.importorskip("langchain_openai")


def _scripts() -> dict[str, str]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return {
        "agents": next(b for b in blocks if "from agents import" in b),
        "langchain": next(b for b in blocks if "langchain" in b),
        "llamaindex": next(b for b in blocks if "llama_index" in b),
    }


@pytest.mark.parametrize("name", ["agents", "langchain", "llamaindex"])
def test_the_doc_script_runs(name: str, kb, settings, server, monkeypatch, tmp_path, capsys) -> None:
    if name == "llamaindex":  # needs openai<3, which the Agents SDK of the test extra excludes (docs/agents.md)
        pytest.importorskip("llama_index.llms.openai_like", reason="LlamaIndex is installed beside openai<3 only")
    ingest_demo(kb)
    monkeypatch.setenv("CALYPSO_URL", server.url)
    monkeypatch.chdir(tmp_path)  # SQLiteSession's file, if any, lands here
    with FakeUpstream(default=Script.agent()) as upstream:
        settings.llm_base_url = upstream.base_url
        settings.llm_model = "fake-model"
        settings.generator = "upstream"
        exec(compile(_scripts()[name], f"docs/agents.md ({name})", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    assert "30 days" in out
