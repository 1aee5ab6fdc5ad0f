"""Verdicts teach: what analysts said of the answers drawn from an entry moves that entry for questions like the ones
it answered, for their tenant only.

An answer cites the entry it was drawn from first. An analyst who dismisses it says that entry was wrong for that
question; one who accepts it, or edits and sends it, says it was right (an edit, less so: the entry needed changing).
Each verdict is kept in SQL (``knowledge_verdict``) with the question answered, in the transaction of the feedback
event that carries it (``vigil.answers.verdicts``), so it survives restarts and every replica reads it.

Each replica holds the verdicts of the last ``HORIZON_S`` in memory, per tenant, with their questions' vectors: a
refresh (at start-up, then with the knowledge's, every ``refresh_interval_s``) reads the verdicts received since the
last one, embeds the questions not yet embedded in one batch and writes their vectors back, so the answer path never
embeds a verdict. A search for a tenant then asks ``terms`` how its candidates were judged on questions like the
query (near in meaning and not asking the opposite, ``opposed``), and ``term`` turns those verdicts into one number
per entry in -1..1: the store moves the entry's score by ``MOVE`` times it (``KnowledgeStore.search``), and the hit
carries it (``Hit.verdict``) for the answer's confidence.

Why these constants (the verdicts are too few yet to fit them; they are set from the bundled model's cosines on the
Brightwave help centre): paraphrases of one need sit at cosine 0.85 to 0.98 ("I want to leave brightwave but keep
my mobile number" and "I'm leaving Brightwave but want to keep my mobile number": 0.96), questions about another need
of the same topic at 0.55 to 0.65 ("switching provider, take my number with me": 0.59), unrelated ones below 0.4. So
a verdict counts from ``SIMILAR`` (0.75) and fully from ``FULL`` (0.9). Hit scores are relative to the first (1.0);
the runner-up of a near miss is typically 0.85 to 0.99 of it, so one dismissal on the same question or a close
paraphrase (term -0.5, a move of -0.25) puts the alternative first; for a looser paraphrase (cosine 0.84, a weight of
0.6) it takes two (term -0.55).
"""

from __future__ import annotations

import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from vigil.core.clock import Clock
from vigil.db.engine import upsert
from vigil.knowledge.embedding import Vectors
from vigil.knowledge.ranking import polarities
from vigil.knowledge.tables import ENTRY, SUPERSEDED_BY, VERDICT

log = logging.getLogger(__name__)

SIGNS: Mapping[str, float] = {"accepted": 1.0, "edited": 0.5, "dismissed": -1.0}
"""What each verdict says of the entry cited first: right, right but needed changing, wrong."""
SIMILAR = 0.75
"""A verdict counts for a query whose cosine with the question it judged is at least this."""
FULL = 0.9
"""From this cosine on, it counts fully (linearly from ``SIMILAR``)."""
HALF_LIFE_S = 60 * 86_400.0
"""A verdict counts half after 60 days: the entry, or what customers mean by the words, may have changed."""
PRIOR = 1.0
"""How many verdicts' worth of doubt a term starts with: one dismissal is -0.5, not -1, so one mistaken verdict never
buries an entry, and verdicts that disagree cancel out."""
MOVE = 0.5
"""How far a term of 1 moves an entry's score (scores are relative to the first candidate's, 1.0)."""
HORIZON_S = 6 * HALF_LIFE_S
"""Verdicts older than this count less than 2% and are not held."""
MOST = 5_000
"""The newest verdicts held per tenant (about 8 MB of vectors each)."""
OVERLAP = timedelta(minutes=15)
"""How far before the newest verdict held a refresh reads again: ``received_at`` is stamped on each replica's clock,
and a verdict may commit after a later one."""

Connect = Callable[[bool], contextlib.AbstractAsyncContextManager[AsyncConnection]]
"""A connection to the knowledge database (in a transaction when given True), its errors vigil's."""
EmbedMany = Callable[[Sequence[str]], Awaitable[Vectors]]


@dataclass(frozen=True, slots=True)
class Verdict:
    """An analyst's verdict on an answer, as it is kept."""

    conversation_id: str
    feedback_id: str
    tenant: str
    entry_id: str
    """The entry the answer cited first: the one it was drawn from."""
    verdict: str
    question: str
    """The customer's message it answered."""
    suggestion_id: str
    message_id: str
    at: datetime
    received_at: datetime
    by: str | None = None
    text: str | None = None
    """An edit's reply as sent; a dismissal's reason."""


async def record(conn: AsyncConnection, verdict: Verdict) -> None:
    """Keep ``verdict`` on ``conn`` (the transaction of its feedback event); once, however often it is recorded."""
    row = {
        "conversation_id": verdict.conversation_id,
        "feedback_id": verdict.feedback_id,
        "tenant": verdict.tenant,
        "entry_id": verdict.entry_id,
        "verdict": verdict.verdict,
        "question": verdict.question,
        "text": verdict.text,
        "suggestion_id": verdict.suggestion_id,
        "message_id": verdict.message_id,
        "by": verdict.by,
        "at": verdict.at,
        "received_at": verdict.received_at,
    }
    await conn.execute(upsert(conn, VERDICT).values(row).on_conflict_do_nothing())


def term(similarities: npt.ArrayLike, signs: npt.ArrayLike, ages_s: npt.ArrayLike, *, prior: float = PRIOR) -> float:
    """How an entry was judged on questions like the query, in -1 (wrong) .. 1 (right); 0 with no such verdict.

    Each verdict weighs ``w = ramp(cosine) * 0.5 ** (age / HALF_LIFE_S)``, where ``ramp`` is 0 below ``SIMILAR``,
    1 from ``FULL``, linear between; its sign (``SIGNS``) says for or against. The term is the weighted balance over
    the weighted count plus ``prior``::

        (sum of w * sign) / (sum of w * |sign| + prior)

    so it is a share of the verdicts shrunk towards 0 when they are few or far: one dismissal on the very question is
    -0.5, two -0.67; a dismissal and an acceptance cancel; a verdict on a question at cosine 0.8 counts a third.

    Args:
        similarities: each verdict's question's cosine with the query.
        signs: each verdict's ``SIGNS`` value.
        ages_s: how long ago each was received, in seconds (a negative age, from a clock ahead, counts as 0).
        prior: the verdicts' worth of doubt the term starts with.
    """
    cosine = np.asarray(similarities, dtype=np.float64)
    sign = np.asarray(signs, dtype=np.float64)
    age = np.maximum(np.asarray(ages_s, dtype=np.float64), 0.0)
    weight = np.clip((cosine - SIMILAR) / (FULL - SIMILAR), 0.0, 1.0) * 0.5 ** (age / HALF_LIFE_S)
    return float(np.sum(weight * sign) / (np.sum(weight * np.abs(sign)) + prior))


def opposed(query: str, judged: str) -> bool:
    """Whether one question negates a word the other says ("I don't need my number" against "keep my number"): then
    they ask opposite things however near their vectors (the model barely sees negation: those two are at cosine
    0.94), and a verdict on one says nothing of the other. Polarities as the near-miss stage reads them
    (``ranking.polarities``)."""
    mine, theirs = polarities(query), polarities(judged)
    return any(polarity * theirs[word] < 0 for word, polarity in mine.items() if word in theirs)


@dataclass(frozen=True, slots=True)
class _Held:
    """A verdict as the memory holds it."""

    key: tuple[str, str]
    question: str
    entry_id: str
    sign: float
    received_at: float
    """Seconds since the epoch."""
    vector: Vectors


@dataclass(frozen=True, slots=True)
class _Tenant:
    """One tenant's verdicts, as arrays a query is compared with at once."""

    held: tuple[_Held, ...]
    entry_ids: tuple[str, ...]
    vectors: Vectors
    signs: npt.NDArray[np.float64]
    received: npt.NDArray[np.float64]

    @classmethod
    def of(cls, held: Iterable[_Held]) -> _Tenant:
        newest = tuple(sorted(held, key=lambda h: -h.received_at)[:MOST])
        return cls(
            held=newest,
            entry_ids=tuple(h.entry_id for h in newest),
            vectors=np.stack([h.vector for h in newest]).astype(np.float32),
            signs=np.array([h.sign for h in newest], dtype=np.float64),
            received=np.array([h.received_at for h in newest], dtype=np.float64),
        )


@dataclass
class _State:
    """What searches read: swapped whole on refresh."""

    tenants: dict[str, _Tenant] = field(default_factory=dict)
    keys: frozenset[tuple[str, str]] = frozenset()
    newest: datetime | None = None
    successors: Mapping[str, str] = field(default_factory=dict)
    """Judged entries the miner folded into an FAQ, and that FAQ: their verdicts count for it while it lasts."""


class VerdictMemory:
    """The verdicts of every tenant, held per tenant with their questions' vectors (see the module's docstring)."""

    def __init__(self, *, connect: Connect, embed_many: EmbedMany, embedder: str, clock: Clock) -> None:
        self._connect = connect
        self._embed_many = embed_many
        self._embedder = embedder
        self._clock = clock
        self._state = _State()

    def holds(self, tenant: str | None) -> bool:
        """Whether ``tenant`` has any verdict held (a search for it then asks ``terms``)."""
        return tenant is not None and tenant in self._state.tenants

    def terms(self, tenant: str | None, query: str, vector: Vectors, entry_ids: Iterable[str]) -> dict[str, float]:
        """For each of ``entry_ids`` judged by ``tenant`` on a question like ``query`` (of ``vector``: cosine at
        least ``SIMILAR``, and not ``opposed``), its ``term``; the others are left out."""
        held = self._state.tenants.get(tenant) if tenant is not None else None
        if held is None:
            return {}
        similarities = held.vectors @ np.asarray(vector, dtype=np.float32)
        wanted = set(entry_ids)
        successors = self._state.successors
        near: dict[str, list[int]] = defaultdict(list)
        for i in np.flatnonzero(similarities >= SIMILAR):
            judged = successors.get(held.entry_ids[i], held.entry_ids[i])
            if judged in wanted and not opposed(query, held.held[i].question):
                near[judged].append(int(i))
        now = self._clock.now().timestamp()
        return {
            entry_id: term(similarities[rows], held.signs[rows], now - held.received[rows])
            for entry_id, rows in near.items()
        }

    async def refresh(self) -> bool:
        """Read the verdicts received since the last refresh (all of the last ``HORIZON_S`` at the first), embed the
        questions not yet embedded, and forget what is now too old; True when something was learned or forgotten.
        Not concurrently with itself (the store's lock)."""
        state = self._state
        now = self._clock.now()
        since = now - timedelta(seconds=HORIZON_S)
        if state.newest is not None:
            since = max(since, state.newest - OVERLAP)
        async with self._connect(False) as conn:
            rows = (await conn.execute(sa.select(VERDICT).where(VERDICT.c.received_at > since))).all()
        new = [r for r in rows if (r.conversation_id, r.feedback_id) not in state.keys and r.verdict in SIGNS]
        learned = [
            _Held(
                (r.conversation_id, r.feedback_id),
                r.question,
                r.entry_id,
                SIGNS[r.verdict],
                r.received_at.timestamp(),
                v,
            )
            for r, v in zip(new, await self._vectors(new), strict=True)
        ]
        horizon = now.timestamp() - HORIZON_S
        held: dict[str, list[_Held]] = {
            tenant: [h for h in t.held if h.received_at > horizon] for tenant, t in state.tenants.items()
        }
        for row, verdict in zip(new, learned, strict=True):
            held.setdefault(row.tenant, []).append(verdict)
        tenants = {tenant: _Tenant.of(verdicts) for tenant, verdicts in held.items() if verdicts}
        before = sum(len(t.held) for t in state.tenants.values())
        successors = await self._successors({e for t in tenants.values() for e in t.entry_ids})
        self._state = _State(
            tenants=tenants,
            keys=frozenset(h.key for t in tenants.values() for h in t.held),
            newest=max(
                [r.received_at for r in new] + ([state.newest] if state.newest is not None else []), default=None
            ),
            successors=successors,
        )
        return (
            bool(new)
            or before + len(new) != sum(len(t.held) for t in tenants.values())
            or successors != state.successors
        )

    async def _successors(self, judged: set[str]) -> dict[str, str]:
        """Of the ``judged`` entries, those retired into an FAQ (their provenance's ``superseded_by``), and the FAQ
        each now is part of: what analysts said of an entry's answers follows it into the FAQ (issue 27)."""
        found: dict[str, str] = {}
        ids = sorted(judged)
        if not ids:  # nothing judged: no read
            return found
        async with self._connect(False) as conn:
            for start in range(0, len(ids), 500):
                rows = await conn.execute(
                    sa.select(ENTRY.c.id, ENTRY.c.provenance).where(
                        ENTRY.c.id.in_(ids[start : start + 500]), ENTRY.c.status == "retired"
                    )
                )
                for row in rows:
                    successor = (row.provenance or {}).get(SUPERSEDED_BY)
                    if isinstance(successor, str):
                        found[row.id] = successor
        return found

    async def _vectors(self, rows: Sequence[sa.Row[object]]) -> list[Vectors]:
        """Each row's question's vector: as stored, if of this embedder; else embedded now, all in one batch, and
        written back where none was stored (the next replica, or restart, reads it)."""
        stored = [
            np.frombuffer(r.vector, dtype=np.float32) if r.vector is not None and r.embedder == self._embedder else None
            for r in rows
        ]
        missing = [n for n, v in enumerate(stored) if v is None]
        if not missing:
            return [v for v in stored if v is not None]
        embedded = await self._embed_many([rows[n].question for n in missing])
        for n, vector in zip(missing, embedded, strict=True):
            stored[n] = np.asarray(vector, dtype=np.float32)
        async with self._connect(True) as conn:
            await conn.execute(
                sa.update(VERDICT)
                .where(
                    VERDICT.c.conversation_id == sa.bindparam("key_conversation"),
                    VERDICT.c.feedback_id == sa.bindparam("key_feedback"),
                    VERDICT.c.vector.is_(None),
                )
                .values(vector=sa.bindparam("new_vector"), embedder=self._embedder),
                [
                    {
                        "key_conversation": rows[n].conversation_id,
                        "key_feedback": rows[n].feedback_id,
                        "new_vector": embedded[i].astype(np.float32).tobytes(),
                    }
                    for i, n in enumerate(missing)
                ],
            )
        log.info("embedded the questions of %d analysts' verdicts", len(missing))
        return [v for v in stored if v is not None]
