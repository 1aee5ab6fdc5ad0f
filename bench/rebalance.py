"""Rebalance pauses: how long partitions stop while a consumer group changes, with static membership and without.

Members of one group (vigil's Kafka source, ``KafkaSource``, in this process) read a topic of ``--partitions``
partitions on Tansu while a producer writes to every partition at a steady ``--rate`` records a second each. Then,
in turn:

- **restart**: one member stops (a rolling update's SIGTERM: it commits and closes) and comes back ``--away-s`` later,
  under the same instance id when static (``VIGIL_KAFKA__GROUP_INSTANCE_ID``), as a new member when not;
- **join**: one more member joins (a scale-out).

Every delivery's arrival is timed per partition. The pause of a partition is the longest gap between two of its
deliveries from the change until the group is settled again (``--settle-s`` without a change of assignment); the
figures are the longest pause among the partitions the restarting member did not hold (which need not stop at all),
and among those it held (which wait for it to come back, or to be given to another). Each scenario runs
``--repeats`` times; the medians are reported.

Run: ``python -m bench.rebalance`` (``--repeats 3`` by default; about 5 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaProducer

from bench import report
from vigil.dev.broker import EmbeddedBroker
from vigil.transport.kafka import KafkaPublisher, KafkaSource, ensure_topics
from vigil.transport.settings import KafkaSettings

SESSION_S = 20.0
"""The group session of every member: longer than a restart's absence and than Tansu's join (about 8 s)."""


@dataclass
class Member:
    """One consumer of the group, and the arrival times of what it read, per partition."""

    name: str
    source: KafkaSource
    arrivals: defaultdict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.source.start()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for delivery in self.source.deliveries():
            self.arrivals[int(delivery.record.origin["partition"])].append(time.monotonic())
            delivery.ack()

    def held(self) -> set[int]:
        consumer = self.source._consumer
        return {tp.partition for tp in consumer.assignment()} if consumer is not None else set()

    async def stop(self) -> None:
        self.source.stop_intake()
        if self.task is not None:
            await self.task
        await self.source.close()


class Group:
    """The members of one group on one topic, and the producer writing to every partition."""

    def __init__(self, bootstrap: str, *, partitions: int, static: bool, rate: float) -> None:
        run = uuid.uuid4().hex[:8]
        self.settings = KafkaSettings(
            bootstrap_servers=bootstrap,
            input_topic=f"rebalance-{run}",
            group_id=f"rebalance-{run}",
            session_timeout_s=SESSION_S,
            partitions=partitions,
        )
        self.partitions, self.static, self.rate = partitions, static, rate
        self.publisher = KafkaPublisher(self.settings)
        self.members: dict[str, Member] = {}
        self.retired: list[Member] = []
        self._producing: asyncio.Task[None] | None = None

    def _member(self, name: str) -> Member:
        settings: KafkaSettings = self.settings.model_copy(
            update={"group_instance_id": name if self.static else None, "client_id": name}
        )
        return Member(name, KafkaSource(settings, self.publisher, handover_timeout_s=5.0))

    async def start(self, names: list[str]) -> None:
        await ensure_topics(self.settings, [self.settings.input_topic], partitions=self.partitions)
        await self.publisher.start()
        self._producing = asyncio.create_task(self._produce())
        for name in names:
            await self.add(name)

    async def add(self, name: str) -> None:
        member = self.members[name] = self._member(name)
        await member.start()

    async def remove(self, name: str) -> Member:
        member = self.members.pop(name)
        await member.stop()
        self.retired.append(member)
        return member

    def assignment(self) -> dict[str, frozenset[int]]:
        return {name: frozenset(m.held()) for name, m in self.members.items()}

    async def settled(self, quiet_s: float, timeout_s: float = 120.0) -> float:
        """Wait until every partition is held by one member and the assignment has not changed for ``quiet_s``;
        the time it settled (the last change)."""
        deadline = time.monotonic() + timeout_s
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            now = self.assignment()
            held = [p for ps in now.values() for p in ps]
            # Every partition held once, and every member holding some (there are no more members than partitions):
            # a member that has joined but not been given any yet means the group is still to rebalance.
            whole = sorted(held) == list(range(self.partitions)) and all(now.values())
            if now != last or not whole:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return since
            await asyncio.sleep(0.05)
        raise TimeoutError(f"the group did not settle: {self.assignment()}")

    def pauses(self, start: float, end: float) -> dict[int, float]:
        """The longest gap between two deliveries of each partition within [start, end], by any member."""
        arrivals: defaultdict[int, list[float]] = defaultdict(list)
        for member in [*self.members.values(), *self.retired]:
            for partition, times in member.arrivals.items():
                arrivals[partition] += [t for t in times if start <= t <= end]
        out = {}
        for partition in range(self.partitions):
            times = sorted([start, *arrivals[partition], end])
            out[partition] = max(b - a for a, b in itertools.pairwise(times))
        return out

    async def _produce(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.settings.bootstrap_servers, linger_ms=5)
        await producer.start()
        try:
            interval = 1.0 / self.rate
            while True:
                started = time.monotonic()
                for partition in range(self.partitions):
                    await producer.send(self.settings.input_topic, b"{}", key=None, partition=partition)
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))
        finally:
            await producer.stop()

    async def close(self) -> None:
        if self._producing is not None:
            self._producing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._producing
        for name in list(self.members):
            await self.members.pop(name).stop()
        await self.publisher.close()


async def scenario(bootstrap: str, kind: str, *, static: bool, args: argparse.Namespace) -> dict[str, Any]:
    group = Group(bootstrap, partitions=args.partitions, static=static, rate=args.rate)
    names = [f"member-{n}" for n in range(args.members)]
    try:
        await group.start(names)
        await group.settled(args.settle_s)
        before = group.assignment()
        changed = time.monotonic()
        if kind == "restart":
            leaving = names[-1]
            touched = set(before[leaving])
            await group.remove(leaving)
            await asyncio.sleep(args.away_s)
            await group.add(leaving)
        else:
            touched = set(range(args.partitions))  # a join may move any partition
            await group.add(f"member-{args.members}")
        settled_at = await group.settled(args.settle_s)
        end = max(settled_at, changed) + 1.0
        await asyncio.sleep(max(0.0, end - time.monotonic()))
        pauses = group.pauses(changed, end)
        untouched = [pauses[p] for p in range(args.partitions) if p not in touched]
        moved = [pauses[p] for p in touched]
        return {
            "scenario": kind,
            "membership": "static" if static else "dynamic",
            "pause_untouched_s": max(untouched) if untouched else None,
            "pause_touched_s": max(moved) if moved else None,
            "settled_after_s": settled_at - changed,
            "pauses_s": pauses,
        }
    finally:
        await group.close()


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with EmbeddedBroker() as broker:
        for repeat in range(args.repeats):
            for kind in args.scenarios:
                for static in (True, False):
                    row = await scenario(broker.bootstrap, kind, static=static, args=args) | {"repeat": repeat}
                    rows.append(row)
                    print(
                        f"{kind}, {row['membership']}: untouched partitions paused {row['pause_untouched_s']}, "
                        f"the touched {row['pause_touched_s']:.2f} s; settled after {row['settled_after_s']:.1f} s",
                        file=sys.stderr,
                        flush=True,
                    )
    return rows


def medians(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for kind, membership in sorted({(r["scenario"], r["membership"]) for r in rows}):
        mine = [r for r in rows if r["scenario"] == kind and r["membership"] == membership]
        out[f"{kind}/{membership}"] = {
            key: statistics.median(values) if (values := [r[key] for r in mine if r[key] is not None]) else None
            for key in ("pause_untouched_s", "pause_touched_s", "settled_after_s")
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rebalance", description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rate", type=float, default=50.0, help="records a second written to each partition")
    parser.add_argument("--away-s", type=float, default=2.0, help="how long a restarting member is gone")
    parser.add_argument("--settle-s", type=float, default=6.0, help="the assignment unchanged this long")
    parser.add_argument("--scenarios", nargs="+", default=["restart", "join"], choices=["restart", "join"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args))
    result = {"runs": rows, "medians": medians(rows)}
    for name, figures in result["medians"].items():
        untouched, touched = figures["pause_untouched_s"], figures["pause_touched_s"]
        whose = "every partition" if name.startswith("join/") else "the restarted member's"  # a join may move any
        print(
            f"{name:18} untouched partitions paused {'-' if untouched is None else f'{untouched:.2f} s':>8}, "
            f"{whose} {touched:.2f} s, settled after {figures['settled_after_s']:.1f} s"
        )
    print(f"saved: {report.save('rebalance', argv, vars(args), result)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
