"""Issue 41's before/after check in one run: SciFact keyword / dense / hybrid, the Alps page hits, search p50 at 200k.

    git worktree add /tmp/ref-5874cb4 5874cb4
    .venv/bin/python -m bench.redesign_check --reference /tmp/ref-5874cb4             # quality only: any load
    flock /tmp/cpu-timing.lock .venv/bin/python -m bench.redesign_check --reference /tmp/ref-5874cb4 --speed

Each tree runs its own benchmark scripts on its own ``src`` (the reference's flat ``bench/x.py``, this tree's
``python -m bench.x``) in a fresh process, alternating reference and this tree ``--rounds`` times, so that
load drifts hit both alike. Quality: ``hybrid_quality`` (SciFact nDCG@10 / Recall@100 per ranking, the Alps
page hits). Speed (``--speed``, ~2 x 6 min a round): ``scale_search`` at 200k passages on SQLite with vectors,
its ``summary:`` line. Prints one table: each figure per tree and round.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from bench.common.paths import REPO

QUALITY = ["hybrid_quality"]
SPEED = ["scale_search", "--sizes", "200000", "--backends", "sqlite", "--queries", "400", "--vectors"]
SPEED += ["--throughput-size", "0", "--no-bm25s"]
SUMMARY_FIGURES = ("hybrid_p50_ms", "http_p50_ms", "http_keyword_p50_ms")


def run(tree: Path, script: list[str]) -> str:
    """One benchmark in a fresh interpreter, importing calypso from ``tree``'s src; its output."""
    flat = not (tree / "bench" / "__init__.py").exists()  # before the package: bench/x.py scripts
    command = [sys.executable, f"bench/{script[0]}.py"] if flat else [sys.executable, "-m", f"bench.{script[0]}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree)])}
    done = subprocess.run(command + script[1:], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} in {tree} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def table_rows(output: str) -> dict[str, str]:
    """Markdown table rows by their first cell (the ranking, the Alps run), header rows left out."""
    rows = {}
    section = ""
    for line in output.splitlines():
        if line.startswith(("SciFact", "Alps")):
            section = line.split()[0]
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) > 1 and not set(cells[1]) <= set("-:") and not cells[1].startswith(("nDCG", "p50", "first")):
            rows[f"{section} {cells[0]}".strip()] = " / ".join(cells[1:])
    return rows


def summary_figures(output: str) -> dict[str, str]:
    line = next((x for x in output.splitlines() if x.startswith("summary:")), "")
    return {f"200k {name}": m.group(1) for name in SUMMARY_FIGURES if (m := re.search(rf"{name}\W+([\d.]+)", line))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="a worktree of the start commit")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--speed", action="store_true", help="also search p50 at 200k (hold the timing lock)")
    args = parser.parse_args()
    trees = {"before": args.reference.resolve(), "after": REPO}
    figures: dict[str, dict[str, list[str]]] = {}
    for round_ in range(args.rounds):
        for label, tree in trees.items() if round_ % 2 == 0 else reversed(trees.items()):
            found = table_rows(run(tree, QUALITY))
            if args.speed:
                found |= summary_figures(run(tree, SPEED))
            for name, value in found.items():
                figures.setdefault(name, {}).setdefault(label, []).append(value)
            print(f"round {round_ + 1}: {label} done", file=sys.stderr, flush=True)
    print("| figure | before (5874cb4) | after (this tree) |\n|---|---|---|")
    for name, by_tree in figures.items():
        print(f"| {name} | {'; '.join(by_tree.get('before', []))} | {'; '.join(by_tree.get('after', []))} |")


if __name__ == "__main__":
    main()
