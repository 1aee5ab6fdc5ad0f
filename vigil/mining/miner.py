"""One run of the miner: withdraw what reopened cases taught, then distil, redact (with an LLM, rewrite and redact
again), embed and merge the cases closed since the watermark, and write the entries and the miner's record of them
in one SQL transaction.

A run is safe to repeat and to interrupt. The entries' rows, the cases' vectors and the ``mined_case`` records are
written together or not at all; the knowledge store writes the vectors in Chroma first and repairs any left over
from a crash at its next start. A case is mined once: its record says at which closure it was dealt with.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.core.clock import Clock
from vigil.db.engine import upsert
from vigil.knowledge.documents import Entry, Passage
from vigil.knowledge.store import MINED, EntryStatus, Governance, KnowledgeStore
from vigil.knowledge.tables import ENTRY
from vigil.mining import feedback, select
from vigil.mining.distil import Distilled, distil
from vigil.mining.merge import Cluster, Clusters, Member, passage_text, representative
from vigil.mining.settings import MinerSettings
from vigil.mining.tables import CASE_VECTOR, MINED_CASE, MINER_MARK

if TYPE_CHECKING:
    from vigil.mining.redact import Redactor
    from vigil.mining.rewrite import Rewriter

log = logging.getLogger(__name__)

SOURCE = MINED
"""The ``origin`` of every mined entry."""
MAX_QUESTIONS = 10
"""The most customer phrasings a mined FAQ keeps as its question and alternates."""
TITLE_CHARS = 160


@dataclass(slots=True)
class Report:
    """What a run did."""

    mined: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    withdrawn: int = 0
    entries: Counter[str] = field(default_factory=Counter)
    """Entries written, by what they are now: case, faq, pending_review, retired."""
    merged: int = 0
    """Cases that joined an entry other cases had made."""
    rewritten: int = 0
    """Cases whose entry the LLM wrote (the others keep their extractive entry)."""

    def add(self, other: Report) -> None:
        self.mined += other.mined
        self.rewritten += other.rewritten
        self.skipped.update(other.skipped)
        self.withdrawn += other.withdrawn
        self.entries.update(other.entries)
        self.merged += other.merged

    def summary(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())) or "none"
        written = ", ".join(f"{n} {what}" for what, n in sorted(self.entries.items())) or "none"
        return (
            f"mined {self.mined} cases ({self.merged} merged into known problems); skipped: {skipped}; "
            f"withdrawn: {self.withdrawn}; entries written: {written}"
            + (f"; {self.rewritten} rewritten by the LLM" if self.rewritten else "")
        )


class Miner:
    """Mines closed, human-resolved cases into the knowledge store (``run``); with a ``rewriter``, the LLM writes
    each case's entry in a fixed schema wherever it can (``vigil.mining.rewrite``)."""

    def __init__(
        self,
        settings: MinerSettings,
        *,
        engine: AsyncEngine,
        knowledge: KnowledgeStore,
        clock: Clock,
        redactor: Redactor | None = None,
        rewriter: Rewriter | None = None,
    ) -> None:
        self._settings = settings
        self._engine = engine
        self._knowledge = knowledge
        self._clock = clock
        self._redactor = redactor
        self._rewriter = rewriter

    async def run(self, now: datetime | None = None) -> Report:
        """Mine everything due at ``now`` (the clock's now by default), a batch at a time."""
        now = now or self._clock.now()
        report = Report()
        while True:
            batch = await self._batch(now)
            report.add(batch)
            if batch.mined + sum(batch.skipped.values()) < self._settings.batch:
                return report

    async def _batch(self, now: datetime) -> Report:
        report = Report()
        lateness = timedelta(seconds=self._settings.lateness_s)
        async with self._engine.connect() as conn:
            reopened = await select.reopened(conn)
            cases = await select.due(conn, now=now, lateness=lateness, limit=self._settings.batch)
            verdicts = await feedback.since_mark(conn)
            tenants = {c.tenant for c in cases} | await _tenants_of(
                conn, [r.conversation_id for r in reopened], sorted(verdicts.entries)
            )
            clusters = {t: await self._load(conn, t) for t in sorted(tenants)}
        for known in clusters.values():
            for cluster in known:
                if cluster.entry_id in verdicts.entries:
                    cluster.accepted += verdicts.accepted[cluster.entry_id]
                    cluster.dismissed += verdicts.dismissed[cluster.entry_id]
                    cluster.changed = True
        for gone in reopened:
            for known in clusters.values():
                if known.withdraw(gone.conversation_id) is not None:
                    break
            report.withdrawn += 1
        records: list[dict[str, Any]] = []
        taught = await self._taught(cases, now, report, records)
        for case, member in taught:
            known = clusters.setdefault(case.tenant, Clusters())
            cluster = known.add(
                member,
                entry_id=entry_id(case.tenant, case.conversation_id),
                tenant=case.tenant,
                threshold=self._settings.merge_similarity,
            )
            report.mined += 1
            report.merged += len(cluster.members) > 1
            records.append(_record(case, now, "mined", None, cluster.entry_id))
        rivals = self._rivals(clusters)
        changed = [c for known in clusters.values() for c in known if c.changed]
        entries, governance = self._entries(changed, report, rivals)
        if entries or governance or records or reopened or verdicts.until is not None:
            write = self._bookkeeping(changed, records, [r.conversation_id for r in reopened], verdicts.until)
            # The batch's vectors, by text: the store embeds only what they do not cover.
            embedded = {text: vector for _, m in taught for text, vector in m.vectors()}
            await self._knowledge.upsert(entries, governance=governance, also=write, embedded=embedded)
        return report

    async def _taught(
        self, cases: Sequence[select.ClosedCase], now: datetime, report: Report, records: list[dict[str, Any]]
    ) -> list[tuple[select.ClosedCase, Member]]:
        """Each case distilled and redacted (then rewritten by the LLM, when one is configured, and redacted
        again), its problem embedded; a case too thin to teach is recorded skipped."""
        kept: list[tuple[select.ClosedCase, Distilled]] = []
        for case in cases:
            distilled = distil(case)
            if distilled is None or distilled.thin(self._settings.min_analyst_words):
                why = "no_resolution" if distilled is None else "thin"
                report.skipped[why] += 1
                records.append(_record(case, now, "skipped", why, None))
                continue
            kept.append((case, self._redacted(distilled, case.authors)))
        if self._rewriter is not None and kept:
            # The LLM sees only redacted text, and what it writes is redacted again: it may echo what it guessed.
            better = await asyncio.gather(*(self._rewriter.rewrite(d) for _, d in kept))
            report.rewritten += sum(b is not None for b in better)
            kept = [
                (c, d if b is None else self._redacted(b, c.authors)) for (c, d), b in zip(kept, better, strict=True)
            ]
        taught = [(case, _member_of(case, distilled)) for case, distilled in kept]
        if taught:
            # A case is placed by its problem and its resolution together (the text its entry's passage holds):
            # customers put one problem in many ways, analysts resolve it in much the same words (on the tune
            # company's labelled cases, pairs of one problem are told from the rest with F1 0.70 this way, 0.40 by
            # the problem alone; docs/evaluation.md). Both vectors are handed on to the store, which then embeds
            # only what they do not cover (an entry of several cases states one case's problem, another's fix).
            texts = [m.problem for _, m in taught] + [m.passage for _, m in taught]
            vectors = np.asarray(await self._knowledge.embed_many(texts), dtype=np.float32)
            for n, (_, member) in enumerate(taught):
                member.problem_vector = _unit(vectors[n])
                member.vector = _unit(vectors[len(taught) + n])
        return taught

    def _rivals(self, clusters: dict[str, Clusters]) -> dict[str, list[str]]:
        """For each changed entry, and each entry it disagrees with, the ids of the entries for the same problem
        whose resolutions disagree with it (both are marked changed, so that both are flagged)."""
        found: dict[str, set[str]] = {}
        for known in clusters.values():
            for cluster, other in known.rivalries(
                problem_similarity=self._settings.conflict_problem_similarity,
                threshold=self._settings.conflict_similarity,
            ):
                found.setdefault(cluster.entry_id, set()).add(other.entry_id)
                found.setdefault(other.entry_id, set()).add(cluster.entry_id)
                other.changed = True
        return {entry: sorted(others) for entry, others in found.items()}

    def _entries(
        self, changed: Sequence[Cluster], report: Report, rivals: dict[str, list[str]]
    ) -> tuple[list[Entry], dict[str, Governance]]:
        """The entries of the clusters that changed, and what to store of their status, confidence and
        provenance (an emptied cluster only retires its entry)."""
        entries: list[Entry] = []
        governance: dict[str, Governance] = {}
        for cluster in changed:
            status = self._status(cluster, rivals.get(cluster.entry_id, []))
            if cluster.members:
                entry = entry_of(cluster, faq_min_cases=self._settings.faq_min_cases, status=status)
                entries.append(entry)
                report.entries[entry.kind] += 1
            if status != "active":
                report.entries[status] += 1
            governance[cluster.entry_id] = Governance(
                status=status,
                confidence=self._confidence(cluster),
                provenance=self._provenance(cluster, rivals.get(cluster.entry_id, [])),
                expires_at=self._expiry(cluster),
            )
        return entries, governance

    def _bookkeeping(
        self,
        changed: Sequence[Cluster],
        records: list[dict[str, Any]],
        withdrawn: list[str],
        read_feedback_until: datetime | None,
    ) -> Callable[[AsyncConnection], Awaitable[None]]:
        """The miner's own writes, made in the knowledge store's transaction: each case's vector, each case's
        record, the withdrawal of reopened cases, and how far it has counted feedback."""
        rows = [
            {
                "conversation_id": m.conversation_id,
                "entry_id": c.entry_id,
                "tenant": c.tenant,
                "embedder": self._knowledge.embedder_name,
                "vector": m.vector.astype(np.float32).tobytes(),
                "problem": m.problem_vector.astype(np.float32).tobytes(),
            }
            for c in changed
            for m in c.members
        ]

        async def write(conn: AsyncConnection) -> None:
            if withdrawn:
                await conn.execute(sa.delete(CASE_VECTOR).where(CASE_VECTOR.c.conversation_id.in_(withdrawn)))
                await conn.execute(
                    sa.update(MINED_CASE).where(MINED_CASE.c.conversation_id.in_(withdrawn)).values(outcome="withdrawn")
                )
            if rows:
                stmt = upsert(conn, CASE_VECTOR)
                await conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=[CASE_VECTOR.c.conversation_id],
                        set_={c: stmt.excluded[c] for c in ("entry_id", "tenant", "embedder", "vector", "problem")},
                    ),
                    rows,
                )
            if read_feedback_until is not None:
                stmt = upsert(conn, MINER_MARK)
                await conn.execute(
                    stmt.on_conflict_do_update(index_elements=[MINER_MARK.c.name], set_={"at": stmt.excluded.at}),
                    {"name": feedback.MARK, "at": read_feedback_until},
                )
            if records:
                stmt = upsert(conn, MINED_CASE)
                columns = ("tenant", "closed_at", "mined_at", "outcome", "reason", "entry_id")
                await conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=[MINED_CASE.c.conversation_id],
                        set_={c: stmt.excluded[c] for c in columns},
                    ),
                    records,
                )

        return write

    def _redacted(self, distilled: Distilled, names: Iterable[str]) -> Distilled:
        return dataclasses.replace(
            distilled,
            problem=self._redact(distilled.problem, names),
            steps=tuple(self._redact(s, names) for s in distilled.steps),
            outcome=self._redact(distilled.outcome, names) if distilled.outcome else None,
            context=tuple(self._redact(c, names) for c in distilled.context),
        )

    def _redact(self, text: str, names: Iterable[str]) -> str:
        if self._redactor is None:  # loaded at the first case to mine, not at start: ~50 MiB of name lists, 0.2 s
            from vigil.mining.redact import Redactor  # noqa: PLC0415

            self._redactor = Redactor()
        redacted: str = self._redactor.redact(text, names=names).text
        return redacted

    def _status(self, cluster: Cluster, rivals: Sequence[str]) -> EntryStatus:
        """Retired once no case supports it or a lead retired it; waiting for review when its cases disagree or
        another entry for the same problem says otherwise (unless a lead approved it knowing those), or when every
        mined entry must be reviewed and no lead has approved it yet; otherwise served."""
        if not cluster.members or cluster.status == "retired":
            return "retired"
        conflicts = {m.conversation_id for m in cluster.conflicts(self._settings.conflict_similarity)} | set(rivals)
        if conflicts and not (cluster.status == "active" and conflicts <= cluster.reviewed):
            return "pending_review"
        if cluster.status == "active":
            return "active"
        return "pending_review" if self._settings.require_review else "active"

    def _confidence(self, cluster: Cluster) -> float:
        """The share of good outcomes, smoothed: (good + 1) / (all + 2), where each case counts as good unless its
        CSAT was ``low_csat`` or less, and each analyst's verdict on an answer drawn from the entry counts too
        (accepted or edited: good; dismissed: not). One case rated well: 0.67; one rated badly: 0.33, which the
        knowledge store does not serve (``SERVED_CONFIDENCE``); two dismissals of a one-case entry: 0.4."""
        low = sum(1 for m in cluster.members if m.csat is not None and m.csat <= self._settings.low_csat)
        good = len(cluster.members) - low + cluster.accepted
        every = len(cluster.members) + cluster.accepted + cluster.dismissed
        return round((good + 1) / (every + 2), 4)

    def _expiry(self, cluster: Cluster) -> datetime | None:
        """``entry_ttl_days`` after the latest case that taught the entry, if set."""
        if self._settings.entry_ttl_days is None or not cluster.members:
            return None
        latest = max(datetime.fromisoformat(m.closed_at) for m in cluster.members)
        return latest + timedelta(days=self._settings.entry_ttl_days)

    def _provenance(self, cluster: Cluster, rivals: Sequence[str]) -> dict[str, Any]:
        conflicts = cluster.conflicts(self._settings.conflict_similarity) if cluster.members else []
        return {
            "source": SOURCE,
            "support": len(cluster.members),
            "kept": cluster.kept().conversation_id if cluster.members else None,
            "conflicts": [m.conversation_id for m in conflicts],
            "conflicts_with": list(rivals),
            "feedback": {"accepted": cluster.accepted, "dismissed": cluster.dismissed},
            "cases": [m.provenance() for m in cluster.members],
        }

    async def _load(self, conn: AsyncConnection, tenant: str) -> Clusters:
        """The tenant's mined entries as clusters: their cases from the entries' provenance, each case's vector from
        the miner's table."""
        vectors = {
            row.conversation_id: (
                row.entry_id,
                np.frombuffer(row.vector, dtype=np.float32),
                np.frombuffer(row.problem, dtype=np.float32),
            )
            for row in await conn.execute(
                sa.select(
                    CASE_VECTOR.c.conversation_id, CASE_VECTOR.c.entry_id, CASE_VECTOR.c.vector, CASE_VECTOR.c.problem
                ).where(CASE_VECTOR.c.tenant == tenant, CASE_VECTOR.c.embedder == self._knowledge.embedder_name)
            )
        }
        entry_ids = sorted({entry for entry, _, _ in vectors.values()})
        clusters: list[Cluster] = []
        for start in range(0, len(entry_ids), 500):
            rows = await conn.execute(
                sa.select(ENTRY.c.id, ENTRY.c.status, ENTRY.c.provenance).where(
                    ENTRY.c.id.in_(entry_ids[start : start + 500])
                )
            )
            for row in rows:
                cases = (row.provenance or {}).get("cases", [])
                members = [
                    _member(c, *vectors[c["conversation_id"]][1:]) for c in cases if c["conversation_id"] in vectors
                ]
                if members:
                    said = (row.provenance or {}).get("feedback", {})
                    clusters.append(
                        Cluster(
                            entry_id=row.id,
                            tenant=tenant,
                            members=members,
                            status=row.status,
                            reviewed=frozenset(
                                (row.provenance or {}).get("conflicts", [])
                                + (row.provenance or {}).get("conflicts_with", [])
                            ),
                            accepted=said.get("accepted", 0),
                            dismissed=said.get("dismissed", 0),
                        )
                    )
        return Clusters(clusters)


def entry_id(tenant: str, conversation_id: str) -> str:
    """The id of the entry a case starts: stable, short, the same on every replica and every re-run."""
    digest = hashlib.sha256(f"{tenant}\0{conversation_id}".encode()).hexdigest()[:20]
    return f"case-{digest}"


def entry_of(cluster: Cluster, *, faq_min_cases: int, status: EntryStatus) -> Entry:
    """The knowledge entry a cluster of cases makes: a ``case`` entry (the problem, its context, the best-supported
    resolution, the outcome), or an ``faq`` once ``faq_min_cases`` cases agree on it (their phrasings as question
    and alternates, the resolution as answer). Its link is the case whose resolution it states."""
    kept = cluster.kept()
    face = representative(cluster.members)
    answer = kept.answer
    url = f"/panel/conversations/{kept.conversation_id}"
    support = len(cluster.members)
    if support >= faq_min_cases and status != "pending_review":
        phrasings = list(dict.fromkeys([face.problem, *(m.problem for m in cluster.members)]))[:MAX_QUESTIONS]
        question = _title(face.problem)
        return Entry(
            id=cluster.entry_id,
            kind="faq",
            title=question,
            body=answer,
            origin=SOURCE,
            url=url,
            questions=(question, *phrasings[1:]),
            passages=(Passage(id=f"{cluster.entry_id}#1", heading=None, text=f"{question}\n{answer}"),),
            tenant=cluster.tenant,
        )
    context = list(dict.fromkeys(c for m in cluster.members for c in m.context))[:3]
    body = "\n\n".join(
        part
        for part in (
            f"**Problem.** {face.problem}",
            f"**Context.** {'; '.join(context)}" if context else "",
            "**Resolution.**\n" + "\n".join(f"- {step}" for step in kept.steps),
            f"**Outcome.** {kept.outcome}" if kept.outcome else "",
            f"Resolved this way in {support} case{'s' if support > 1 else ''}.",
        )
        if part
    )
    return Entry(
        id=cluster.entry_id,
        kind="case",
        title=_title(face.problem),
        body=body,
        origin=SOURCE,
        url=url,
        passages=(Passage(id=f"{cluster.entry_id}#1", heading=None, text=passage_text(face.problem, answer)),),
        tenant=cluster.tenant,
    )


def _title(problem: str) -> str:
    if len(problem) <= TITLE_CHARS:
        return problem
    cut = problem[:TITLE_CHARS].rsplit(" ", 1)[0]
    return f"{cut}…"


def _member_of(case: select.ClosedCase, distilled: Distilled) -> Member:
    """A newly mined case, before it is embedded."""
    return Member(
        conversation_id=case.conversation_id,
        closed_at=case.closed_at.isoformat(),
        problem=distilled.problem,
        steps=distilled.steps,
        outcome=distilled.outcome,
        csat=case.csat,
        message_ids=(*distilled.problem_ids, *distilled.step_ids),
        context=distilled.context,
        vector=np.zeros(0, dtype=np.float32),
        problem_vector=np.zeros(0, dtype=np.float32),
    )


def _member(case: dict[str, Any], vector: np.ndarray, problem: np.ndarray) -> Member:
    return Member(
        conversation_id=case["conversation_id"],
        closed_at=case["closed_at"],
        problem=case["problem"],
        steps=tuple(case["steps"]),
        outcome=case.get("outcome"),
        csat=case.get("csat"),
        message_ids=tuple(case.get("message_ids", ())),
        context=tuple(case.get("context", ())),
        vector=vector,
        problem_vector=problem,
    )


def _record(
    case: select.ClosedCase, now: datetime, outcome: str, reason: str | None, entry: str | None
) -> dict[str, Any]:
    return {
        "conversation_id": case.conversation_id,
        "tenant": case.tenant,
        "closed_at": case.closed_at,
        "mined_at": now,
        "outcome": outcome,
        "reason": reason,
        "entry_id": entry,
    }


async def _tenants_of(conn: AsyncConnection, conversation_ids: Sequence[str], entry_ids: Sequence[str]) -> set[str]:
    """The tenants of these mined cases and of these entries' cases: whose clusters a run must load."""
    found: set[str] = set()
    if conversation_ids:
        rows = await conn.execute(
            sa.select(MINED_CASE.c.tenant).where(MINED_CASE.c.conversation_id.in_(list(conversation_ids))).distinct()
        )
        found |= set(rows.scalars())
    if entry_ids:
        rows = await conn.execute(
            sa.select(CASE_VECTOR.c.tenant).where(CASE_VECTOR.c.entry_id.in_(list(entry_ids))).distinct()
        )
        found |= set(rows.scalars())
    return found


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    unit: np.ndarray = vector / norm if norm else vector
    return unit
