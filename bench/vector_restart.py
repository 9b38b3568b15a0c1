"""A server restarted on a saved index snapshot at 200k passages (issue 30, goals 2 and 3): seconds until a
hybrid search is served through the graph, and the server's memory split into anonymous and file-backed.

    .venv/bin/python -m bench.vector_restart [--size 200000] [--queries 400] [--no-reference]

1. The synthetic passages of ``bench/search_speed.py`` (same seed) go into a fresh SQLite store as
   ``bench/scale_search.py`` writes them (documents of 20). Every passage gets a structured vector
   (``bench/ann_recall.py``'s recipe: 0.75 x one real SciFact abstract vector + 0.25 x another + noise,
   over the first ``--base`` abstracts embedded by the default model), written through
   ``storage.embeddings`` as an embedding worker writes them.
2. First ``calypso serve``: no snapshot yet, so it builds the BM25 index, loads the vectors from the
   store, builds the graph in the background and saves the snapshot once the graph is built; then it
   is stopped (SIGTERM).
3. Restarted ``calypso serve`` on that snapshot, timed from spawn: /health answering, then the first
   hybrid ``POST /v1/search`` (the model loads on it) and how long that request took; its log must
   say the vectors were restored with a graph before that answer (so it was served through the
   graph). Then every claim once over one keep-alive connection (hybrid, the server defaults, query
   embeddings not cached: the cache file is removed before each server starts): p50/p99. Then the
   server's VmRSS, RssAnon, RssFile and VmHWM (/proc/<pid>/status). RssFile is mostly the mapped
   snapshot (BM25 postings, vector rows, graph): page cache the kernel can reclaim; RssAnon is not.
4. Reference (unless ``--no-reference``): the same restart with the snapshot's ``vectors/`` removed,
   which is the path before snapshots: vectors scanned from the store, graph rebuilt after start
   (searches exact meanwhile); "graph ready s" from spawn to the server's "vector graph:" log line.
5. In this process: the restored index's recall@10 through the graph against exact search over its own
   rows, for the claims' real vectors.

Prints, as its last line, ``summary: restart_first_answer_s=… first_request_s=… graph_served=… rss_mb=…
rss_anon_mb=… rss_file_mb=… hybrid_http_p50_ms=… …`` and writes the raw figures to bench/out/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from bench.common import beir as be
from bench.common.paths import REPO
from bench.common.proc import loadavg, mem_available_mb
from bench.common.served import NAMESPACE, drop_embedding_cache, load
from bench.common.stats import percentile
from bench.common.synthetic import SEED, synthetic_passages
from bench.common.vectors import scifact_base_vectors as base_vectors
from bench.common.vectors import structured
from calypso.config import Settings
from calypso.embeddings.local_onnx import DIMENSION, MODEL_NAME
from calypso.retrieval import vector_snapshot
from calypso.services import open_embedding_model, open_storage
from calypso.services.snapshot_directory import SnapshotDirectory

FIELDS = ("VmRSS", "RssAnon", "RssFile", "VmHWM")


def status_mb(pid: int) -> dict[str, float]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name = line.split(":")[0]
            if name in FIELDS:
                out[name] = int(line.split()[1]) / 1024
    return out


def claim_vectors(claims: list[str]) -> np.ndarray:
    embedder = open_embedding_model(Settings(embedding_model=MODEL_NAME))
    assert embedder is not None
    return np.asarray(embedder.embed(claims), dtype=np.float32)


def write_structured_vectors(settings: Settings, base: np.ndarray, size: int) -> float:
    """A structured vector for every passage, through ``storage.embeddings`` as an embedding worker writes them."""
    storage = open_storage(settings)
    embeddings, owner = storage.embeddings, "bench-vector-restart"
    pool = structured(base, size, seed=SEED)
    used = 0
    t0 = time.perf_counter()
    try:
        embeddings.reset(MODEL_NAME)
        while (job := embeddings.claim(owner, 3600, MODEL_NAME)) is not None:
            missing = embeddings.missing_chunks(job.document_key, MODEL_NAME)
            rows = pool[np.arange(used, used + len(missing)) % len(pool)]
            used += len(missing)
            if not embeddings.store_vectors(job, owner, [key for key, _ in missing], rows):
                raise SystemExit(f"lost the embedding job of document {job.document_key}")
            embeddings.finish(job.document_key, owner)
    finally:
        storage.close()
    print(f"  {used:,} structured vectors stored in {time.perf_counter() - t0:.1f} s", flush=True)
    return time.perf_counter() - t0


class Served:
    """``calypso serve`` on the data directory, its INFO log read by a thread with the time of each line."""

    def __init__(self, settings: Settings, port: int) -> None:
        env = {
            **os.environ,
            "CALYPSO_HOME": str(settings.home),
            "CALYPSO_EMBEDDING_MODEL": MODEL_NAME,
            "CALYPSO_LOG_LEVEL": "info",
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
        }
        self.url = f"http://127.0.0.1:{port}"
        self.lines: list[tuple[float, str]] = []
        self.t0 = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "calypso.cli", "serve", "--port", str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self.lines.append((time.perf_counter() - self.t0, raw.decode(errors="replace").rstrip()))

    def logged(self, text: str) -> float | None:
        """Seconds from spawn to the first log line holding ``text``."""
        return next((t for t, line in list(self.lines) if text in line), None)

    def wait_logged(self, text: str, timeout: float, after: float = 0.0) -> float:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            found = next((t for t, line in list(self.lines) if text in line and t >= after), None)
            if found is not None:
                return found
            if self.process.poll() is not None:
                raise SystemExit("calypso serve exited:\n" + "\n".join(line for _, line in self.lines[-30:]))
            time.sleep(0.1)
        raise SystemExit(f"calypso serve never logged {text!r}:\n" + "\n".join(line for _, line in self.lines[-30:]))

    def first_answer(self, query: str) -> tuple[float, float, float]:
        """(spawn -> /health answers, spawn -> first search answered, that request's own seconds)."""
        while True:
            if self.process.poll() is not None:
                raise SystemExit("calypso serve exited:\n" + "\n".join(line for _, line in self.lines[-30:]))
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        health = time.perf_counter() - self.t0
        sent = time.perf_counter()
        httpx.post(self.url + "/v1/search", json={"query": query}, timeout=600).raise_for_status()
        done = time.perf_counter()
        return health, done - self.t0, done - sent

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def measure_restart(settings: Settings, claims: list[str], port: int, label: str, wait_graph: bool = False) -> dict:
    """One restart: first answer, the claims over HTTP, memory; ``wait_graph``: then also wait for a graph built
    after start and take the memory again."""
    drop_embedding_cache(settings)
    server = Served(settings, port)
    try:
        health_s, first_s, request_s = server.first_answer(claims[0])
        restored = server.logged("restored (")
        restored_line = next((line for _, line in server.lines if "restored (" in line), "")
        graph_served = restored is not None and restored <= first_s and "graph of 0 rows" not in restored_line
        times = []
        with httpx.Client(base_url=server.url, timeout=120) as client:
            for q in claims[1:]:
                t = time.perf_counter()
                client.post("/v1/search", json={"query": q, "max_num_results": 10}).raise_for_status()
                times.append((time.perf_counter() - t) * 1000)
        memory = status_mb(server.process.pid)
        if wait_graph:
            server.wait_logged("vector graph:", 3600)
            memory_graph = {f"{k}_mb_graph_built": v for k, v in status_mb(server.process.pid).items()}
        graph_ready = server.logged("vector graph:")  # a graph built after start (none when restored)
    finally:
        server.stop()
    out = {
        "health_s": health_s,
        "first_answer_s": first_s,
        "first_request_s": request_s,
        "restored_log_s": restored,
        "restored_line": restored_line.split("calypso.index", 1)[-1].strip(" :"),
        "graph_served_first": graph_served,
        "graph_built_s": graph_ready,
        "http_p50_ms": percentile(times, 50),
        "http_p99_ms": percentile(times, 99),
        "queries": len(times),
        **{f"{k}_mb": v for k, v in memory.items()},
        **(memory_graph if wait_graph else {}),
        "load_average": loadavg(),
    }
    print(
        f"  [{label}] /health {health_s:.2f} s, first hybrid answer {first_s:.2f} s after spawn ({request_s:.2f} s "
        f"request); restored: {out['restored_line'] or 'no'}; graph built after start: "
        f"{f'{graph_ready:.1f} s' if graph_ready else 'no'}; hybrid http p50 {out['http_p50_ms']:.2f} ms p99 "
        f"{out['http_p99_ms']:.2f} ms ({len(times)} claims); VmRSS {memory['VmRSS']:.0f} MB = RssAnon "
        f"{memory['RssAnon']:.0f} + RssFile {memory['RssFile']:.0f} (peak {memory['VmHWM']:.0f}); load average "
        f"{out['load_average']}",
        flush=True,
    )
    if wait_graph:
        print(
            f"  [{label}] once the graph was built: VmRSS {memory_graph['VmRSS_mb_graph_built']:.0f} MB = RssAnon "
            f"{memory_graph['RssAnon_mb_graph_built']:.0f} + RssFile {memory_graph['RssFile_mb_graph_built']:.0f}",
            flush=True,
        )
    return out


def graph_recall(settings: Settings, claims: np.ndarray) -> dict:
    """The restored index's top 10 through the graph against exact search over its own rows."""
    directory = SnapshotDirectory(settings.home / "index", ("default", NAMESPACE)).current()
    assert directory is not None
    index, _ = vector_snapshot.load(directory, MODEL_NAME, DIMENSION, ann_min_vectors=settings.ann_min_vectors)
    recall, times = [], []
    for q in claims:
        t = time.perf_counter()
        found = index.search(q, 10)
        times.append((time.perf_counter() - t) * 1000)
        scores, keys = index.exact_scores(q)
        exact = set(keys[np.argpartition(-scores, 9)[:10]].tolist())
        recall.append(len({c for c, _ in found} & exact) / 10)
    index.close()
    return {"recall_at_10": float(np.mean(recall)), "graph_search_p50_ms": percentile(times, 50)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=200_000, help="passages")
    ap.add_argument("--queries", type=int, default=400, help="SciFact claims searched over HTTP")
    ap.add_argument("--base", type=int, default=1000, help="SciFact abstracts whose vectors the structured ones mix")
    ap.add_argument("--per-doc", type=int, default=20)
    ap.add_argument("--port", type=int, default=8795)
    ap.add_argument("--no-reference", action="store_true", help="skip the restart without the vector snapshot")
    args = ap.parse_args()
    claims = list(be.load_queries(be.scifact_dir()).values())[: args.queries + 1]
    print(f"{os.cpu_count()} CPUs, {mem_available_mb() / 1024:.1f} GB available, load average {loadavg()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="calypso-vector-restart-"))
    rows: dict = {"args": vars(args)}
    try:
        settings = Settings(home=work / "home", embedding_model=MODEL_NAME)
        t = time.perf_counter()
        base = base_vectors(args.base)
        print(f"{len(base):,} SciFact abstracts embedded in {time.perf_counter() - t:.1f} s", flush=True)
        passages = synthetic_passages(args.size)
        loaded = load(settings.model_copy(update={"embedding_model": "none"}), passages, args.per_doc, 3600, "load")
        del passages
        print(f"  {loaded['passages']:,} passages loaded in {loaded['load_s']:.0f} s", flush=True)
        rows["vectors_write_s"] = write_structured_vectors(settings, base, loaded["passages"])

        first = Served(settings, args.port)  # no snapshot: builds, then saves once the graph is built
        try:
            first.first_answer(claims[0])
            built = first.wait_logged("vector graph:", 3600)
            saved = first.wait_logged("saved at change", 600, after=built)
            print(f"  [first start] graph built {built:.1f} s after spawn, snapshot saved at {saved:.1f} s", flush=True)
            rows["first_start"] = {"graph_built_s": built, "saved_s": saved, **status_mb(first.process.pid)}
        finally:
            first.stop()
        current = SnapshotDirectory(settings.home / "index", ("default", NAMESPACE)).current()
        assert current is not None
        manifest = vector_snapshot.manifest(current)
        assert manifest is not None, "the snapshot holds no vectors"
        sizes = {p.name: p.stat().st_size / 2**20 for p in (current / "vectors").iterdir()}
        print(
            f"  snapshot {current.name}: {manifest['rows']:,} rows, graph of {manifest['graph_rows']:,}; files MB "
            + ", ".join(f"{n} {s:.0f}" for n, s in sorted(sizes.items()) if s >= 1),
            flush=True,
        )
        rows["snapshot_files_mb"] = sizes

        rows["restart"] = measure_restart(settings, claims, args.port, "restart on the snapshot")
        rows["restart_again"] = measure_restart(settings, claims, args.port, "restart again")
        rows["recall"] = graph_recall(settings, claim_vectors(claims[1:]))
        print(
            f"  restored graph: recall@10 {rows['recall']['recall_at_10']:.4f} against exact, vector search p50 "
            f"{rows['recall']['graph_search_p50_ms']:.2f} ms (in process)",
            flush=True,
        )
        if not args.no_reference:
            current = SnapshotDirectory(settings.home / "index", ("default", NAMESPACE)).current()
            assert current is not None
            shutil.rmtree(current / "vectors")  # the path before vector snapshots
            rows["reference"] = measure_restart(settings, claims, args.port, "reference: no vector snapshot", True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"vector_restart-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(rows, indent=1))
    print(f"raw figures: {path.relative_to(REPO)}")
    r = rows["restart_again"]
    print(
        f"summary: restart_first_answer_s={r['first_answer_s']:.2f} first_request_s={r['first_request_s']:.2f} "
        f"graph_served={r['graph_served_first']} rss_mb={r['VmRSS_mb']:.0f} rss_anon_mb={r['RssAnon_mb']:.0f} "
        f"rss_file_mb={r['RssFile_mb']:.0f} hybrid_http_p50_ms={r['http_p50_ms']:.2f} "
        f"hybrid_http_p99_ms={r['http_p99_ms']:.2f} recall_at_10={rows['recall']['recall_at_10']:.4f} "
        f"load_average={r['load_average'].replace(' ', '/')}"
    )


if __name__ == "__main__":
    main()
