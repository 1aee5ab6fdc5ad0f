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
from vigil.flow.leases import Holder, Lease
from vigil.flow.scheduler import replica_id
from vigil.knowledge.documents import Entry, Passage
from vigil.knowledge.store import MINED, EntryStatus, Governance, KnowledgeStore
from vigil.knowledge.tables import ENTRY, FAQ_SINCE, SUPERSEDED_BY
from vigil.mining import edits, faqs, feedback, replies, select
from vigil.mining.distil import Distilled, distil
from vigil.mining.merge import Cluster, Clusters, Member, passage_text, representative
from vigil.mining.settings import MinerSettings
from vigil.mining.tables import CASE_VECTOR, MINED_CASE

if TYPE_CHECKING:
    from vigil.mining.redact import Redactor
    from vigil.mining.rewrite import Rewriter

log = logging.getLogger(__name__)

SOURCE = MINED
"""The ``origin`` of every mined entry."""
LEASE = "miner"
"""The lease a run holds: one miner at a time, whoever started it."""
MAX_QUESTIONS = 10
"""The most customer phrasings a mined FAQ keeps as its question and alternates."""
TITLE_CHARS = 160
REPEAT = "repeat"
"""The reason a case mined as a repeat of another is recorded with (``mined_case.reason``)."""


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
    edits: int = 0
    """Analysts' edits of answers proposed as FAQs for review (``vigil.mining.edits``)."""
    repeats: int = 0
    """Cases that repeated one already counted (``Clusters.twin``): recorded on it, not counted again."""
    replies: int = 0
    """Analysts' replies to questions vigil did not answer proposed as FAQs for review (``vigil.mining.replies``)."""
    busy: Holder | None = None
    """Who was mining already, when this run found the miner's lease taken and mined nothing."""

    def add(self, other: Report) -> None:
        self.mined += other.mined
        self.rewritten += other.rewritten
        self.skipped.update(other.skipped)
        self.withdrawn += other.withdrawn
        self.entries.update(other.entries)
        self.merged += other.merged
        self.edits += other.edits
        self.repeats += other.repeats
        self.replies += other.replies

    def summary(self) -> str:
        if self.busy is not None:
            return (
                f"nothing mined: another miner ({self.busy.owner}) holds the lease until "
                f"{self.busy.until.isoformat(timespec='seconds')}"
            )
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())) or "none"
        written = ", ".join(f"{n} {what}" for what, n in sorted(self.entries.items())) or "none"
        return (
            f"mined {self.mined} cases ({self.merged} merged into known problems); skipped: {skipped}; "
            f"withdrawn: {self.withdrawn}; entries written: {written}"
            + (f"; {self.rewritten} rewritten by the LLM" if self.rewritten else "")
            + (f"; {self.edits} analysts' edits proposed for review" if self.edits else "")
            + (f"; {self.repeats} repeats of cases already counted" if self.repeats else "")
            + (f"; {self.replies} analysts' replies proposed for review" if self.replies else "")
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
        owner: str | None = None,
    ) -> None:
        self._settings = settings
        self._lease = Lease(engine, LEASE, owner=owner or replica_id(), clock=clock, duration_s=settings.lease_s)
        self._engine = engine
        self._knowledge = knowledge
        self._clock = clock
        self._redactor = redactor
        self._rewriter = rewriter

    async def run(self, now: datetime | None = None) -> Report:
        """Mine everything due at ``now`` (the clock's now by default), a batch at a time, holding the lease
        ``miner``; if another run holds it, mine nothing and say whose it is (``Report.busy``).

        Raises:
            LeaseLost: this run stalled past its lease and another took it; what this run had not yet written is
                left to that one.
        """
        now = now or self._clock.now()
        report = Report()
        report.busy = await self._lease.take()
        if report.busy is not None:
            return report
        try:
            while True:
                batch = await self._batch(now)
                report.add(batch)
                if batch.mined + sum(batch.skipped.values()) < self._settings.batch:
                    break
            report.edits = await self._propose_edits()
            return report
        finally:
            await self._free()

    async def _free(self) -> None:
        """Free the lease; if that fails, it runs out by itself (and the run's own outcome is what is raised)."""
        try:
            await self._lease.free()
        except Exception:
            log.warning(
                "the miner could not free its lease; it runs out in %s s", self._settings.lease_s, exc_info=True
            )

    async def _batch(self, now: datetime) -> Report:
        report = Report()
        lateness = timedelta(seconds=self._settings.lateness_s)
        async with self._engine.connect() as conn:
            reopened = await select.reopened(conn)
            cases = await select.due(conn, now=now, lateness=lateness, limit=self._settings.batch)
            verdicts = await feedback.since_mark(conn)
            answered = await replies.answers(conn, [c.conversation_id for c in cases]) if self._settings.replies else {}
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
        window = timedelta(days=self._settings.duplicate_window_days)
        repeated: set[str] = set()
        for case, member in taught:
            known = clusters.setdefault(case.tenant, Clusters())
            twin = known.twin(member, similarity=self._settings.duplicate_similarity, window=window)
            if twin is not None:  # a copy of a case already counted: a repeat in its provenance, no new support
                cluster, original = twin
                original.repeats = (*original.repeats, case.conversation_id)
                cluster.changed = True
                report.repeats += 1
                repeated.add(case.conversation_id)
                records.append(_record(case, now, "mined", REPEAT, cluster.entry_id))
                continue
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
        grouped = {faq.founder.entry_id: faq for known in clusters.values() for faq in self._faqs(known, rivals)}
        changed = [c for known in clusters.values() for c in known if c.changed]
        entries, governance = self._entries(changed, report, rivals, grouped)
        if self._settings.replies:
            proposed = await self._replies([c for c in cases if c.conversation_id not in repeated], answered)
            entries.extend(entry for entry, _ in proposed)
            governance.update((entry.id, g) for entry, g in proposed)
            report.replies = len(proposed)
        if entries or governance or records or reopened or verdicts.read:
            write = self._bookkeeping(changed, records, [r.conversation_id for r in reopened], verdicts)
            # The batch's vectors, by text: the store embeds only what they do not cover.
            embedded = {text: vector for _, m in taught for text, vector in m.vectors()}
            await self._knowledge.upsert(entries, governance=governance, also=write, embedded=embedded)
        return report

    async def _propose_edits(self) -> int:
        """Each analyst's edit of an answer since the last run, as an FAQ waiting for review; how many."""
        async with self._engine.connect() as conn:
            read = await edits.since_mark(conn)
        lease = self._lease

        async def write(conn: AsyncConnection) -> None:
            await lease.hold(conn)  # first: a run that lost the lease writes nothing
            await edits.mark_read(conn, read)

        if not read.found:
            if read.moved:  # all proposed already (read again in the overlap)
                async with self._engine.begin() as conn:
                    await write(conn)
            return 0
        proposed = [edits.candidate(edit, self._redact) for edit in read.found]
        await self._knowledge.upsert(
            [entry for entry, _ in proposed],
            governance={entry.id: governance for entry, governance in proposed},
            also=write,
        )
        return len(proposed)

    async def _replies(
        self, cases: Sequence[select.ClosedCase], answered: dict[tuple[str, str], replies.Answered]
    ) -> list[tuple[Entry, Governance]]:
        """The FAQs for review that analysts' replies in ``cases`` propose (``replies.py``), but those proposed
        already: a lead's decision on one stands."""
        found: dict[str, tuple[Entry, Governance]] = {}
        for case in cases:  # oldest closure first: a copy's candidate is the first one's
            for reply in replies.found(case, answered, min_words=self._settings.reply_min_words):
                entry, governance = replies.candidate(reply, self._redact)
                found.setdefault(entry.id, (entry, governance))
        if not found:
            return []
        async with self._engine.connect() as conn:
            proposed = set((await conn.execute(sa.select(ENTRY.c.id).where(ENTRY.c.id.in_(list(found))))).scalars())
        return [candidate for identity, candidate in found.items() if identity not in proposed]

    async def _taught(
        self, cases: Sequence[select.ClosedCase], now: datetime, report: Report, records: list[dict[str, Any]]
    ) -> list[tuple[select.ClosedCase, Member]]:
        """Each case distilled and redacted (then rewritten by the LLM, when one is configured, and redacted
        again), its problem embedded; a case too thin to teach is recorded skipped."""
        kept: list[tuple[select.ClosedCase, Distilled]] = []
        for case in cases:
            distilled = distil(case, terse_words=self._settings.terse_words)
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
            parallel = self._settings.embed_parallelism or 1
            vectors = np.asarray(await self._knowledge.embed_many(texts, parallel=parallel), dtype=np.float32)
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

    def _faqs(self, known: Clusters, rivals: dict[str, list[str]]) -> list[faqs.Faq]:
        """A tenant's FAQs of several entries (``faqs.py``), when any of its entries changed; each entry's part in
        them (an FAQ's founder, superseded by one, neither) set, and an entry whose part or whose FAQ changed marked
        changed, so that it is written again. Entries that wait for review for a disagreement keep FAQs away."""
        if not any(c.changed for c in known):
            return []
        served: list[Cluster] = []
        held: list[Cluster] = []
        for cluster in known:
            if not cluster.members or cluster.status == "retired":
                continue
            disputed = bool(rivals.get(cluster.entry_id)) or bool(cluster.conflicts(self._settings.conflict_similarity))
            # An entry waiting only for a lead's review may join an FAQ (whose cases together may be enough to serve
            # it); one waiting for a disagreement to be settled keeps FAQs away.
            if not disputed or self._status(cluster, rivals.get(cluster.entry_id, [])) == "active":
                served.append(cluster)
            else:
                held.append(cluster)
        found = faqs.group(
            served,
            held,
            similarity=self._settings.faq_similarity,
            agreement=self._settings.conflict_similarity,
            min_cases=self._settings.faq_min_cases,
        )
        parts: dict[str, tuple[str | None, tuple[str, ...]]] = {}
        for faq in found:
            parts[faq.founder.entry_id] = (None, tuple(c.entry_id for c in faq.others))
            parts.update({c.entry_id: (faq.founder.entry_id, ()) for c in faq.others})
            if any(c.changed for c in (faq.founder, *faq.others)):
                for cluster in (faq.founder, *faq.others):
                    cluster.changed = True
        for cluster in known:
            part = parts.get(cluster.entry_id, (None, ()))
            if part != (cluster.superseded_by, cluster.subsumes):
                cluster.superseded_by, cluster.subsumes = part
                cluster.changed = True
        return found

    def _entries(
        self,
        changed: Sequence[Cluster],
        report: Report,
        rivals: dict[str, list[str]],
        grouped: dict[str, faqs.Faq],
    ) -> tuple[list[Entry], dict[str, Governance]]:
        """The entries of the clusters that changed, and what to store of their status, confidence and
        provenance (an emptied cluster only retires its entry). An FAQ's founder states the whole group (its
        cases, their phrasings, their best-supported resolution); an entry it supersedes is kept, retired."""
        entries: list[Entry] = []
        governance: dict[str, Governance] = {}
        for cluster in changed:
            faq = grouped.get(cluster.entry_id)
            support = len(faq.members) if faq is not None else len(cluster.members)
            status = self._status(cluster, rivals.get(cluster.entry_id, []), support=support)
            # An FAQ states its whole group, and the analysts' verdicts on answers drawn from any of its entries
            # (before it formed, or from a superseded entry cited since) count towards it.
            whole = (
                cluster
                if faq is None
                else dataclasses.replace(
                    cluster,
                    members=faq.members,
                    accepted=sum(c.accepted for c in faq.clusters),
                    dismissed=sum(c.dismissed for c in faq.clusters),
                )
            )
            if cluster.superseded_by is not None:  # its FAQ states it, and is served or reviewed for it
                status = "retired"
                report.entries["superseded"] += 1
            elif status != "active":
                report.entries[status] += 1
            if cluster.members:
                entry = entry_of(whole, faq_min_cases=self._settings.faq_min_cases, status=status)
                entries.append(entry)
                report.entries[entry.kind] += 1
                if entry.kind != "faq":
                    cluster.faq_since = None
                elif cluster.faq_since is None:
                    cluster.faq_since = self._clock.now().isoformat()
            governance[cluster.entry_id] = Governance(
                status=status,
                confidence=self._confidence(whole),
                provenance=self._provenance(cluster, whole, rivals.get(cluster.entry_id, [])),
                expires_at=self._expiry(whole),
            )
        return entries, governance

    def _bookkeeping(
        self,
        changed: Sequence[Cluster],
        records: list[dict[str, Any]],
        withdrawn: list[str],
        verdicts: feedback.Verdicts,
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
            await self._lease.hold(conn)  # first: a run that lost the lease writes nothing
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
            await feedback.mark_counted(conn, verdicts)
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

    def _status(self, cluster: Cluster, rivals: Sequence[str], *, support: int | None = None) -> EntryStatus:
        """Retired once no case supports it or a lead retired it; waiting for review when its cases disagree or
        another entry for the same problem says otherwise (unless a lead approved it knowing those), or when mined
        entries must be reviewed and neither a lead has approved it nor ``serve_at_cases`` agreeing cases support
        it (``support``: how many cases an FAQ's group holds); otherwise served."""
        if not cluster.members or cluster.status == "retired":
            return "retired"
        conflicts = {m.conversation_id for m in cluster.conflicts(self._settings.conflict_similarity)} | set(rivals)
        if conflicts and not (cluster.status == "active" and conflicts <= cluster.reviewed):
            return "pending_review"
        if cluster.status == "active" or not self._settings.require_review:
            return "active"
        enough = self._settings.serve_at_cases
        cases = len(cluster.members) if support is None else support
        return "active" if enough and cases >= enough else "pending_review"

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

    def _provenance(self, cluster: Cluster, whole: Cluster, rivals: Sequence[str]) -> dict[str, Any]:
        """Where the entry came from: its cases (an FAQ's: every case of its group; the miner's table says which
        are the entry's own), what it states, its conflicts and feedback, and its part in an FAQ."""
        conflicts = cluster.conflicts(self._settings.conflict_similarity) if cluster.members else []
        return {
            "source": SOURCE,
            "support": len(whole.members),
            "repeats": sum(len(m.repeats) for m in whole.members),
            "kept": whole.kept().conversation_id if whole.members else None,
            "conflicts": [m.conversation_id for m in conflicts],
            "conflicts_with": list(rivals),
            "feedback": {"accepted": cluster.accepted, "dismissed": cluster.dismissed},
            "cases": [m.provenance() for m in whole.members],
            **({"subsumes": list(cluster.subsumes)} if cluster.subsumes else {}),
            **({FAQ_SINCE: cluster.faq_since} if cluster.faq_since and cluster.members else {}),
            **({SUPERSEDED_BY: cluster.superseded_by} if cluster.superseded_by else {}),
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
                provenance = row.provenance or {}
                # An FAQ's provenance lists its whole group's cases: an entry's own are those the table gives it.
                members = [
                    _member(c, *vectors[c["conversation_id"]][1:])
                    for c in provenance.get("cases", [])
                    if c["conversation_id"] in vectors and vectors[c["conversation_id"]][0] == row.id
                ]
                if members:
                    said = provenance.get("feedback", {})
                    superseded_by = provenance.get(SUPERSEDED_BY)
                    clusters.append(
                        Cluster(
                            entry_id=row.id,
                            tenant=tenant,
                            members=members,
                            # A superseded entry was served when its FAQ took it over, and is again if that goes.
                            status="active" if superseded_by and row.status == "retired" else row.status,
                            reviewed=frozenset(provenance.get("conflicts", []) + provenance.get("conflicts_with", [])),
                            accepted=said.get("accepted", 0),
                            dismissed=said.get("dismissed", 0),
                            superseded_by=superseded_by,
                            subsumes=tuple(provenance.get("subsumes", ())),
                            faq_since=provenance.get(FAQ_SINCE),
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
        repeats=tuple(case.get("repeats", ())),
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
