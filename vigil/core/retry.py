"""Retrying what failed for a passing reason (a dependency ``Unavailable``) with exponential back-off."""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from vigil.core.clock import Clock
from vigil.core.errors import Unavailable
from vigil.core.metrics import Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Backoff:
    """Retries an operation until it succeeds, the caller is cancelled, or a given number of attempts failed."""

    clock: Clock
    metrics: Metrics
    initial_s: float = 0.2
    max_s: float = 5.0

    async def retry(
        self,
        what: str,
        operation: Callable[[], Awaitable[T]],
        *,
        attempts: int | None = None,
        counting: Callable[[], bool] = lambda: True,
    ) -> T:
        """Run ``operation``, retrying transient failures with jittered exponential back-off.

        Errors that are not ``Unavailable`` propagate at once; cancellation stops the retries. With ``attempts``, the
        transient error of the last allowed attempt propagates too; a failure counts as an attempt only while
        ``counting()`` says so (a dependency known to be down uses up none, so an outage alone never exhausts them).
        """
        delay = self.initial_s
        attempt = counted = 0
        while True:
            try:
                return await operation()
            except Unavailable as exc:
                attempt += 1
                counted += counting()
                if attempts is not None and counted >= attempts:
                    raise
                self.metrics.retries.labels(exc.dependency).inc()
                if attempt == 1:
                    log.warning("%s failed, retrying: %s", what, exc)
                else:
                    log.debug("%s failed again (attempt %d): %s", what, attempt, exc)
            await self.clock.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self.max_s)
