"""The soak: the demo's traffic for N minutes with faults at random, then a reconciliation report (issue 24).

vigil runs as ``vigil run`` against its own Tansu broker, a fresh SQLite or PostgreSQL database and the demo's
systems in a process of their own, with every capability on but answers (``--answers`` turns it on). The traffic:
the bundled demo conversations re-stamped under fresh ids, a few starting every minute, their messages a few
seconds apart; and refund conversations of customers made for the run, each approved through the API as soon as
its card asks for it, then a promise from the analyst and the close. The faults, drawn from a seeded generator:

- **kill**: SIGKILL from outside at a random moment (every ``--kill-every-s`` on average) and an immediate
  restart, half of them armed with a failpoint at a random boundary and visit (vigil/core/faults.py), so that it
  also dies exactly between a call and its result, or a record and its skills;
- **database**: vigil's connections terminated (PostgreSQL: ``pg_terminate_backend`` of its database's
  backends, never the server's other users) or, on SQLite, the file's write lock held for a few seconds;
- **systems**: the demo's systems stopped (SIGSTOP) for longer than vigil's connector timeout, so calls time out,
  some after the write was done.

Then the faults stop, the traffic is all in, vigil gets ``--settle-s`` to finish, and what the systems hold is
reconciled against what vigil says (tests/e2e/reconcile.py): events, promises, actions and billing rows must
agree, and nothing may be lost, doubled or stuck. The report is printed as JSON (and saved under bench/results).

Memory over hours (issue 29): ``--no-faults --answers --minutes 60`` runs the same traffic in one process that is
never killed, with the miner every ``--miner-every-s`` and procedures every ``--procedures-every-s``, and samples
vigil's resident memory every ``--sample-s`` (``memory`` in the report: minute, MiB). Whether it levels off is read
from the samples: the report gives the median of the first and of the last quarter of the hour after the first ten
minutes, and the slope of a line through the samples after the first ten minutes (MiB an hour).

Run: ``python -m bench.soak --minutes 10`` (``--database postgresql``, ``--seed``, ``--workdir`` to keep logs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import sqlalchemy as sa

from bench import databases, report, traffic
from bench.linux import rss_bytes
from tests.conftest import create_topics, new_topics
from tests.e2e.crashes import Lives, Refund, SystemsProcess
from tests.e2e.harness import VigilCli, eventually
from tests.e2e.reconcile import reconcile, stuck_actions
from vigil.dev.broker import EmbeddedBroker

POINTS = (
    "event.after_record",
    "skill.after:progress",
    "skill.after:next_step",
    "skill.after:actions",
    "event.after_publish",
    "action.after_claim",
    "action.after_call",
    "action.after_result",
)
CONNECTOR_TIMEOUT_S = 2.0


class Soak:
    """One run: the traffic, the faults, and what was sent and done, for the report."""

    def __init__(self, lives: Lives, systems: SystemsProcess, *, args: argparse.Namespace) -> None:
        self.lives, self.systems, self.args = lives, systems, args
        # One generator for each stream of draws, so that the faults' schedule does not shift with the traffic's.
        self.draw = random.Random(f"{args.seed}/traffic")
        self.chaos_draw = random.Random(f"{args.seed}/faults")
        self.faults: Counter[str] = Counter()
        self.approvals: Counter[str] = Counter()
        self.armed: str | None = None
        self.samples: list[tuple[float, int, float]] = []  # (minute, pid, MiB)
        self.ending = False
        self._restarting = asyncio.Lock()

    # The traffic.

    async def demo_traffic(self, until: float) -> None:
        """The demo's conversations under fresh ids, ``--conversations-per-min`` starting a minute."""
        templates = traffic.load_templates()
        playing: list[asyncio.Task[None]] = []
        number = 0
        while time.monotonic() < until:
            template = self.draw.choice(templates)
            playing.append(asyncio.create_task(self._converse(template, f"soak-{number:05d}", until)))
            number += 1
            await asyncio.sleep(self.draw.expovariate(self.args.conversations_per_min / 60))
        await asyncio.gather(*playing)

    async def _converse(self, template: list[dict[str, Any]], conversation_id: str, until: float) -> None:
        for index, original in enumerate(template):
            event = dict(original) | {"conversation_id": conversation_id}
            event[{"message": "message_id", "case": "event_id"}[event["type"]]] = f"{conversation_id}-{index:03d}"
            event[{"message": "sent_at", "case": "at"}[event["type"]]] = _now()
            await self.lives.send([event])
            if time.monotonic() > until:
                return  # the conversation is cut short, as one is when the traffic stops
            await asyncio.sleep(self.draw.expovariate(1 / self.args.reply_every_s))

    async def refunds(self, until: float) -> None:
        """Refund conversations, each approved through the API once its card waits for it."""
        playing: list[asyncio.Task[None]] = []
        while time.monotonic() < until:
            playing.append(asyncio.create_task(self._refund()))
            await asyncio.sleep(self.draw.expovariate(self.args.refunds_per_min / 60))
        await asyncio.gather(*playing)

    async def _refund(self) -> None:
        refund = Refund(self.systems)
        await self.lives.send(refund.asked() + refund.yes())
        card = await self._waiting_card(refund)
        if card is None:
            self.approvals["never_asked"] += 1
        else:
            await self._approve(refund, card)
        await asyncio.sleep(self.args.reply_every_s)
        await self.lives.send(refund.promise())
        await asyncio.sleep(self.args.reply_every_s)
        await self.lives.send(refund.closed())

    async def _waiting_card(self, refund: Refund, timeout_s: float = 120.0) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = [
                a
                for a in self.lives.daemon.actions(refund.id)
                if a["name"] == "refund_order" and a["rule"] == "refund_needs_approval" and a["status"] == "suggested"
            ]
            if found:
                return found[-1]
            await asyncio.sleep(0.5)
        return None

    async def _approve(self, refund: Refund, card: dict[str, Any]) -> None:
        """Approve through whichever life is up; a vigil that is down is asked again a moment later."""
        for _ in range(120):
            try:
                response = await self.lives.approve(refund.id, card)
            except httpx.HTTPError:
                await asyncio.sleep(1.0)
                continue
            self.approvals["accepted" if response.status_code == 202 else f"refused_{response.status_code}"] += 1
            return
        self.approvals["gave_up"] += 1

    # The faults.

    async def memory(self, until: float) -> None:
        """vigil's resident memory every ``--sample-s`` until ``until`` (the process of the moment: a kill starts
        another)."""
        began = time.monotonic()
        while time.monotonic() < until:
            with contextlib.suppress(OSError, LookupError):
                pid = self.lives.process.popen.pid
                self.samples.append((round((time.monotonic() - began) / 60, 2), pid, rss_bytes(pid) / 2**20))
            await asyncio.sleep(self.args.sample_s)

    async def chaos(self, until: float) -> None:
        """Faults at random until ``until``: kills, database faults, systems stopped (none with ``--no-faults``)."""
        if not self.args.faults:
            return
        rates = {
            "kill": 1 / self.args.kill_every_s,
            "database": 1 / self.args.database_every_s,
            "systems": 1 / self.args.systems_every_s,
        }
        while True:
            wait = self.chaos_draw.expovariate(sum(rates.values()))
            if time.monotonic() + wait > until:
                return
            await asyncio.sleep(wait)
            fault = self.chaos_draw.choices(list(rates), weights=list(rates.values()))[0]
            await {"kill": self._kill, "database": self._database, "systems": self._systems}[fault]()

    async def _kill(self) -> None:
        async with self._restarting:
            if self.lives.process.popen.poll() is None:
                self.lives.kill()
                self.faults["kill"] += 1
            await self._restart(armed=True)

    async def _restart(self, *, armed: bool) -> None:
        self.armed = None
        if armed and self.chaos_draw.random() < 0.5:
            point = self.chaos_draw.choice(POINTS)
            what = self.chaos_draw.choice(("kill", "db_error", "timeout")) if point.startswith("action.") else "kill"
            self.armed = f"{point}={what}@{self.chaos_draw.randint(1, 3)}"
            self.faults[f"armed {point}={what}"] += 1
        await self.lives.start(faults=self.armed)

    async def watch(self) -> None:
        """Restart vigil whenever a failpoint killed it."""
        while not self.ending:
            await asyncio.sleep(0.5)
            async with self._restarting:
                code = self.lives.process.popen.poll()
                if code is not None and not self.ending:
                    self.faults["died at a failpoint" if code == -9 else f"exited {code}"] += 1
                    await self._restart(armed=True)

    async def _database(self) -> None:
        hold_s = self.chaos_draw.uniform(2.0, 6.0)
        if self.lives.db.is_sqlite:
            await asyncio.to_thread(_hold_sqlite, self.lives.db.path, hold_s)
            self.faults["database locked"] += 1
            return
        with psycopg.connect(self.lives.db.dsn, autocommit=True) as pg:
            killed = pg.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        self.faults["database connections terminated"] += int(killed[0]) if killed else 0
        self.faults["database faults"] += 1

    async def _systems(self) -> None:
        with self.systems.paused():
            await asyncio.sleep(self.chaos_draw.uniform(CONNECTOR_TIMEOUT_S * 1.5, CONNECTOR_TIMEOUT_S * 4))
        self.faults["systems stopped"] += 1

    # The end.

    async def settle(self) -> dict[str, Any]:
        """Stop the faults' aftermath: an unarmed vigil takes the rest; how long it took to finish everything."""
        self.ending = True
        async with self._restarting:
            if self.armed is not None or self.lives.process.popen.poll() is not None:
                if self.lives.process.popen.poll() is None:
                    self.lives.kill()
                    self.faults["kill"] += 1
                await self._restart(armed=False)
        started = time.monotonic()
        outcome: dict[str, Any] = {}
        try:
            await self.lives.daemon.processed(timeout_s=self.args.settle_s)
            outcome["processed_s"] = round(time.monotonic() - started, 1)
        except AssertionError as exc:
            outcome["processed"] = str(exc)
        with contextlib.suppress(AssertionError):
            await eventually("no action stuck", lambda: not stuck_actions(self.lives.db), 30.0)
        outcome["settled_s"] = round(time.monotonic() - started, 1)
        return outcome


def _hold_sqlite(path: Path, hold_s: float) -> None:
    """Take the database file's write lock and keep it ``hold_s`` (vigil's writes wait, then time out)."""
    with contextlib.closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as lite:
        lite.execute("BEGIN IMMEDIATE")
        time.sleep(hold_s)
        lite.execute("ROLLBACK")


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


async def soak(args: argparse.Namespace, workdir: Path, db_url: str) -> dict[str, Any]:
    """Run the soak and reconcile; the report."""
    with EmbeddedBroker() as broker, _systems(workdir) as systems:
        topics = new_topics()
        await create_topics(broker.bootstrap, topics)
        cli = VigilCli(workdir)
        settings = {
            "VIGIL_MINER__INTERVAL_S": str(args.miner_every_s),
            "VIGIL_PROGRESS__PROCEDURES_INTERVAL_S": str(args.procedures_every_s),
        } | ({"VIGIL_ANSWERS__ENABLED": "true"} if args.answers else {})
        lives = Lives(
            cli,
            bootstrap=broker.bootstrap,
            topics=topics,
            db_url=db_url,
            systems=systems,
            timeout_s=CONNECTOR_TIMEOUT_S,
            **settings,
        )
        run = Soak(lives, systems, args=args)
        try:
            await lives.start()
            began = time.monotonic()
            until = began + args.minutes * 60
            watcher = asyncio.create_task(run.watch())
            await asyncio.gather(run.demo_traffic(until), run.refunds(until), run.chaos(until), run.memory(until))
            traffic_s = time.monotonic() - began
            ending = await run.settle()
            await watcher
            reconciliation = reconcile(lives.db, systems, lives.suggestions(), lives.sent)
        finally:
            lives.close()
            cli.kill_all()
    return {
        "database": args.database,
        "minutes": args.minutes,
        "seed": args.seed,
        "traffic_s": round(traffic_s, 1),
        "lives": len(lives.lives),
        "faults": dict(sorted(run.faults.items())),
        "approvals": dict(sorted(run.approvals.items())),
        "ending": ending,
        "memory": memory_report(run.samples),
        **reconciliation.as_json(),
    }


def memory_report(samples: list[tuple[float, int, float]]) -> dict[str, Any]:
    """The samples, and whether memory levelled off: medians of the first and last quarter after ten minutes, and
    the least-squares slope after ten minutes (MiB an hour)."""
    settled = [(minute, mib) for minute, _, mib in samples if minute >= 10]
    report: dict[str, Any] = {"samples": [[m, pid, round(mib, 1)] for m, pid, mib in samples]}
    if len(settled) >= 8:
        quarter = len(settled) // 4
        report["first_quarter_median_mib"] = round(statistics.median(mib for _, mib in settled[:quarter]), 1)
        report["last_quarter_median_mib"] = round(statistics.median(mib for _, mib in settled[-quarter:]), 1)
        report["slope_mib_per_hour"] = round(statistics.linear_regression(*zip(*settled, strict=True)).slope * 60, 1)
    if samples:
        report["peak_mib"] = round(max(mib for _, _, mib in samples), 1)
    return report


@contextlib.contextmanager
def _systems(workdir: Path) -> Iterator[SystemsProcess]:
    systems = SystemsProcess(workdir / "systems.sqlite", workdir / "systems.log").start()
    try:
        yield systems
    finally:
        systems.stop()


def _database(stack: contextlib.ExitStack, args: argparse.Namespace, workdir: Path) -> str:
    """A fresh database for the run, dropped afterwards unless ``--keep-database``."""
    if not args.keep_database:
        return stack.enter_context(databases.fresh(args.database, workdir))
    if args.database == "sqlite":
        return f"sqlite+aiosqlite:///{workdir / 'vigil.db'}"
    name = f"vigil_soak_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(databases.PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    print(f"vigil's database: {name} (kept)", file=sys.stderr)
    return sa.make_url(databases.PG_ADMIN).set(drivername="postgresql+asyncpg", database=name).render_as_string(False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the traffic and the faults last")
    parser.add_argument("--database", choices=databases.KINDS, default="sqlite")
    parser.add_argument("--seed", type=int, default=1, help="the faults' and the traffic's draws")
    parser.add_argument("--kill-every-s", type=float, default=120.0, help="mean time between kills")
    parser.add_argument("--database-every-s", type=float, default=90.0, help="mean time between database faults")
    parser.add_argument("--systems-every-s", type=float, default=60.0, help="mean time between systems stops")
    parser.add_argument("--conversations-per-min", type=float, default=6.0, help="demo conversations started")
    parser.add_argument("--refunds-per-min", type=float, default=6.0, help="refund conversations started")
    parser.add_argument("--reply-every-s", type=float, default=3.0, help="mean time between a conversation's events")
    parser.add_argument("--settle-s", type=float, default=300.0, help="how long vigil has to finish at the end")
    parser.add_argument("--answers", action="store_true", help="the answers capability on (loads the model)")
    parser.add_argument(
        "--faults", action=argparse.BooleanOptionalAction, default=True, help="kills, database and systems faults"
    )
    parser.add_argument("--sample-s", type=float, default=60.0, help="how often vigil's memory is sampled")
    parser.add_argument("--miner-every-s", type=float, default=600.0, help="the miner's interval (its default)")
    parser.add_argument("--procedures-every-s", type=float, default=3600.0, help="procedure mining's interval")
    parser.add_argument("--workdir", type=Path, help="keep vigil's logs and the systems' file here")
    parser.add_argument(
        "--keep-database", action="store_true", help="leave vigil's database for a look (SQLite: give --workdir)"
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vigil-soak-")))
        workdir.mkdir(parents=True, exist_ok=True)
        db_url = _database(stack, args, workdir)
        result = asyncio.run(soak(args, workdir, db_url))
    print(json.dumps(result, indent=2))
    output = report.save("soak", argv, vars(args) | {"workdir": str(args.workdir)}, result)
    print(f"saved: {output}", file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
