"""Tenures of partitions, on both databases: each consumer given a partition fences off the one before, and a write
made for a record read under an older tenure writes nothing, while the records read under the latest go on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.cases.test_store import msg, suggestion
from tests.conftest import migrated_store
from vigil.cases.store import CaseStore
from vigil.cases.tables import MESSAGE, SUGGESTION
from vigil.core.clock import ManualClock
from vigil.core.errors import Fenced
from vigil.flow.tables import TENURE
from vigil.flow.tenure import SqlTenures, holding, prove
from vigil.transport.base import Tenure

START = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
P0, P1 = "kafka:vigil.events/0", "kafka:vigil.events/1"


@pytest.fixture
async def pg_store(pg_url: str, tmp_path: Path) -> AsyncIterator[CaseStore]:
    async with migrated_store(pg_url, tmp_path) as store:
        yield store


def book(store: CaseStore, holder: str) -> SqlTenures:
    return SqlTenures(store.engine, holder=holder, clock=ManualClock(START), timeout_s=5.0)


async def stored_messages(store: CaseStore) -> list[str]:
    async with store.engine.connect() as conn:
        return sorted((await conn.execute(sa.select(MESSAGE.c.message_id))).scalars())


async def record_under(store: CaseStore, tenure: Tenure | None, n: int, conversation: str = "c-1") -> object:
    with holding(tenure):
        return await store.record(msg(n, conversation=conversation))


async def test_each_consumer_given_a_partition_counts_its_epoch_up_and_the_holder_is_kept(store: CaseStore):
    first = await book(store, "vigil-0").take([P0, P1])
    assert first == {P0: Tenure(P0, 1), P1: Tenure(P1, 1)}
    second = await book(store, "vigil-1").take([P1])
    assert second == {P1: Tenure(P1, 2)}
    async with store.engine.connect() as conn:
        rows = {r.scope: (r.epoch, r.holder) for r in await conn.execute(sa.select(TENURE))}
    assert rows == {P0: (1, "vigil-0"), P1: (2, "vigil-1")}


async def test_an_event_read_under_an_older_tenure_is_refused_and_nothing_of_it_is_written(store: CaseStore):
    old = (await book(store, "vigil-0").take([P0]))[P0]
    assert (await record_under(store, old, 1)).new  # type: ignore[attr-defined]
    new = (await book(store, "vigil-1").take([P0]))[P0]
    with pytest.raises(Fenced) as refused:
        await record_under(store, old, 2)
    assert refused.value.latest == {P0: new.epoch}
    assert (await record_under(store, new, 2)).new  # type: ignore[attr-defined]
    assert await stored_messages(store) == ["c-1-m1", "c-1-m2"]


async def test_in_one_batch_only_the_fenced_events_fail_and_the_others_are_written(store: CaseStore):
    old = await book(store, "vigil-0").take([P0, P1])
    new = await book(store, "vigil-1").take([P0])
    results = await asyncio.gather(
        record_under(store, old[P0], 1, "moved"),  # P0 has moved: refused
        record_under(store, new[P0], 2, "kept-new"),  # the same partition under its new tenure
        record_under(store, old[P1], 3, "kept-old"),  # P1 has not moved
        record_under(store, None, 4, "untenured"),  # from a transport without tenures (MQTT)
        return_exceptions=True,
    )
    assert isinstance(results[0], Fenced)
    assert [getattr(r, "new", None) for r in results[1:]] == [True, True, True]
    assert await stored_messages(store) == ["kept-new-m2", "kept-old-m3", "untenured-m4"]


async def test_a_suggestion_made_under_an_older_tenure_is_not_stored(store: CaseStore):
    old = (await book(store, "vigil-0").take([P0]))[P0]
    await book(store, "vigil-1").take([P0])
    with holding(old), pytest.raises(Fenced):
        await store.save_suggestion(suggestion("s-1", "c-1-m1"))
    async with store.engine.connect() as conn:
        assert (await conn.execute(sa.select(sa.func.count()).select_from(SUGGESTION))).scalar_one() == 0


async def test_a_new_tenure_waits_for_a_transaction_that_proved_the_old_one_to_commit(pg_store: CaseStore):
    old = (await book(pg_store, "vigil-0").take([P0]))[P0]
    async with pg_store.engine.begin() as conn:
        await prove(conn, [old])  # proved: the write this transaction makes commits under the old tenure
        taking = asyncio.create_task(book(pg_store, "vigil-1").take([P0]))
        await asyncio.sleep(0.5)
        assert not taking.done(), "the new tenure was taken while a write proving the old one was open"
    assert (await taking)[P0] == Tenure(P0, 2)
