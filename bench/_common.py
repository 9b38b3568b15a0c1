"""Helpers shared by the benchmarks: where the data is, percentiles, peak memory."""

from __future__ import annotations

import os
import resource
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    path = Path(os.environ.get("CALYPSO_EVAL_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        raise SystemExit(f"evaluation data not found at {path}; set CALYPSO_EVAL_DATA")
    return path


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def peak_rss_mb(pid: int | None = None) -> float:
    """Peak resident memory (VmHWM) of a process; this one by default."""
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")
