"""The `calypso` command, run as a real subprocess."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import calypso


def _calypso(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CALYPSO_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "calypso.cli", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_ingest_reports_ingested_duplicate_and_refused(tmp_path: Path, data_dir: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nThe lighthouse keeper logs every ship at dawn.\n")
    (folder / "empty.txt").write_bytes(b"")
    (folder / "program.exe").write_bytes(b"MZ\x00\x00" * 64)
    (folder / "data.json").write_text('{"looks": "like text"}')  # an unknown type: refused, as the API does
    pdf = data_dir / "ingestion-docs/pdf/federal-register-2020-17221.pdf"
    result = _calypso("ingest", str(folder), str(pdf), "--namespace", "ops", home=tmp_path / "home")
    assert result.returncode == 1, result.stderr  # some files were refused
    out = result.stdout
    assert "ingested  " in out and "notes.md" in out and "federal-register-2020-17221.pdf" in out
    assert "(1 section, 1 passage, namespace ops)" in out and "(15 pages, " in out  # a Markdown file: sections
    assert "refused   " in out and "empty.txt" in out and "empty" in out.lower()
    assert "program.exe" in out and "supported" in out.lower()
    refused_json = next(line for line in out.splitlines() if "data.json" in line)
    assert refused_json.startswith("refused   ") and "application/pdf" in refused_json and ".md" in refused_json
    assert "2 completed, 0 duplicates, 3 failed;" in out and " passages in " in out

    assert "federal-register-2020-17221.pdf  [" in result.stderr and " passages" in result.stderr  # progress
    # The namespace's index is left on disk, so the next server loads it instead of building it.
    assert (tmp_path / "home/index/default/ops/CURRENT").is_file()

    again = _calypso("ingest", str(folder / "notes.md"), "--namespace", "ops", home=tmp_path / "home")
    assert "duplicate" in again.stdout and "0 completed, 1 duplicate, 0 failed" in again.stdout
    assert again.returncode == 0

    found = _calypso("search", "lighthouse keeper", "--namespace", "ops", home=tmp_path / "home")
    assert found.returncode == 0, found.stderr
    first = found.stdout.splitlines()[0]
    assert "notes.md (Notes)" in first and "[chunk 0]" in first  # located by its heading, not an invented page

    pdf_hit = _calypso("search", "Federal Register", "--namespace", "ops", "-k", "1", home=tmp_path / "home")
    assert "federal-register-2020-17221.pdf (p" in pdf_hit.stdout

    bad = _calypso("search", "x", "--namespace", "bad name", home=tmp_path / "home")
    assert bad.returncode == 2 and "Invalid namespace" in bad.stderr


def test_settings_lists_every_setting(tmp_path: Path) -> None:
    result = _calypso("settings", home=tmp_path)
    assert result.returncode == 0
    for name in ("CALYPSO_HOME", "CALYPSO_MAX_UPLOAD_BYTES", "CALYPSO_CHUNK_SIZE", "CALYPSO_CRAWL_ALLOW_PRIVATE"):
        assert name in result.stdout


def test_environment_settings_are_read(monkeypatch, tmp_path: Path) -> None:
    from calypso.config import Settings

    monkeypatch.setenv("CALYPSO_MAX_UPLOAD_BYTES", "1234")
    monkeypatch.setenv("CALYPSO_HOME", str(tmp_path))
    settings = Settings()
    assert settings.max_upload_bytes == 1234 and settings.home == tmp_path


def test_demo_knowledge_base_answers_a_question(kb, searcher) -> None:
    from calypso.demo import ingest_demo

    assert ingest_demo(kb) == 3
    assert ingest_demo(kb) == 0  # already there
    passages = searcher.search("refund within 30 days of purchase", searcher.scope(max_results=1))
    assert passages[0].document.filename == "refund_policy_2026.md"


def test_ask_prints_numbered_citations_and_evidence(tmp_path: Path, data_dir: Path) -> None:
    home = tmp_path / "home"
    pdf = data_dir / "ingestion-docs/pdf/GeoTopo-komprimiert.pdf"
    assert _calypso("ingest", str(pdf), "--namespace", "math", home=home).returncode == 0
    for extra in ([], ["--stream"]):
        result = _calypso("ask", "Was ist die Fundamentalgruppe?", "--namespace", "math", *extra, home=home)
        assert result.returncode == 0, result.stderr
        out = result.stdout
        assert "[1]" in out and "(answered by extractive; retrieval grounded)" in out
        lines = out.splitlines()
        assert lines.count("[1] GeoTopo-komprimiert.pdf") == 1, out  # each source once, its quotes under it
        quote = lines[lines.index("[1] GeoTopo-komprimiert.pdf") + 1].strip()
        assert quote.startswith('"') and len(quote) > 20 and '" (p. ' in quote, out
    nothing = _calypso("ask", "xylophone zebra quasar", "--namespace", "math", home=home)
    assert "could not find" in nothing.stdout and "retrieval ungrounded" in nothing.stdout


def test_ask_in_chinese_prints_the_chinese_answer(tmp_path: Path) -> None:
    home = tmp_path / "home"
    policy = tmp_path / "policy.md"
    policy.write_text(
        "# 退款政策\n\n## 礼品卡\n\n礼品卡一律不予退款，也不能兑换现金。礼品卡余额可以在有效期内多次使用。\n\n"
        "## 运费\n\n运费由客户承担，除非商品在运输途中损坏。\n",
        encoding="utf-8",
    )
    assert _calypso("ingest", str(policy), "--namespace", "zh", home=home).returncode == 0
    for extra in ([], ["--stream"]):
        result = _calypso("ask", "礼品卡可以退款吗？", "--namespace", "zh", *extra, home=home)
        assert result.returncode == 0, result.stderr
        assert "礼品卡一律不予退款" in result.stdout and "[1]" in result.stdout
    # An ASCII terminal gets escapes, not a UnicodeEncodeError.
    env = {**os.environ, "CALYPSO_HOME": str(home), "PYTHONIOENCODING": "ascii"}
    narrow = subprocess.run(
        [sys.executable, "-m", "calypso.cli", "ask", "礼品卡可以退款吗？", "--namespace", "zh"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert narrow.returncode == 0, narrow.stderr
    assert "\\u793c\\u54c1\\u5361" in narrow.stdout  # 礼品卡


def test_an_unknown_generator_setting_is_one_line_at_start(tmp_path: Path) -> None:
    env = {**os.environ, "CALYPSO_HOME": str(tmp_path), "CALYPSO_GENERATOR": "typo"}
    result = subprocess.run(
        [sys.executable, "-m", "calypso.cli", "search", "x"], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: CALYPSO_GENERATOR='typo': unknown generator 'typo'; use one of: auto, extractive, upstream."
    )


def test_ingest_no_wait_submits_and_worker_needs_postgres(tmp_path: Path) -> None:
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nThe ferry leaves at noon.\n")
    submitted = _calypso("ingest", "--no-wait", str(note), home=tmp_path / "home")
    assert submitted.returncode == 0, submitted.stderr
    assert "submitted " in submitted.stdout and "1 submitted" in submitted.stdout
    worker = _calypso("worker", home=tmp_path / "home")
    assert worker.returncode == 1 and "needs PostgreSQL" in worker.stderr


def test_the_default_home_is_the_user_data_directory(tmp_path: Path) -> None:
    # The tests point XDG_DATA_HOME at a throwaway folder (conftest), so this is where the default lands.
    env = {k: v for k, v in os.environ.items() if k != "CALYPSO_HOME"}
    env["PYTHONPATH"] = str(Path(calypso.__file__).resolve().parents[1])  # this checkout, from any folder
    run = functools.partial(subprocess.run, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    settings = run([sys.executable, "-m", "calypso.cli", "settings"])
    expected = Path(os.environ["XDG_DATA_HOME"]) / "calypso"
    assert settings.returncode == 0
    assert settings.stdout.splitlines()[0] == f"data directory: {expected} (default)"
    # A search from another folder neither creates ./.calypso nor pretends to answer.
    search = run([sys.executable, "-m", "calypso.cli", "search", "refund"])
    assert search.returncode == 1 and not (tmp_path / ".calypso").exists()
    assert "has no documents" in search.stderr and str(expected) in search.stderr
    assert "calypso ingest" in search.stderr


def test_search_and_ask_on_an_empty_knowledge_base_say_where_they_looked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for command in (["search", "refund"], ["ask", "How long is the refund window?"]):
        result = _calypso(*command, home=home)
        assert result.returncode == 1, result.stdout
        assert f"the knowledge base at {home} has no documents in namespace 'general'" in result.stderr
        assert not home.exists()  # looking did not create it
    note = tmp_path / "note.md"
    note.write_text("# Note\n\nThe lighthouse keeper logs every ship at dawn.\n")
    assert _calypso("ingest", str(note), "--namespace", "ops", home=home).returncode == 0
    other = _calypso("ask", "lighthouse", home=home)
    assert other.returncode == 1 and "Namespaces with documents there: ops" in other.stderr
    settings = _calypso("settings", "--home", str(home), home=tmp_path)
    assert settings.stdout.splitlines()[0] == f"data directory: {home} (--home)"
    assert _calypso("search", "lighthouse", "--namespace", "ops", home=home).returncode == 0


def test_serve_says_which_languages_the_vectors_cover(minilm) -> None:  # type: ignore[no-untyped-def]
    from calypso.banner import search_summary

    assert "minilm-l6-v2-int8's vectors for en" in search_summary(minilm)
    assert "keywords" in search_summary(None)
    from calypso.embeddings.multilingual_e5 import MultilingualE5Embedder  # issue 43: constructed, not loaded

    multilingual = search_summary(MultilingualE5Embedder())
    assert "vectors for any language; a question finds passages in other languages too" in multilingual


def test_serve_logs_json_lines_with_the_request_id(tmp_path: Path) -> None:
    """``CALYPSO_LOG_FORMAT=json``: every line on stderr is a JSON object; a request's carry its x-request-id.
    The banner says what answers and where; a gRPC port another process holds is said to be, not reused."""
    import json
    import socket
    import time

    import httpx

    from testkit.live_server import free_port

    port = free_port()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    grpc_port = taken.getsockname()[1]
    env = {**os.environ, "CALYPSO_HOME": str(tmp_path / "home"), "CALYPSO_LOG_FORMAT": "json"}
    command = [sys.executable, "-m", "calypso.cli", "serve", "--port", str(port), "--grpc-port", str(grpc_port)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/healthz", headers={"x-request-id": "req-logged-1"})
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
                time.sleep(0.3)
        assert response.headers["x-request-id"] == "req-logged-1"
    finally:
        server.terminate()
        stdout, stderr = server.communicate(timeout=60)
        taken.close()
    assert "Answers: the built-in extractive answerer" in stdout
    assert f"HTTP API on http://127.0.0.1:{port}/v1" in stdout and "Auth: OFF" in stdout
    assert f"xAI gRPC API: OFF, port {grpc_port} is in use by another process" in stdout
    lines = [line for line in stderr.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line parses
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    access = [r for r in records if "/healthz" in r["message"]]
    assert access and access[0]["request_id"] == "req-logged-1", records


def test_dev_upstream_answers_like_a_model_and_the_banner_says_so(tmp_path: Path) -> None:
    """`calypso dev-upstream` is the scripted model server; the start-up banner probes it and says it answers."""
    import socket
    import time

    import httpx

    from calypso.banner import generator_line, port_in_use, storage_line
    from calypso.config import Settings
    from testkit.live_server import free_port

    port = free_port()
    command = [sys.executable, "-m", "calypso.cli", "dev-upstream", "--port", str(port)]
    upstream = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                assert httpx.get(f"{base}/models").status_code == 200
                break
            except httpx.TransportError:
                assert upstream.poll() is None and time.monotonic() < deadline, upstream.stderr
                time.sleep(0.2)
        settings = Settings(home=tmp_path, llm_base_url=base, llm_model="fake-model")
        assert generator_line(settings) == f"Answers: fake-model at {base} (answering)."
    finally:
        upstream.terminate()
        out, _ = upstream.communicate(timeout=30)
    assert f"CALYPSO_LLM_BASE_URL={base}" in out
    stopped = generator_line(Settings(home=tmp_path, llm_base_url=base, llm_model="fake-model"))
    assert "not answering" in stopped
    assert generator_line(Settings(home=tmp_path)).startswith("Answers: the built-in extractive answerer")
    shown = storage_line(Settings(home=tmp_path, database_url="postgresql://kb:s3cret@db.internal:5433/calypso"))
    assert "s3cret" not in shown and "postgresql://kb@db.internal:5433/calypso" in shown
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert port_in_use("127.0.0.1", taken.getsockname()[1])
    assert not port_in_use("127.0.0.1", free_port())


def test_cli_commands_use_the_running_servers_knowledge_base(tmp_path: Path) -> None:
    """With `calypso serve` holding the data directory, `ingest` and `search` go through its API (not a
    refusal, not a second index), `settings` says who serves it, and ./.calypso is found from its folder."""
    import time

    import httpx

    from testkit.live_server import free_port

    project = tmp_path / "project"
    project.mkdir()
    home = project / ".calypso"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "CALYPSO_HOME"}
    env["PYTHONPATH"] = str(Path(calypso.__file__).resolve().parents[1])
    command = [
        sys.executable,
        "-m",
        "calypso.cli",
        "serve",
        "--home",
        str(home),
        "--port",
        str(port),
        "--grpc-port",
        "0",
    ]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=project)
    run = functools.partial(subprocess.run, capture_output=True, text=True, env=env, timeout=300, cwd=project)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.3)
        note = tmp_path / "ferry.md"
        note.write_text("# Ferry\n\nThe harbour ferry leaves for the island at noon every Sunday.\n")
        # No --home: ./.calypso in this folder is the knowledge base, and its server takes the upload.
        ingested = run([sys.executable, "-m", "calypso.cli", "ingest", str(note)])
        assert ingested.returncode == 0, ingested.stderr
        assert f"served by http://127.0.0.1:{port}: sending the files there" in ingested.stderr
        assert "ingested  " in ingested.stdout and "(1 section, 1 passage, namespace general)" in ingested.stdout
        again = run([sys.executable, "-m", "calypso.cli", "ingest", str(note)])
        assert "duplicate" in again.stdout and again.returncode == 0
        hits = httpx.post(f"http://127.0.0.1:{port}/v1/search", json={"query": "harbour ferry island"}).json()
        assert hits["data"][0]["filename"] == "ferry.md"  # the server's own index has it
        searched = run([sys.executable, "-m", "calypso.cli", "search", "harbour ferry island"])
        assert searched.returncode == 0, searched.stderr
        assert f"served by http://127.0.0.1:{port}" in searched.stderr and "ferry.md" in searched.stdout
        asked = run([sys.executable, "-m", "calypso.cli", "ask", "When does the harbour ferry leave?"])
        assert asked.returncode == 0, asked.stderr
        assert f"via http://127.0.0.1:{port})" in asked.stdout and "noon" in asked.stdout
        assert "[1] ferry.md" in asked.stdout  # the numbered sources, as the server cites them
        settings = run([sys.executable, "-m", "calypso.cli", "settings"])
        assert "(found ./.calypso in this folder)" in settings.stdout.splitlines()[0]
        assert f"served by: http://127.0.0.1:{port}" in settings.stdout
    finally:
        server.terminate()
        server.communicate(timeout=60)
    assert not (home / "server.json").exists()  # the record goes with the server
