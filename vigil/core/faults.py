"""Failpoints: named places in an event's and an action's life where a test can stop vigil for real.

Jepsen-style tests prove that every effect happens exactly once (or is visibly in doubt and reconciled) by killing
the process at each boundary, restarting it and letting the broker redeliver. They name the boundary, and what to do
there, in ``VIGIL_FAULTS`` (read once, at import), as comma-separated ``point=what`` or ``point=what@n``:

- ``kill``: ``SIGKILL`` this process, no clean-up, no flush (the way a node dies);
- ``db_error``: raise ``StoreUnavailable`` (a transient database error, as a dropped connection gives);
- ``timeout``: raise ``ConnectorTimeout`` (the system did not answer; the write may have been done);
- ``stall:S``: freeze the whole process for ``S`` seconds (the event loop blocked, no heartbeat sent), as a long
  pause or a frozen VM does, then go on where it stood: the consumer group moves on without it meanwhile;
- ``@n``: act on the ``n``-th time the point is reached (1 by default), and only then.

For example ``VIGIL_FAULTS=action.after_call=kill`` kills vigil right after billing answered a refund and before
the result is written. With nothing configured (production), ``fault(point)`` is one dictionary lookup.

The points, in the order an event meets them (grep for ``fault("`` to find each):

- ``event.after_record``: the event and what the keepers wrote with it are committed; no skill has run;
- ``skill.after:<name>``: the skill ``<name>`` has proposed (its own writes are done);
- ``event.after_publish``: the event's suggestions are on every sink, not yet marked published;
- ``event.after_finish``: the skills have finished with the event and its ``finished`` mark is queued for the store's
  next batch (not yet committed: a crash here shows the event to the skills once more, which must change nothing);
- ``action.after_approve``: an approval is committed with its feedback event; the action skill is about to run it;
- ``action.after_guard``: a proposed action's guard has read the customer's actions, under the customer's lock, and
  the action is not yet stored (the transaction is open);
- ``action.after_recheck``: an approved action's guard was checked again under the customer's lock, in the open
  transaction that claims it (or blocks it);
- ``action.after_claim``: an action is claimed for execution (``executing``), its system not yet called;
- ``action.after_call``: the system answered the call, the result is not yet written;
- ``action.after_result``: the action's result (``executed``, ``failed``, ``in_doubt``) is committed;
- ``reconcile.after_call``: the reconciler's re-sent call was answered, the result is not yet written.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from dataclasses import dataclass

from vigil.core.errors import ConnectorTimeout, SettingsError, StoreUnavailable

ENV = "VIGIL_FAULTS"
WHATS = ("kill", "db_error", "timeout", "stall")


@dataclass(frozen=True, slots=True)
class Fault:
    """What to do at a point, and on which visit (and for ``stall``, for how long)."""

    what: str
    nth: int = 1
    seconds: float = 0.0


def parse(spec: str) -> dict[str, Fault]:
    """``point=what[@n],...`` as faults by point.

    Raises:
        SettingsError: a part is not of that form, or names an unknown ``what``.
    """
    faults: dict[str, Fault] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        point, sep, action = part.rpartition("=")
        what, _, nth = action.partition("@")
        what, colon, seconds = what.partition(":")
        stall = what == "stall" and colon and _positive(seconds)
        if (
            not sep
            or not point
            or what not in WHATS
            or (what == "stall") != bool(stall)
            or (colon and what != "stall")
            or (nth and not nth.isdigit())
            or nth == "0"
        ):
            raise SettingsError(ENV, f"{part!r} is not point=kill|db_error|timeout|stall:SECONDS[@n]")
        faults[point] = Fault(what, int(nth) if nth else 1, float(seconds) if stall else 0.0)
    return faults


def _positive(number: str) -> bool:
    try:
        return float(number) > 0
    except ValueError:
        return False


class InjectedTimeout(ConnectorTimeout):
    """The connector timeout a failpoint injects."""


class InjectedDatabaseError(StoreUnavailable):
    """The database error a failpoint injects."""


_faults: dict[str, Fault] = parse(os.environ.get(ENV, ""))
_visits: Counter[str] = Counter()


def configure(spec: str) -> None:
    """Arm the faults of ``spec`` (the form of ``VIGIL_FAULTS``) in place of those armed; visits start over."""
    armed = parse(spec)
    _faults.clear()
    _faults.update(armed)
    _visits.clear()


def fault(point: str) -> None:
    """Do what ``VIGIL_FAULTS`` says to do at ``point`` on this visit, if anything.

    Raises:
        InjectedDatabaseError: ``db_error`` was asked for here.
        InjectedTimeout: ``timeout`` was asked for here.
    """
    if not _faults:
        return
    armed = _faults.get(point)
    if armed is None:
        return
    _visits[point] += 1
    if _visits[point] != armed.nth:
        return
    if armed.what == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if armed.what == "stall":
        time.sleep(armed.seconds)  # blocking on purpose: nothing of this process runs meanwhile
        return
    if armed.what == "db_error":
        raise InjectedDatabaseError(f"injected at {point}")
    raise InjectedTimeout("failpoint", f"injected at {point}")
