"""Readiness: periodic checks of the broker and the database, read by ``/readyz`` and the metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from vigil.core.clock import Clock
from vigil.core.errors import VigilError
from vigil.core.metrics import Metrics

log = logging.getLogger(__name__)

Check = Callable[[], Awaitable[None]]


class Health:
    """Runs each named check every ``interval_s``; ready while every check last passed."""

    def __init__(self, checks: dict[str, Check], *, clock: Clock, metrics: Metrics, interval_s: float) -> None:
        self._checks = checks
        self._clock = clock
        self._metrics = metrics
        self._interval_s = interval_s
        self.problems: dict[str, str] = {name: "not checked yet" for name in checks}
        # Dependencies whose outage was logged: only these are "reachable again" (not one still starting up).
        self._outages: set[str] = set()

    @property
    def ready(self) -> bool:
        """Whether every dependency answered its last check."""
        return not self.problems

    async def check_once(self) -> None:
        """Run every check now, concurrently."""
        results = await asyncio.gather(*(self._run(name, check) for name, check in self._checks.items()))
        for name, problem in zip(self._checks, results, strict=True):
            was = self.problems.get(name)
            if problem is None:
                self.problems.pop(name, None)
                if name in self._outages:
                    self._outages.discard(name)
                    log.info("%s is reachable again", name)
            else:
                if was is None:  # it answered its last check: an outage begins
                    self._outages.add(name)
                    log.warning("%s is not reachable: %s", name, problem)
                self.problems[name] = problem
            self._metrics.ready.labels(name).set(0 if problem else 1)

    async def _run(self, name: str, check: Check) -> str | None:
        try:
            await check()
        except VigilError as exc:
            return str(exc)
        return None

    async def run_forever(self) -> None:
        """Check on the interval until cancelled."""
        while True:
            await self.check_once()
            await self._clock.sleep(self._interval_s)
