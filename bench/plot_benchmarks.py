"""Draw the plots of docs/benchmarks.md from the figures its history pages record.

    .venv/bin/python -m bench.plot_benchmarks [--out docs/benchmarks]

Writes ``ndcg.png`` (nDCG@10 per language and per run: keyword, dense, hybrid) and
``latency.png`` (search p50 against corpus size). The raw outputs under ``bench/out/`` are not
committed, so the figures are copied here from the pages that describe each run; a new
measurement goes into its page first, then into the table below. Needs matplotlib
(``pip install 'calypso[bench]'``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Patch

ROOT = Path(__file__).resolve().parent.parent

# nDCG@10 through the service, SQLite, the default model (MiniLM int8). The English figures are the idle
# run of docs/benchmarks/hybrid.md, "Issue 12 headline figures"; Chinese and German are
# docs/benchmarks/retrieval.md, "Languages (issue 22)" (hybrid there: with MiniLM trusted for the language,
# which the server does not do, so its default search for both is keyword).
NDCG = {
    "SciFact test (en)": {"keyword": 0.6836, "dense": 0.6233, "hybrid": 0.7277, "default": "hybrid"},
    "CMRC 2018 (zh)": {"keyword": 0.9787, "dense": 0.2883, "hybrid": 0.9746, "default": "keyword"},
    "XQuAD (de)": {"keyword": 0.9412, "dense": 0.6449, "hybrid": 0.9293, "default": "keyword"},
}

# Search p50 in ms against passages. (passages, ms) per series, with the section each point comes from.
LATENCY = {
    # docs/benchmarks/search-speed.md, "Search at scale, both backends (issue 11)": SQLite rows, shared machine
    "keyword, in process": [(20_000, 0.35), (200_000, 0.69), (1_000_000, 2.62)],
    "keyword, HTTP": [(20_000, 1.63), (200_000, 2.19), (1_000_000, 3.99)],
    "bm25s (reference)": [(20_000, 0.25), (200_000, 0.80), (1_000_000, 4.03)],
    # docs/benchmarks/hybrid.md, idle machine, query embedded by the model: 5,183 and 200k (graph) from
    # "Issue 12 headline figures"; 20k from "Both backends, idle machine" (below 50,000 vectors no graph
    # is built, so the server's default search is exact there)
    "hybrid, server default, in process": [(5_183, 7.12), (20_000, 10.6), (200_000, 11.98)],
    "hybrid, server default, HTTP": [(20_000, 13.6), (200_000, 12.97)],
    # exact vector search at 200k: "Issue 12 headline figures" (ann_min_vectors=0, same run)
    "hybrid, exact vectors, in process": [(20_000, 10.6), (200_000, 23.08)],
}

RUN_COLOURS = {"keyword": "#4477aa", "dense": "#ee6677", "hybrid": "#228833"}


def plot_ndcg(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.6), dpi=110)
    width = 0.26
    for g, runs in enumerate(NDCG.values()):
        for r, run in enumerate(("keyword", "dense", "hybrid")):
            x = g + (r - 1) * width
            value = runs[run]
            default = runs["default"] == run
            ax.bar(
                x,
                value,
                width * 0.92,
                color=RUN_COLOURS[run],
                edgecolor="black" if default else "none",
                linewidth=1.6,
            )
            ax.text(x, value + 0.012, f"{value:.3f}", ha="center", va="bottom", fontsize=8.5)
    ax.set_xticks(range(len(NDCG)), list(NDCG))
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("nDCG@10")
    ax.set_title("Retrieval quality per language and run (outlined: what the server searches with)", fontsize=10)
    handles = [Patch(color=colour, label=run) for run, colour in RUN_COLOURS.items()]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=3, fontsize=9, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_latency(path: Path) -> None:
    fig, ax = plt.subplots(figsize=(8, 5.2), dpi=110)
    styles = {
        "keyword, in process": ("#4477aa", "-", "o"),
        "keyword, HTTP": ("#4477aa", "--", "s"),
        "bm25s (reference)": ("#999999", ":", "^"),
        "hybrid, server default, in process": ("#228833", "-", "o"),
        "hybrid, server default, HTTP": ("#228833", "--", "s"),
        "hybrid, exact vectors, in process": ("#ccbb44", "-.", "D"),
    }
    for name, points in LATENCY.items():
        colour, line, marker = styles[name]
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, line, color=colour, marker=marker, label=name, linewidth=1.8, markersize=5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([5_000, 20_000, 200_000, 1_000_000], ["5k", "20k", "200k", "1M"])
    ax.set_yticks([0.25, 0.5, 1, 2, 5, 10, 20], ["0.25", "0.5", "1", "2", "5", "10", "20"])
    ax.set_xlabel("passages in the knowledge base (SQLite)")
    ax.set_ylabel("search p50, ms")
    ax.set_title("Search latency against corpus size (2 cores; keyword: shared machine, hybrid: idle)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=3, fontsize=8.5, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name, draw in (("ndcg.png", plot_ndcg), ("latency.png", plot_latency)):
        draw(args.out / name)
        print(args.out / name)


if __name__ == "__main__":
    main()
