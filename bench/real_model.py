"""Calypso behind a real model: what a real model writes, cited and checked (issue 39).

llama.cpp's own server (the ``xllamacpp`` wheel, started through ``../shared/tools/real-llm/serve.py``)
serves a small instruct model assembled from the package registry; a served Calypso (``calypso serve``, a
real process on loopback) generates through it with ``CALYPSO_LLM_BASE_URL`` pointed at a recording proxy
in this process, and the questions go through the official OpenAI SDK, rotating over Responses and Chat
Completions, streamed and not (question i takes mode i mod 4). Sets:

* ``alps``: the 39 Alps questions over the 25-page Alps PDF (gold answer, gold pages);
* ``unanswerable``: ``bench/data/alps_unanswerable.jsonl``, questions the Alps article does not answer
  (near topic: heights, years, lakes it does not give; off topic);
* ``zh`` / ``de``: the first N questions of the Chinese (CMRC 2018) and German (XQuAD) answer sets over
  their paragraphs.

Per model and set it prints: gold answer in the text; a citation on the gold page (Alps) or paragraph;
answers with model markers vs inferred citations only; false flags (sentences that hold the gold answer or
restate the gold fact, flagged weak or unsupported); invented sentences caught (unanswerable: claim
sentences flagged); unanswerable questions declined or fully flagged (state ``missing``, or no claim left
``supported``); prose artifacts left by marker handling; answers in the question's language; and
Calypso's own time: time to first token at the client minus the model server's, and total minus the
model server's time (from the proxy).

``--record FILE`` keeps every question's raw model text; ``--replay FILE`` serves those texts from the
scripted upstream instead of a model, so changes to marker handling and support can be measured on what
the model wrote without running it again (retrieval is deterministic, so the prompts are the same).

    /tmp/llm-venv/bin/pip install 'xllamacpp==2026.10.11549'
    .venv/bin/python -m bench.real_model --model qwen2.5-coder-1.5b --sets alps,unanswerable --record out.json
    .venv/bin/python -m bench.real_model --replay out.json --sets alps,unanswerable -v
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import unicodedata
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common.model_server import Calypso, ModelServer, prepare_home
from bench.common.paths import data_dir
from calypso.generation.fake_upstream import FakeUpstream, Script
from calypso.loopback import LoopbackServer
from calypso.text.languages import detect
from calypso.text.tokenize import STOPWORDS_EN_EXTENDED

MODES = ("responses", "responses-stream", "chat", "chat-stream")
UNANSWERABLE = Path(__file__).with_name("data") / "alps_unanswerable.jsonl"
CROSSLINGUAL = Path(__file__).with_name("data") / "crosslingual" / "real_model_questions.jsonl"

# Prose a removed marker can leave behind: a preposition or verb with its object gone, an empty bracket, a
# page reference with nothing to refer to, a marker left in the text.
ARTIFACTS = [
    re.compile(
        r"\b(?:[Aa]ccording to|[Aa]s (?:stated|noted|mentioned|described|shown) in|[Ss]ee|[Ii]n|[Ff]rom|[Bb]y|"
        r"[Oo]f|[Pp]er|[Aa]nd|[Oo]r|[Tt]o)\s*[,.;:)]"
    ),
    re.compile(r"^\s*(?:[Aa]ccording to|[Aa]s)\s*$"),
    re.compile(r"(?:^|[.!?]\s+)\(\s*(?:p|pp|page)\.?\s*\d+[^)]*\)"),
    re.compile(r"\(\s*\)|\[\s*\]|【\s*】"),
    re.compile(r"\[\s*(?:Source|source)\b|【\s*(?:Source\s*)?\d"),
    re.compile(r"\s[,.;:](?:\s|$)"),
]


def artifacts(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        for pattern in ARTIFACTS:
            m = pattern.search(line)
            if m:
                found.append(line[max(0, m.start() - 30) : m.end() + 30])
    return found


_SHORT_VOTES = {
    "de": frozenset(
        "die der das den dem des und ist sind war waren ein eine einen nicht mit von zu im auf sich "
        "wurde wurden gab hat hatte als bei nach".split()
    ),
    "en": frozenset("the and is are was were a an of to in by with for that this it".split()),
}


def answer_language(text: str) -> str:
    """The detector's language of ``text``; for a sentence too short for it, a vote of German and English function
    words; "?" when nothing tells (a bare number, names only)."""
    if not re.search(r"[^\W\d_]", text):
        return "?"
    found = detect(text, "?")
    if found != "?":
        return found
    words = re.findall(r"\w+", text.lower())
    votes = {code: sum(w in table for w in words) for code, table in _SHORT_VOTES.items()}
    best = max(votes, key=votes.__getitem__)
    return best if votes[best] > 0 and list(votes.values()).count(votes[best]) == 1 else "?"


def fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"\w+", fold(text)) if w not in STOPWORDS_EN_EXTENDED and len(w) > 2]


def holds_answer(text: str, answers: list[str]) -> bool:
    """The gold answer, case and space folded; for CJK with no spaces at all; for an English answer of several
    words, every content word of it."""
    folded = fold(text)
    for gold in answers:
        g = fold(gold)
        if not g:
            continue
        if g in folded or g.replace(" ", "") in folded.replace(" ", ""):
            return True
        words = content_words(gold)
        if len(words) >= 2 and all(w in folded for w in words):
            return True
    return False


def restates(sentence: str, facts: list[str], answers: list[str]) -> bool:
    """A correct sentence: it holds the gold answer, or 70% of its content words are in the gold fact."""
    if holds_answer(sentence, answers):
        return True
    words = content_words(sentence)
    fact = fold(" ".join(facts))
    return len(words) >= 3 and sum(w in fact for w in words) / len(words) >= 0.7


@dataclass
class Exchange:
    """One request the proxy forwarded: the model's text, its time to first token and its total time."""

    text: str = ""
    first_token: float | None = None
    seconds: float = 0.0
    started: float = 0.0  # perf_counter when the request arrived (the bench's clock: the proxy runs in it)
    marks: list[tuple[float, int]] = field(default_factory=list)  # (perf_counter, characters written so far)

    def wrote(self, characters: int) -> float | None:
        """When the model had written ``characters`` characters (perf_counter), or None if it never did."""
        return next((t for t, n in self.marks if n >= characters), None)


class RecordingProxy:
    """Forwards /v1/chat/completions to the model server and keeps what the model wrote and how long it took."""

    def __init__(self, upstream: str) -> None:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse
        from starlette.routing import Route

        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        client = httpx.AsyncClient(timeout=httpx.Timeout(600, connect=10))

        async def chat(request: Request) -> Response:
            body = await request.json()
            started = time.perf_counter()
            exchange = Exchange(started=started)
            self.exchanges.append(exchange)
            if not body.get("stream"):
                reply = await client.post(self.upstream + "/chat/completions", json=body)
                exchange.seconds = exchange.first_token = time.perf_counter() - started
                if reply.status_code == 200:
                    exchange.text = reply.json()["choices"][0]["message"].get("content") or ""
                return Response(reply.content, reply.status_code, media_type="application/json")

            async def relay() -> Any:
                try:
                    async for line in lines():
                        yield line
                finally:  # also when Calypso closes the stream at its finish chunk, before [DONE]
                    exchange.seconds = exchange.seconds or time.perf_counter() - started

            async def lines() -> Any:
                async with client.stream("POST", self.upstream + "/chat/completions", json=body) as reply:
                    async for line in reply.aiter_lines():
                        if line.startswith("data: ") and line != "data: [DONE]":
                            try:
                                choice = json.loads(line[6:])["choices"][0]
                                delta = choice["delta"].get("content") or ""
                            except (KeyError, IndexError, ValueError):
                                choice, delta = {}, ""
                            now = time.perf_counter()
                            if choice.get("finish_reason"):  # the model is done with this answer
                                exchange.seconds = now - started
                            if delta and exchange.first_token is None:
                                exchange.first_token = now - started
                            exchange.text += delta
                            exchange.marks.append((now, len(exchange.text)))
                        yield line + "\n"

            return StreamingResponse(relay(), media_type="text/event-stream")

        async def models(request: Request) -> Response:
            reply = await client.get(self.upstream + "/models")
            return JSONResponse(reply.json(), reply.status_code)

        app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models)])
        self.server = LoopbackServer(app, "recording-proxy")
        self.server.start()
        self.base_url = f"http://127.0.0.1:{self.server.port}/v1"

    def close(self) -> None:
        self.server.stop()


# ------------------------------------------------------------------------------------------- the sets
@dataclass
class Question:
    set: str
    qid: str
    text: str
    answers: list[str] = field(default_factory=list)  # empty: unanswerable
    facts: list[str] = field(default_factory=list)
    gold_pages: list[int] = field(default_factory=list)
    gold_document: str | None = None
    language: str = "en"


def load_sets(names: list[str], limit: int, multilingual: int) -> list[Question]:
    out: list[Question] = []
    root = data_dir()
    for name in names:
        if name == "alps":
            rows = [json.loads(line) for line in (root / "alps-wiki-qa" / "alps_qa_with_pdf_pages.jsonl").open()]
            out += [
                Question("alps", r["qid"], r["question"].strip(), [r["answer"]], r["facts"], r["gold_pdf_pages"])
                for r in rows
            ]
        elif name == "unanswerable":
            rows = [json.loads(line) for line in UNANSWERABLE.open()]
            out += [Question("unanswerable", r["qid"], r["question"]) for r in rows]
        elif name in ("zh", "de"):
            folder = root / "multilingual" / ("cmrc2018-zh" if name == "zh" else "xquad-de")
            texts = {r["_id"]: r["text"] for r in map(json.loads, (folder / "queries.jsonl").open(encoding="utf-8"))}
            rows = [json.loads(line) for line in (folder / "answers.jsonl").open(encoding="utf-8")][:multilingual]
            out += [
                Question(
                    name,
                    r["query_id"],
                    texts[r["query_id"]],
                    r["answers"],
                    gold_document=r["context_id"],
                    language=name,
                )
                for r in rows
            ]
        elif name in ("xling-zh", "xling-es"):  # issue 43: English over the Chinese paragraphs, Spanish over the Alps
            rows = [json.loads(line) for line in CROSSLINGUAL.open(encoding="utf-8")]
            out += [
                Question(
                    name,
                    r["qid"],
                    r["question"],
                    r["answers"],
                    gold_pages=r.get("gold_pages", []),
                    gold_document=r.get("gold_document"),
                    language=r["language"],
                )
                for r in rows
                if r["set"] == name
            ]
        else:
            raise SystemExit(f"unknown set {name!r}")
    if limit:
        kept: list[Question] = []
        for name in names:
            kept += [q for q in out if q.set == name][:limit]
        out = kept
    return out


# ------------------------------------------------------------------------------------------- asking
@dataclass
class Reply:
    text: str
    citations: list[dict[str, Any]]  # {page, document, attribution}
    status: dict[str, Any]  # the _aicore status block: grounded_sources_state, attribution, claims
    first_token: float
    seconds: float
    error: str | None = None
    first_at: float | None = None  # perf_counter of the first text delta (streamed modes)
    first_text: str = ""


def _status_from(meta: dict[str, Any] | None) -> dict[str, Any]:
    meta = meta or {}
    return meta.get("_aicore", meta)


def ask(client: Any, mode: str, bot: str, question: str) -> Reply:
    started = time.perf_counter()
    first: float | None = None
    first_at: float | None = None
    first_text = ""
    if mode.startswith("responses"):
        tools = [{"type": "file_search", "vector_store_ids": [bot]}]
        if mode == "responses":
            response = client.responses.create(model=bot, input=question, tools=tools)
        else:
            response = None
            with client.responses.stream(model=bot, input=question, tools=tools) as stream:
                for event in stream:
                    if event.type == "response.output_text.delta" and first is None:
                        first = time.perf_counter() - started
                        first_at, first_text = time.perf_counter(), event.delta
                    # The SDK's get_final_response() knows only response.completed; a max_output_tokens cut
                    # ends with response.incomplete, as OpenAI's own streams do.
                    if event.type in ("response.completed", "response.incomplete", "response.failed"):
                        response = event.response
            if response is None:
                raise RuntimeError("the stream ended without a final response")
        data = response.model_dump()
        text = response.output_text
        status = _status_from(data.get("metadata") or {})
        sources = {s["source_index"]: s for s in status.get("grounded_sources", [])}
        citations = []
        for item in data["output"]:
            for part in item.get("content") or []:
                for a in part.get("annotations") or []:
                    source = sources.get(a.get("source_index") or (a.get("_aicore") or {}).get("source_index"), {})
                    citations.append(
                        {
                            "page": a.get("page_number", source.get("page_number")),
                            "document": a.get("filename") or source.get("filename"),
                            "attribution": (a.get("_aicore") or {}).get("attribution"),
                        }
                    )
    else:
        messages = [{"role": "user", "content": question}]
        if mode == "chat":
            completion = client.chat.completions.create(model=bot, messages=messages)
            data = completion.model_dump()
            message = data["choices"][0]["message"]
            text = message.get("content") or ""
            cites = message.get("citations") or []
            status = _status_from(message.get("_aicore") or data.get("_aicore") or data.get("metadata"))
        else:
            parts: list[str] = []
            cites, status = [], {}
            stream = client.chat.completions.create(model=bot, messages=messages, stream=True)
            for chunk in stream:
                extra = chunk.model_dump()
                for choice in extra.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        if first is None:
                            first = time.perf_counter() - started
                            first_at, first_text = time.perf_counter(), delta["content"]
                        parts.append(delta["content"])
                    cites = delta.get("citations") or cites
                    if delta.get("_aicore"):
                        status = delta["_aicore"]
                if extra.get("_aicore"):
                    status = extra["_aicore"]
                cites = extra.get("citations") or cites
            text = "".join(parts)
        citations = [
            {
                "page": c.get("page_number") or c.get("page"),
                "document": c.get("filename") or c.get("source_filename"),
                "attribution": c.get("attribution"),
            }
            for c in cites
        ]
    seconds = time.perf_counter() - started
    # The Chat dialect's "Sources:" appendix is not the answer's prose.
    body = text.split("\n\nSources:")[0]
    return Reply(body, citations, status, first if first is not None else seconds, seconds, None, first_at, first_text)


# ------------------------------------------------------------------------------------------- scoring
def score(q: Question, reply: Reply) -> dict[str, Any]:
    claims = reply.status.get("claims") or {}
    state = reply.status.get("grounded_sources_state")
    flagged = [s["text"] for s in claims.get("unsupported_spans") or []]
    supported = claims.get("supported", 0)
    attribution = reply.status.get("attribution") or {}
    gold_cited = (
        any(c["page"] in q.gold_pages for c in reply.citations)
        if q.gold_pages
        else any((c["document"] or "").startswith(q.gold_document or "\0") for c in reply.citations)
    )
    out = {
        "question_language": q.language,
        "set": q.set,
        "qid": q.qid,
        "text": reply.text,
        "state": state,
        "support": claims.get("support"),
        "flagged": flagged,
        "model_markers": attribution.get("model", 0),
        "inferred": attribution.get("inferred", 0),
        "cited": bool(reply.citations),
        "gold_answer": bool(q.answers) and holds_answer(reply.text, q.answers),
        "gold_cited": gold_cited,
        "false_flags": [s for s in flagged if q.answers and restates(s, q.facts, q.answers)],
        "declined": state == "missing" or supported == 0,
        "invented_caught": len(flagged),
        "claims": sum(claims.get(k, 0) for k in ("supported", "weak", "unsupported")),
        "artifacts": artifacts(reply.text),
        # The answer's language as the detector tells it; "?" when the text is too short to tell ("3:08", a
        # German sentence of names and numbers): reported apart, not counted either way.
        "language": answer_language(reply.text),
    }
    return out


def summarise(name: str, rows: list[dict[str, Any]], times: list[tuple[float, float]]) -> None:
    n = len(rows)
    if not n:
        return
    c = lambda key: sum(1 for r in rows if r[key])  # noqa: E731
    print(f"  [{name}] {n} questions")
    if name != "unanswerable":
        print(f"    gold answer in the text          {c('gold_answer')}/{n}")
        print(f"    a citation on the gold {'page' if name in ('alps',) else 'paragraph'}      {c('gold_cited')}/{n}")
        print(f"    false flags (correct sentences)  {sum(len(r['false_flags']) for r in rows)}")
    else:
        print(f"    declined or fully flagged        {c('declined')}/{n}")
        print(
            f"    invented sentences caught        {sum(r['invented_caught'] for r in rows)}"
            f" of {sum(r['claims'] for r in rows)} claims"
        )
    print(
        f"    answers with model markers       {sum(1 for r in rows if r['model_markers'])}/{n}"
        f"  (inferred only: {sum(1 for r in rows if r['inferred'] and not r['model_markers'])})"
    )
    print(f"    prose artifacts                  {sum(len(r['artifacts']) for r in rows)}")
    told = [r for r in rows if r["language"] != "?"]
    same = sum(1 for r in told if r["language"] == r["question_language"])
    print(f"    in the question's language       {same}/{len(told)} told ({n - len(told)} too short to tell)")
    states: dict[str, int] = {}
    for r in rows:
        key = f"{r['state']}/{r['support']}"
        states[key] = states.get(key, 0) + 1
    print(f"    states                           {dict(sorted(states.items()))}")
    if times:
        ttft = [t[0] * 1000 for t in times if t[0] == t[0]]
        total = [t[1] * 1000 for t in times]
        if ttft:
            print(
                f"    calypso's added first-text delay p50 {statistics.median(ttft):.1f} ms, max {max(ttft):.1f} ms"
                f" ({len(ttft)} streamed answers)"
            )
        print(f"    calypso's total (minus model)    p50 {statistics.median(total):.0f} ms, max {max(total):.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="a real-llm tool model name")
    parser.add_argument("--upstream", help="an OpenAI-compatible server already running (instead of --model)")
    parser.add_argument("--llm-python", default="/tmp/llm-venv/bin/python", help="a Python with xllamacpp")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sets", default="alps,unanswerable,zh,de")
    parser.add_argument("--limit", type=int, default=0, help="first N questions of each set (0: all)")
    parser.add_argument("--multilingual", type=int, default=50, help="questions of the zh and de sets")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--record", type=Path, help="write each question's raw model text here")
    parser.add_argument("--replay", type=Path, help="serve the recorded texts instead of a model")
    parser.add_argument("--home", type=Path, help="a prepared home to reuse (made if empty)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    # The SDK warns that metadata._aicore is not a string: it is Calypso's documented extension.
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
    names = args.sets.split(",")
    questions = load_sets(names, args.limit, args.multilingual)

    import openai

    temp = tempfile.TemporaryDirectory()
    home = args.home or Path(temp.name)
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "calypso.db").exists() and not any(home.glob("*.db")):
        t0 = time.perf_counter()
        prepare_home(home, names)
        print(f"knowledge bases ready in {time.perf_counter() - t0:.0f} s", flush=True)

    model: ModelServer | None = None
    fake: FakeUpstream | None = None
    recorded: dict[str, str] = {}
    if args.replay:
        recorded = json.loads(args.replay.read_text())["texts"]
        questions = [q for q in questions if f"{q.set}/{q.qid}" in recorded]
        fake = FakeUpstream()
        fake.__enter__()
        upstream = fake.base_url
        label = f"replay of {args.replay.name}"
    elif args.upstream:
        upstream, label = args.upstream, args.upstream
    else:
        model = ModelServer(args.model, args.llm_python, args.threads)
        upstream, label = model.base_url, args.model
    proxy = RecordingProxy(upstream)
    server: Calypso | None = None
    results: list[dict[str, Any]] = []
    times: dict[str, list[tuple[float, float]]] = {}
    texts: dict[str, str] = {}
    try:
        server = Calypso(home, proxy.base_url, args.max_tokens)
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", timeout=900, max_retries=0)
        for i, q in enumerate(questions):
            mode = MODES[i % len(MODES)]
            bot = {"unanswerable": "alps", "xling-es": "alps", "xling-zh": "zh"}.get(q.set, q.set)
            if fake is not None:
                fake.script(Script.from_text(recorded.get(f"{q.set}/{q.qid}", "The sources do not say.")))
            before = len(proxy.exchanges)
            asked = time.perf_counter()
            try:
                reply = ask(client, mode, bot, q.text)
            except openai.APIError as exc:
                print(f"  {q.set}/{q.qid} {mode}: {exc}", flush=True)
                continue
            exchange = proxy.exchanges[before] if len(proxy.exchanges) > before else Exchange()
            if len(proxy.exchanges) - before != 1:
                print(f"  {q.set}/{q.qid}: {len(proxy.exchanges) - before} model requests for one question", flush=True)
            texts[f"{q.set}/{q.qid}"] = exchange.text
            row = score(q, reply)
            row["mode"] = mode
            row["raw"] = exchange.text
            # Where Calypso's own time went: before its upstream request reached the model, and after.
            row["before_model_ms"] = round((exchange.started - asked) * 1000, 1) if exchange.started else None
            row["calypso_ms"] = round((reply.seconds - exchange.seconds) * 1000, 1)
            results.append(row)
            if reply.first_at is not None:
                # Calypso's own delay to the first text: from when the model had written as much text as the
                # first delta shows to the client's first delta (a sentence end waits for the next character:
                # that wait is the model's). Streamed modes only; the total is every mode's.
                last = exchange.marks[-1][0] if exchange.marks else exchange.started + exchange.seconds
                written = exchange.wrote(len(reply.first_text)) or last
                times.setdefault(q.set, []).append((reply.first_at - written, reply.seconds - exchange.seconds))
            else:
                times.setdefault(q.set, []).append((float("nan"), reply.seconds - exchange.seconds))
            if args.verbose:
                marks = " ".join(k for k in ("gold_answer", "gold_cited", "declined") if row[k])
                print(f"--- {q.set}/{q.qid} [{mode}] {q.text}  gold={q.answers[:1]} pages={q.gold_pages}")
                print(f"    raw:  {exchange.text!r}")
                print(f"    text: {reply.text!r}")
                print(f"    calypso {row['calypso_ms']} ms ({row['before_model_ms']} ms before the model was asked)")
                print(
                    f"    state {row['state']}/{row['support']} markers {row['model_markers']} inferred "
                    f"{row['inferred']} cites {[c['page'] for c in reply.citations]} {marks}"
                )
                for s in row["flagged"]:
                    print(f"    flagged{' (FALSE FLAG)' if s in row['false_flags'] else ''}: {s!r}")
                for a in row["artifacts"]:
                    print(f"    ARTIFACT: {a!r}")
                sys.stdout.flush()
    finally:
        if server is not None:
            server.close()
        proxy.close()
        if model is not None:
            model.close()
        if fake is not None:
            fake.__exit__(None, None, None)
    if args.record:
        args.record.write_text(
            json.dumps({"model": label, "texts": texts, "rows": results}, ensure_ascii=False, indent=1)
        )
    print(f"model: {label}; modes rotated {', '.join(MODES)}; max_tokens {args.max_tokens}")
    for name in names:
        summarise(name, [r for r in results if r["set"] == name], times.get(name, []))


if __name__ == "__main__":
    main()
