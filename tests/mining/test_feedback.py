"""The analysts' verdicts as tuning reads them: the customer's question, the entry answered from, the verdict."""

from __future__ import annotations

from tests.mining.test_miner import PARCEL, answered_from
from vigil.cases.store import CaseStore
from vigil.knowledge.tuning import Verdict
from vigil.mining.feedback import answer_verdicts


async def test_each_verdict_on_an_answer_comes_with_the_question_it_answered(store: CaseStore):
    await answered_from(store, "case-parcel", ["accepted", "edited"], cid="first")
    await answered_from(store, "case-parcel", ["dismissed", "approved"], cid="second")
    found = await answer_verdicts(store.engine)
    assert sorted(found, key=lambda v: v.accepted) == [
        Verdict(PARCEL[0], "case-parcel", accepted=False),
        Verdict(PARCEL[0], "case-parcel", accepted=True),
        Verdict(PARCEL[0], "case-parcel", accepted=True),
    ]


async def test_only_the_latest_verdicts_are_read(store: CaseStore):
    await answered_from(store, "case-parcel", ["accepted"] * 3, cid="first")
    assert len(await answer_verdicts(store.engine, limit=2)) == 2
