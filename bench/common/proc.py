"""What /proc says of a process and of the machine, for the benchmarks that run servers: memory, CPU, mappings."""

from __future__ import annotations

import os
import resource
from pathlib import Path


def _kb_field_mb(path: str, field: str) -> float:
    """A ``Field:   N kB`` line of a /proc file, in MB; NaN when the file has no such line."""
    with open(path) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def mem_available_mb() -> float:
    return _kb_field_mb("/proc/meminfo", "MemAvailable")


def proc_status_mb(pid: int, field: str) -> float:
    return _kb_field_mb(f"/proc/{pid}/status", field)


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy (not idle or waiting on I/O), every core together."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def largest_mappings(pid: int, top: int = 12) -> list[tuple[str, float, float]]:
    """(mapping, Rss MB, Anonymous MB) of the process's largest mappings by resident size, by file (anonymous
    mappings by their address range's neighbour-free name: [heap], [anon])."""
    totals: dict[str, list[float]] = {}
    name = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and len(fields[0]) > 8 and not fields[0].endswith(":"):
            name = fields[5] if len(fields) > 5 else "[anon]"
        elif fields and fields[0] in ("Rss:", "Anonymous:"):
            entry = totals.setdefault(name, [0.0, 0.0])
            entry[0 if fields[0] == "Rss:" else 1] += int(fields[1]) / 1024
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:top]
    return [(Path(n).name if n.startswith("/") else n, rss, anon) for n, (rss, anon) in ranked]


def peak_rss_mb(pid: int | None = None) -> float:
    """Peak resident memory (VmHWM) of a process; this one by default."""
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
