"""A case's progress as the conversation page shows it: where it stands and since when, its SLA clocks, the promises
made to the customer, the next step of its procedure and the handover brief.

``progress_of`` reads a ``ConversationView`` (and the case's ``Brief``) for people, in the display of the case's
tenant: the state in words ("Waiting on the customer since 10:42"), each clock and open promise with its due time,
how long is left at ``now`` and whether it is in its warning window or overdue. The page is drawn from it on the
server; ``static/panel.js`` then counts each clock down every second from its ``due_at`` and ``warn_at``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from vigil.cases.handover import Brief
from vigil.cases.views import BreachView, CommitmentView, ConversationView, TimerView
from vigil.panel.display import Display

STATE_WORDS: dict[str, str] = {
    "new": "New, not answered yet",
    "waiting_on_analyst": "Waiting on the analyst",
    "waiting_on_customer": "Waiting on the customer",
    "waiting_on_internal": "Waiting on another team",
    "resolved": "Resolved",
    "closed": "Closed",
}
CLOCK_NAMES: dict[str, str] = {
    "first_response": "First response",
    "next_response": "Next response",
    "resolution": "Resolution",
    "commitment": "Promise",
}


@dataclass(frozen=True, slots=True)
class Countdown:
    """A time something falls due, and how it stands at the moment the page is drawn."""

    due_at: str
    """ISO 8601, for the browser's countdown."""
    warn_at: str | None
    due: str
    """The due time for people, in the tenant's display."""
    left: str
    """How long is left ("4m 05s"), or "overdue by 1m 03s"."""
    phase: str
    """``ok``, ``warn`` (in its warning window) or ``overdue``."""


@dataclass(frozen=True, slots=True)
class SlaClock:
    """A running SLA clock."""

    kind: str
    name: str
    countdown: Countdown


@dataclass(frozen=True, slots=True)
class Overdue:
    """A target the case passed and still owes: the clock named, or the promise quoted, and how long overdue."""

    kind: str
    name: str
    what: str | None
    """For a promise: what was promised."""
    countdown: Countdown


@dataclass(frozen=True, slots=True)
class Promise:
    """Something the analyst promised the customer; a settled one says how (kept, missed, cancelled) and when."""

    commitment_id: str
    what: str
    status: str
    """``open``, ``kept``, ``missed`` or ``cancelled``."""
    countdown: Countdown | None
    """For an open promise with a due time; None otherwise."""
    due: str | None
    """The due time for people; None when none was given."""
    settled: str | None


@dataclass(frozen=True, slots=True)
class Step:
    """The next step of the case's procedure, and the reply the procedure's cases gave at it."""

    procedure: str
    label: str
    reply: str | None


@dataclass(frozen=True, slots=True)
class CaseProgress:
    """Everything the conversation page's Progress section shows."""

    state: str
    """The state in words, with since when: "Waiting on the customer since 10:42"."""
    status: str
    breaches: list[Overdue]
    """What the case is in breach of, the longest overdue first: the top of the section."""
    clocks: list[SlaClock]
    promises: list[Promise]
    """Open promises first, soonest due first; then the settled ones, in the order they were made."""
    step: Step | None
    brief: str | None


def progress_of(view: ConversationView, brief: Brief | None, display: Display, now: datetime) -> CaseProgress:
    """``view``'s progress for people, in ``display``, as it stands at ``now``."""
    state = view.state
    words = STATE_WORDS.get(state.status, state.status.replace("_", " ").capitalize())
    warnings = {t.ref: t.warn_at for t in state.timers if t.kind == "commitment" and t.ref}
    step = None
    if view.progress is not None and view.progress.procedure and view.progress.next_step:
        p = view.progress
        step = Step(procedure=words_of(p.procedure or ""), label=words_of(p.next_step or ""), reply=p.next_reply)
    return CaseProgress(
        state=f"{words} since {moment(state.since, display, now)}",
        status=state.status,
        breaches=[overdue_of(b, view.commitments, display, now) for b in view.breaches],
        clocks=[clock_of(t, display, now) for t in state.timers if t.kind != "commitment"],
        promises=promises_of(view.commitments, warnings, display, now),
        step=step,
        brief=brief.text if brief is not None else None,
    )


def clock_of(timer: TimerView, display: Display, now: datetime) -> SlaClock:
    """A running timer as a named countdown."""
    name = CLOCK_NAMES.get(timer.kind, words_of(timer.kind))
    return SlaClock(kind=timer.kind, name=name, countdown=countdown(timer.due_at, timer.warn_at, display, now))


def overdue_of(breach: BreachView, commitments: list[CommitmentView], display: Display, now: datetime) -> Overdue:
    """A breach for people: the clock's name ("First response"), or the promise and what it said."""
    what = next((c.what for c in commitments if c.commitment_id == breach.ref), None) if breach.ref else None
    return Overdue(
        kind=breach.kind,
        name=CLOCK_NAMES.get(breach.kind, words_of(breach.kind)),
        what=what,
        countdown=countdown(breach.due_at, None, display, now),
    )


def promises_of(
    commitments: list[CommitmentView], warnings: dict[str, datetime | None], display: Display, now: datetime
) -> list[Promise]:
    """The promises, open ones first (soonest due first, those with no due time last), then the settled ones."""
    open_ = sorted((c for c in commitments if c.status == "open"), key=lambda c: (c.due_at is None, c.due_at or now))
    settled = [c for c in commitments if c.status != "open"]
    return [promise_of(c, warnings.get(c.commitment_id), display, now) for c in [*open_, *settled]]


def promise_of(c: CommitmentView, warn_at: datetime | None, display: Display, now: datetime) -> Promise:
    """A promise; an open one with a due time counts down to it (from ``warn_at``, when vigil reminds)."""
    running = c.due_at if c.status == "open" else None
    return Promise(
        commitment_id=c.commitment_id,
        what=c.what,
        status=c.status,
        countdown=countdown(running, warn_at, display, now) if running else None,
        due=moment(c.due_at, display, now) if c.due_at else None,
        settled=moment(c.settled_at, display, now) if c.settled_at else None,
    )


def countdown(due_at: datetime, warn_at: datetime | None, display: Display, now: datetime) -> Countdown:
    """How ``due_at`` stands at ``now``: the time left, and the phase (``warn`` from ``warn_at``)."""
    left = (due_at - now).total_seconds()
    phase = "overdue" if left <= 0 else "warn" if warn_at is not None and now >= warn_at else "ok"
    return Countdown(
        due_at=due_at.isoformat(),
        warn_at=warn_at.isoformat() if warn_at else None,
        due=moment(due_at, display, now),
        left=f"overdue by {duration(-left)}" if left <= 0 else f"{duration(left)} left",
        phase=phase,
    )


def duration(seconds: float) -> str:
    """A span for a countdown: ``45s``, ``4m 05s``, ``2h 05m``, ``3d 4h``; as ``static/panel.js`` writes it."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 48 * 3600:
        return f"{s // 3600}h {s // 60 % 60:02d}m"
    return f"{s // 86400}d {s // 3600 % 24}h"


def moment(t: datetime, display: Display, now: datetime) -> str:
    """A time for people: the time of day if it is today (in the display's zone), else with its day and month."""
    here, today = display.local(t), display.local(now)
    if here.date() == today.date():
        return display.clock(t)
    day = f"{here.day} {here:%b}"
    return f"{day} {here.year} {display.clock(t)}" if here.year != today.year else f"{day} {display.clock(t)}"


def words_of(name: str) -> str:
    """A machine name for people: ``ask_new_address`` -> "Ask new address"."""
    spaced = name.replace("_", " ").replace("-", " ").strip()
    return spaced[:1].upper() + spaced[1:]
