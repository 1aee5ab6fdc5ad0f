"""What grows: on SIGUSR2, the allocation sites whose memory grew most since the last time it was asked.

Resident memory that keeps rising over hours is found by asking the process, not by guessing. Started with Python's
own allocation tracing (``PYTHONTRACEMALLOC=<frames>`` in its environment: it costs memory and CPU, so it is never
on by default), a vigil process answers ``kill -USR2 <pid>`` by logging, at WARNING, the sites (file and line, with
the frames that led there) whose live allocations grew most since the previous signal, or since it started. Two
signals some time apart under load name what grew between them. Without tracing, the signal logs how to turn it on.

The report is made in a worker thread, so the event loop goes on meanwhile (slowed: the snapshot holds the
interpreter while it copies the traces); with 8 frames and a few hundred thousand live blocks it takes a minute or
two. A signal while one is being made is ignored.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import tracemalloc

log = logging.getLogger(__name__)

TOP = 15
"""How many sites a report names."""
_OWN = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>")]
"""The tracing's own allocations, and imports', left out."""


class GrowthReport:
    """Compares each snapshot of the traced allocations with the one before (the first with none: everything live)."""

    def __init__(self, top: int = TOP) -> None:
        self._top = top
        self._last: tracemalloc.Snapshot | None = None
        self._making = threading.Lock()

    def report(self) -> str:
        """The sites that grew most since the last report, one a line (most first), after a line of totals."""
        if not tracemalloc.is_tracing():
            return "allocations are not traced: start vigil with PYTHONTRACEMALLOC=8 to have SIGUSR2 say what grows"
        snapshot = tracemalloc.take_snapshot().filter_traces(_OWN)
        traced, peak = tracemalloc.get_traced_memory()
        if self._last is None:
            stats = snapshot.statistics("traceback")[: self._top]
            lines = [f"{s.size / 2**20:8.2f} MiB in {s.count} blocks at {_where(s.traceback)}" for s in stats]
        else:
            diffs = snapshot.compare_to(self._last, "traceback")[: self._top]
            lines = [
                f"{d.size_diff / 2**20:+8.2f} MiB ({d.size / 2**20:.2f} MiB now, {d.count_diff:+d} blocks) at "
                f"{_where(d.traceback)}"
                for d in diffs
            ]
        since = "since start" if self._last is None else "since the last report"
        self._last = snapshot
        head = f"traced allocations: {traced / 2**20:.1f} MiB live, {peak / 2**20:.1f} MiB at peak; the top {since}:"
        return "\n".join([head, *lines])

    def log(self) -> None:
        """Write ``report`` to the log, unless one is being made already."""
        if not self._making.acquire(blocking=False):
            return
        try:
            log.warning("%s", self.report())
        except Exception:  # in a worker thread: nobody else would hear of it
            log.exception("the memory report failed")
        finally:
            self._making.release()

    def on_signal(self) -> None:
        """The SIGUSR2 handler: ``log`` in a worker thread, the event loop going on meanwhile."""
        asyncio.get_running_loop().run_in_executor(None, self.log)


def _where(traceback: tracemalloc.Traceback) -> str:
    """The innermost frame first, then the frames that led to it."""
    frames = list(reversed(traceback))
    return " < ".join(f"{f.filename.rsplit('site-packages/', 1)[-1]}:{f.lineno}" for f in frames)
