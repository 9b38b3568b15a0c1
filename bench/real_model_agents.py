"""The Agents SDK against Calypso with a real model behind it: tool calls and JSON-schema output (issue 39).

llama.cpp's server (through ``../shared/tools/real-llm``, the model's own chat template applying tools and
``response_format``) serves the model; ``calypso serve`` generates through it; the OpenAI Agents SDK,
unchanged, runs three agents over the Alps PDF, each ``--runs`` times:

* ``tool``: a ``function_tool`` (metres to feet) the question needs, plus ``FileSearchTool``: did the model
  call the function with a number, and does the final answer hold its result?
* ``schema``: ``output_type`` a pydantic model (``answer: str``, ``year: int``): did the final output parse,
  and is the year the article's?
* ``search``: ``FileSearchTool`` only: is the answer cited (annotations) and grounded?

    .venv/bin/python -m bench.real_model_agents --model qwen2.5-coder-1.5b [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bench.common.model_server import Calypso, ModelServer, prepare_home

feet_calls: list[float] = []


class Ascent(BaseModel):
    answer: str
    year: int


def make_tools() -> Any:
    import agents

    @agents.function_tool
    def metres_to_feet(metres: float) -> str:
        """Convert a height in metres to feet.

        Args:
            metres: The height in metres.
        """
        feet_calls.append(metres)
        return f"{metres} m is {metres * 3.28084:.0f} ft."

    return metres_to_feet


async def run_agents(base_url: str, runs: int) -> dict[str, list[dict[str, Any]]]:
    import agents
    import openai

    agents.set_tracing_disabled(True)
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=900)
    model = agents.OpenAIResponsesModel(model="alps", openai_client=client)
    search = agents.FileSearchTool(vector_store_ids=["alps"], include_search_results=True)
    out: dict[str, list[dict[str, Any]]] = {"tool": [], "schema": [], "search": []}
    for _ in range(runs):
        feet_calls.clear()
        agent = agents.Agent(
            name="heights",
            instructions="Answer from the documents. Use metres_to_feet to convert heights to feet.",
            model=model,
            tools=[search, make_tools()],
        )
        started = time.perf_counter()
        try:
            result = await agents.Runner.run(agent, "How high is Mont Blanc in feet?", max_turns=4)
            text = str(result.final_output)
            out["tool"].append(
                {
                    "called": bool(feet_calls),
                    "args": list(feet_calls),
                    "holds_result": any(f"{m * 3.28084:.0f}" in text.replace(",", "") for m in feet_calls),
                    "text": text[:200],
                    "seconds": time.perf_counter() - started,
                }
            )
        except Exception as exc:  # the benchmark reports what fails
            out["tool"].append({"error": f"{type(exc).__name__}: {exc}"[:300]})

        agent = agents.Agent(
            name="history",
            instructions="Answer from the documents.",
            model=model,
            tools=[search],
            output_type=Ascent,
        )
        started = time.perf_counter()
        try:
            result = await agents.Runner.run(agent, "In which year did Edward Whymper first climb the Matterhorn?")
            final = result.final_output
            out["schema"].append(
                {
                    "parsed": isinstance(final, Ascent),
                    "year": getattr(final, "year", None),
                    "seconds": time.perf_counter() - started,
                }
            )
        except Exception as exc:
            out["schema"].append({"error": f"{type(exc).__name__}: {exc}"[:300]})

        agent = agents.Agent(name="alps", instructions="Answer from the documents.", model=model, tools=[search])
        started = time.perf_counter()
        try:
            result = await agents.Runner.run(agent, "Where was Otzi the Iceman discovered?")
            responses = result.raw_responses
            annotations = [
                a
                for r in responses
                for item in r.output
                for part in getattr(item, "content", None) or []
                for a in getattr(part, "annotations", None) or []
            ]
            out["search"].append(
                {
                    "cited": bool(annotations),
                    "text": str(result.final_output)[:200],
                    "seconds": time.perf_counter() - started,
                }
            )
        except Exception as exc:
            out["search"].append({"error": f"{type(exc).__name__}: {exc}"[:300]})
    await client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--llm-python", default="/tmp/llm-venv/bin/python")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--home", type=Path)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
    temp = tempfile.TemporaryDirectory()
    home = args.home or Path(temp.name)
    home.mkdir(parents=True, exist_ok=True)
    if not any(home.glob("*.db")):
        prepare_home(home, ["alps"])
    model = ModelServer(args.model, args.llm_python, 2)
    server = None
    try:
        server = Calypso(home, model.base_url, 300)
        results = asyncio.run(run_agents(server.base_url, args.runs))
    finally:
        if server is not None:
            server.close()
        model.close()
    print(f"model: {args.model}; {args.runs} runs of each agent")
    for name, rows in results.items():
        errors = [r["error"] for r in rows if "error" in r]
        ok = [r for r in rows if "error" not in r]
        if name == "tool":
            print(
                f"  tool call: called {sum(r['called'] for r in ok)}/{len(rows)}, result in the answer "
                f"{sum(r['holds_result'] for r in ok)}/{len(rows)}, args {[r['args'] for r in ok]}"
            )
        elif name == "schema":
            print(
                f"  JSON schema: parsed {sum(r['parsed'] for r in ok)}/{len(rows)}, years {[r['year'] for r in ok]}"
                " (the article: 1865)"
            )
        else:
            print(f"  file search: cited {sum(r['cited'] for r in ok)}/{len(rows)}")
        for r in ok:
            if "text" in r:
                print(f"    {r['text']!r}")
        for e in errors:
            print(f"    error: {e}")


if __name__ == "__main__":
    main()
