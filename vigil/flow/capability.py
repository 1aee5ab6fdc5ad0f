"""What a capability package gives the daemon: its skills, its gates per suggestion kind, its scheduled jobs, its
HTTP routes, its readiness checks, what watches the pipeline, and what to do at start-up and shutdown.

Each capability package (``vigil.answers``, ``vigil.live``, ...) has one ``setup(...)`` in its ``__init__`` that
returns a ``Capability``. The composition root (``vigil.app.compose``) calls each ``setup`` with the parts that
capability needs: its own settings section, the ``Platform``, and the stores it reads or writes. Capabilities meet
only through those stores and the stream; none imports another.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vigil.core.clock import Clock
from vigil.core.metrics import Metrics
from vigil.core.retry import Backoff

if TYPE_CHECKING:
    from fastapi import APIRouter
    from prometheus_client import CollectorRegistry

    from vigil.flow.gates import Gate
    from vigil.flow.keeping import BatchKeeper, Keeper
    from vigil.flow.pipeline import Watcher
    from vigil.flow.scheduler import Job
    from vigil.flow.skills import Skill

Check = Callable[[], Awaitable[None]]
"""A readiness check: returns when the part is usable, raises (with a short reason) when it is not."""


@dataclass(frozen=True, slots=True)
class Platform:
    """What every capability may use: the one clock, the metrics registry, the shared retry policy."""

    clock: Clock
    registry: CollectorRegistry
    metrics: Metrics
    backoff: Backoff


@dataclass(frozen=True, slots=True)
class Step:
    """One start-up or shutdown step; ``phase`` is what ``/readyz`` says while start-up is on it."""

    phase: str
    run: Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Capability:
    """One capability's contributions. Every field is optional; a capability gives what it has."""

    name: str
    skills: Sequence[Skill] = ()
    gates: Mapping[str, Sequence[Gate]] = field(default_factory=dict)
    """Per suggestion kind, in the order they are asked; the composition root chains them."""
    jobs: Sequence[Job] = ()
    """Scheduled jobs, run by the daemon's one ``Scheduler`` on its clock."""
    routers: Sequence[APIRouter] = ()
    """FastAPI routers, mounted on the daemon's one HTTP port."""
    checks: Mapping[str, Check] = field(default_factory=dict)
    """Readiness checks, by the name ``/readyz`` reports."""
    watchers: Sequence[Watcher] = ()
    keepers: Sequence[Keeper | BatchKeeper] = ()
    """Writes kept in each event's own transaction (``vigil.flow.keeping``), in capability order."""
    starting: Sequence[Step] = ()
    """Run in order at start-up, each retried with back-off, before the consumer starts."""
    closing: Sequence[Callable[[], Awaitable[None]]] = ()
    """Run at shutdown, after the pipeline has drained; errors are logged, not raised."""
