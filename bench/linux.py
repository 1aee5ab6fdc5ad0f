"""What Linux says about a process (peak memory, CPU time) and about the machine (how busy its cores are)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def peak_rss_bytes(pid: int | str) -> int:
    """The process's peak resident set size (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no VmHWM for process {pid}")


def rss_bytes(pid: int | str) -> int:
    """The process's resident set size now (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int | str) -> float:
    """CPU time the process has used so far, user and system, all threads."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15 of proc(5))


@dataclass(frozen=True, slots=True)
class MachineTimes:
    """The machine's cumulative CPU time, busy and total, over all cores, in seconds."""

    busy_s: float
    total_s: float

    @classmethod
    def now(cls) -> MachineTimes:
        ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        idle = ticks[3] + ticks[4]  # idle, iowait
        total = sum(ticks[:8])  # guest time is already counted in user
        return cls((total - idle) / _TICKS, total / _TICKS)

    def busy_cores_since(self, earlier: MachineTimes) -> float:
        """How many cores were busy on average between ``earlier`` and this reading."""
        total = self.total_s - earlier.total_s
        return (self.busy_s - earlier.busy_s) / total * (os.cpu_count() or 1) if total else 0.0
