"""Every effect of an event happens exactly once, or is visibly in doubt and reconciled (issue 24), proven Jepsen's
way: vigil is killed with SIGKILL at each named boundary of an event's and an action's life (a failpoint,
vigil/core/faults.py, not an exception), restarted without it, the broker redelivers what was not committed, and
what the demo's systems hold is reconciled against what vigil says (tests/e2e/reconcile.py). A database error and
a connector timeout are injected at each point of an action's life too.

The conversation is the same in every test: a customer asks for £30 back on an order (``asked``) and says yes
(``yes``: the refund then waits for an analyst's approval), an approval comes through the API (``approval``), the
analyst promises an email by 5pm tomorrow (``promise``) and the case is closed (``closed``). The armed life meets
the aimed step at a visit known whatever the code before it does: an action's points are reached only once it is
approved, every event passes ``event.after_record`` once (``@n`` counts the events before), and for the others the
steps before the aimed one run on a life without faults, stopped cleanly (``Crash.arming``).

After the restart, whatever the point: the refund was made exactly once in billing, the action is ``executed``
(billing can always say: it replays a known idempotency key) and none is left ``approved`` or ``executing``
past the reconciler's interval, the promise is recorded once and cancelled with its timers by the close, every
event is stored once, and every suggestion vigil marked published is on the topic, none twice (but for the kill
between publishing and marking a suggestion published, where the same record may go out again: Kafka offers vigil
no transaction with its database here, and a consumer keeps the first of a suggestion id).

On main at 9e10e58 these fail, each for a reason issue 24 names (see ``CRASHES``); the others guard what holds.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import Topics, create_topics
from tests.e2e.crashes import Lives, Refund, SystemsProcess
from tests.e2e.harness import VigilCli
from tests.e2e.reconcile import published, reconcile
from vigil.dev.broker import EmbeddedBroker

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
SLOW = pytest.mark.slow

STEPS = ("asked", "yes", "approval", "promise", "closed")
EVENTS = {"asked": 3, "yes": 1, "approval": 1, "promise": 1, "closed": 1}
"""How many events each step sends (the approval: the feedback event the API puts on the stream)."""


@dataclass(frozen=True)
class Crash:
    """A fault (``kill``, ``db_error``, ``timeout``) at a failpoint, on the step ``at``; ``today`` says what main at
    9e10e58 does there (the issue's item, or that it holds)."""

    point: str
    what: str
    at: str
    today: str

    @property
    def id(self) -> str:
        return f"{self.point}={self.what}@{self.at}"

    def arming(self) -> tuple[int, str]:
        """The first step the armed life meets, and what it is armed with. An action's points are reached only
        once it is approved, and every event passes ``event.after_record`` once, so those lives play the steps
        before the aimed one themselves (counting visits); the others start on the aimed step."""
        at = STEPS.index(self.at)
        if self.point.startswith("action."):
            return 0, f"{self.point}={self.what}"
        if self.point == "event.after_record":
            return 0, f"{self.point}={self.what}@{sum(EVENTS[s] for s in STEPS[:at]) + 1}"
        return at, f"{self.point}={self.what}"


CRASHES = (
    Crash("event.after_record", "kill", "approval", "item 3: the approval is stored, never acted on, never paid"),
    Crash("event.after_record", "kill", "promise", "item 4: the promise is never recorded"),
    Crash("event.after_record", "kill", "closed", "item 4: the close is lost, the promise and its timers run on"),
    Crash("skill.after:progress", "kill", "yes", "item 3: the actions skill never sees the yes; nothing is paid"),
    Crash("skill.after:next_step", "kill", "yes", "item 3: the actions skill never sees the yes; nothing is paid"),
    Crash("skill.after:actions", "kill", "yes", "holds: the approval finds the action by its first card; paid once"),
    Crash("skill.after:actions", "kill", "approval", "holds: paid once, executed"),
    Crash("event.after_publish", "kill", "approval", "holds: paid once, the same card published again"),
    Crash("action.after_claim", "kill", "approval", "item 1: executing for good, never paid"),
    Crash("action.after_call", "kill", "approval", "item 1: paid, executing for good"),
    Crash("action.after_result", "kill", "approval", "holds: paid once, executed"),
    Crash("action.after_claim", "db_error", "approval", "item 2: the skill is retried, refuses not_open; executing"),
    Crash("action.after_call", "db_error", "approval", "item 2: paid, the retried skill refuses it; executing"),
    Crash("action.after_result", "db_error", "approval", "holds: paid once, executed"),
    Crash("action.after_claim", "timeout", "approval", "item 2: the skill is retried, refuses not_open; executing"),
    Crash("action.after_call", "timeout", "approval", "item 5: paid, and marked failed for good"),
    Crash("action.after_result", "timeout", "approval", "holds: paid once, executed"),
)
QUICK = {
    ("sqlite", "event.after_record=kill@approval"),
    ("postgresql", "event.after_record=kill@promise"),
    ("sqlite", "skill.after:progress=kill@yes"),
    ("postgresql", "action.after_claim=kill@approval"),
    ("sqlite", "action.after_call=kill@approval"),
    ("sqlite", "action.after_call=db_error@approval"),
    ("postgresql", "action.after_call=timeout@approval"),
}
"""What runs by default (a few minutes): every kind of fault, the issue's items 1 to 5, both databases. The rest
is marked ``slow`` (``pytest -m slow tests/e2e/test_crashes.py``)."""
CASES = [
    pytest.param(database, crash, id=f"{database}-{crash.id}", marks=[] if (database, crash.id) in QUICK else [SLOW])
    for crash in CRASHES
    for database in ("sqlite", "postgresql")
]


@pytest.fixture(scope="module")
def systems(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SystemsProcess]:
    """The demo's systems for the module, in a process of their own: they outlive every vigil the tests kill."""
    folder = tmp_path_factory.mktemp("systems")
    process = SystemsProcess(folder / "systems.sqlite", folder / "systems.log").start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def lives(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, db_url: str, systems: SystemsProcess
) -> AsyncIterator[Lives]:
    await create_topics(kafka.bootstrap, topics)
    running = Lives(vigil, bootstrap=kafka.bootstrap, topics=topics, db_url=db_url, systems=systems)
    try:
        yield running
    finally:
        running.close()


async def play(lives: Lives, refund: Refund, step: str) -> None:
    """Send the step's events; the approval goes through the API once the refund waits for it."""
    if step != "approval":
        await lives.send(getattr(refund, step)())
        return
    card = await lives.daemon.card(refund.id, "refund_order", rule="refund_needs_approval")
    response = await lives.approve(refund.id, card)
    assert response.status_code == 202, response.text


@pytest.mark.parametrize(("db_url", "crash"), CASES, indirect=["db_url"])
async def test_every_effect_happens_once_whatever_the_fault_at_each_boundary(
    lives: Lives, systems: SystemsProcess, crash: Crash
) -> None:
    refund = Refund(systems)
    at = STEPS.index(crash.at)
    first, faults = crash.arming()
    if first:
        await lives.start()
        for step in STEPS[:first]:
            await play(lives, refund, step)
        await lives.daemon.processed()
        lives.stop()

    await lives.start(faults=faults)
    for step in STEPS[first : at + 1]:
        await play(lives, refund, step)
    if crash.what == "kill":
        await lives.dies_of_sigkill(crash.point)
        await lives.start()
    for step in STEPS[at + 1 :]:
        await play(lives, refund, step)
    await lives.settled()

    suggestions = lives.suggestions()
    reconciliation = reconcile(lives.db, systems, suggestions, lives.sent)
    assert reconciliation.problems == [], f"{crash.today}: {reconciliation.as_json()}"
    assert systems.refunds(refund.order) == [refund.amount_cents]
    [action] = [a for a in lives.daemon.actions(refund.id) if a["name"] == "refund_order"]
    assert action["status"] == "executed", crash.today
    assert [step for step, *_ in lives.daemon.audit(refund.id)].count("executed") == 1
    twice = {s: n for s, n in published(suggestions).items() if n > 1}
    assert not twice or crash.point == "event.after_publish", f"published more than once: {twice}"


OUTSIDE = [
    pytest.param(database, seed, id=f"{database}-seed{seed}", marks=[] if (database, seed) == ("sqlite", 1) else [SLOW])
    for seed in (1, 2, 3, 4)
    for database in ("sqlite", "postgresql")
]


@pytest.mark.parametrize(("db_url", "seed"), OUTSIDE, indirect=["db_url"])
async def test_approvals_accepted_before_a_kill_from_outside_are_each_paid_once(
    lives: Lives, systems: SystemsProcess, seed: int
) -> None:
    """The issue's measurement from outside: 24 refunds that each need a lead, approved through the API in batches
    of six; after each batch vigil is killed with SIGKILL 0 to 1.6 s after the approvals were accepted (a seeded
    draw, so a failure replays), restarted, killed again just after it is ready, and restarted. Billing is slow to
    answer the batch (stopped from the approvals to the kill), so that the kill finds calls in flight, as it did on
    the busy machine the issue was measured on. Then no refund is paid twice, none is left approved or executing,
    and every approval the API accepted is paid.

    On main at 9e10e58 it fails as the issue measured: actions left ``approved`` or ``executing`` for good (item 1),
    and accepted approvals never paid because the redelivered feedback is a duplicate no skill sees (item 3)."""
    draw = random.Random(seed)
    refunds = [Refund(systems, amount_cents=8999, total_cents=8999) for _ in range(24)]
    await lives.start()
    await lives.send([event for refund in refunds for event in refund.asked() + refund.yes()])
    cards = [await lives.daemon.card(r.id, "refund_order", rule="large_refund_needs_lead") for r in refunds]
    for batch in range(0, len(refunds), 6):
        await lives.consuming()
        taken = zip(refunds[batch : batch + 6], cards[batch : batch + 6], strict=True)
        with systems.paused():
            answers = await asyncio.gather(*(lives.approve(refund.id, card) for refund, card in taken))
            assert [a.status_code for a in answers] == [202] * 6, [a.text for a in answers]
            await asyncio.sleep(draw.uniform(0.0, 1.6))
            lives.kill()
        await lives.start()
        lives.kill()
        await lives.start()
    await lives.settled()

    reconciliation = reconcile(lives.db, systems, lives.suggestions(), lives.sent)
    assert reconciliation.problems == [], f"seed {seed}: {reconciliation.as_json()}"
    assert {r.order: systems.refunds(r.order) for r in refunds} == {r.order: [8999] for r in refunds}
