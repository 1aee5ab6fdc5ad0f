"""The knowledge review: what a lead is shown of an entry to decide whether vigil serves it.

A mined entry (written by the miner, ``vigil/mining/miner.py``) carries its provenance: the cases it was distilled
from, the one whose resolution it states (``kept``, the best-supported), the cases that resolved the same problem
otherwise (``conflicts``), and the other entries for the same problem whose resolution disagrees (``conflicts_with``),
for which it waits for review rather than serving either answer. ``Reviewed`` is that provenance read for people:
each case with its customer's problem, the steps the analyst gave, the outcome, the rating and a link to its
conversation; the kept resolution set against each conflicting case's and each rival entry's. An imported entry has
no cases: it is shown by its own text.

What the page lists: ``LISTS`` says which entries each of its tabs holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from vigil.knowledge.store import EDITED, MINED, REPLIED, EntryStatus
from vigil.knowledge.tables import SUPERSEDED_BY
from vigil.panel.display import Display

LIMIT = 100
"""The most entries one tab lists: the newest changes."""


@dataclass(frozen=True, slots=True)
class ReviewList:
    """One tab of the review page: the entries of a status (only mined ones, or any)."""

    status: EntryStatus
    label: str
    mined_only: bool
    empty: str


LISTS: dict[str, ReviewList] = {
    # Anything waiting, whoever wrote it; served and retired: mined entries only (the help centre is not reviewed).
    "pending_review": ReviewList("pending_review", "Waiting for review", False, "Nothing waits for review."),
    "active": ReviewList("active", "Served", True, "No mined entry is served yet."),
    "retired": ReviewList("retired", "Retired", True, "No mined entry has been retired."),
}
STATUS_LABELS: dict[str, str] = {
    "active": "Served to analysts",
    "pending_review": "Waiting for review (not served)",
    "retired": "Retired (not served)",
}


@dataclass(frozen=True, slots=True)
class CaseCited:
    """One case an entry was mined from, as its provenance records it (already redacted by the miner)."""

    conversation_id: str
    href: str
    closed: str | None
    """When it closed, in the display of the entry's tenant; None if unknown."""
    problem: str
    steps: tuple[str, ...]
    outcome: str | None
    csat: int | None
    kept: bool
    """Its resolution is the one the entry states."""
    conflicting: bool
    """It resolved the same problem otherwise."""


@dataclass(frozen=True, slots=True)
class Reviewed:
    """An entry as the review page and the knowledge page show it."""

    id: str
    kind: str
    title: str
    body: str
    tenant: str | None
    status: str
    confidence: float
    mined: bool
    support: int
    accepted: int
    dismissed: int
    cases: tuple[CaseCited, ...]
    updated: str
    expires: str | None
    """When it stops being served, in the display; None: never."""
    expired: bool
    rivals: tuple[Reviewed, ...] = ()
    """The other entries for the same problem that say otherwise (those the reader may see)."""
    superseded_by: str | None = None
    """The mined FAQ that states this entry's answer with other cases' (``vigil/mining/faqs.py``): it serves
    instead of this entry, which comes back if the FAQ's group falls apart."""
    proposed: str | None = None
    """What an FAQ proposed from an analyst's own words was taken from ("sam.k's reply to a question vigil did not
    answer"); None for any other entry."""

    @property
    def status_label(self) -> str:
        if self.expired and self.status == "active":
            return "Expired (not served)"
        if self.superseded_by is not None and self.status == "retired":
            return "Part of an FAQ (served as the FAQ)"
        return STATUS_LABELS.get(self.status, self.status)

    @property
    def kept(self) -> CaseCited | None:
        """The case whose resolution the entry states."""
        return next((c for c in self.cases if c.kept), None)

    @property
    def conflicts(self) -> tuple[CaseCited, ...]:
        """The cases whose resolution disagrees with the one stated."""
        return tuple(c for c in self.cases if c.conflicting)


def rival_ids(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The entries these entries' provenance says disagree with them: to be read alongside them."""
    return sorted({str(i) for row in rows for i in (row.get("provenance") or {}).get("conflicts_with") or ()})


def reviewed(
    row: Mapping[str, Any], display: Display, now: datetime, rivals: Mapping[str, Reviewed] | None = None
) -> Reviewed:
    """An entry as ``KnowledgeStore.governed`` gives it, read for people at ``now``; times in ``display``;
    ``rivals``, by id, the entries it may name as disagreeing with it (those it names but that are not there are left
    out)."""
    expires_at = row.get("expires_at")
    provenance: Mapping[str, Any] = row.get("provenance") or {}
    mined = row.get("origin") == MINED or provenance.get("source") == MINED
    kept = provenance.get("kept")
    conflicts = set(provenance.get("conflicts") or ())
    cases = tuple(_case(c, kept, conflicts, display) for c in provenance.get("cases") or () if c.get("conversation_id"))
    feedback: Mapping[str, Any] = provenance.get("feedback") or {}
    stated = next((c for c in cases if c.kept), None)
    return Reviewed(
        id=row["id"],
        kind=row["kind"],
        # Cases that disagree: headed by the problem of the case whose resolution it states (the entry's own title
        # may be another case's wording), so that each problem is read with its own resolution.
        title=stated.problem if conflicts and stated is not None and stated.problem else row["title"],
        body=row["body"],
        tenant=row.get("tenant"),
        status=row["status"],
        confidence=float(row["confidence"]),
        mined=mined,
        support=int(provenance.get("support", len(cases))),
        accepted=int(feedback.get("accepted", 0)),
        dismissed=int(feedback.get("dismissed", 0)),
        cases=cases,
        updated=_when(row.get("updated_at"), display) or "",
        expires=_when(expires_at, display),
        expired=isinstance(expires_at, datetime) and expires_at <= now,
        rivals=tuple(rivals[i] for i in provenance.get("conflicts_with") or () if rivals and i in rivals),
        superseded_by=str(provenance[SUPERSEDED_BY]) if provenance.get(SUPERSEDED_BY) else None,
        proposed=_proposed(provenance),
    )


_PROPOSED = {
    (EDITED, None): "edit of vigil's answer",
    (REPLIED, "silent"): "reply to a question vigil did not answer",
    (REPLIED, "dismissed"): "reply after vigil's answer was dismissed",
}


def _proposed(provenance: Mapping[str, Any]) -> str | None:
    """Whose words, and which, an FAQ proposed from what an analyst wrote was taken from."""
    origin = str(provenance.get("source"))
    source = provenance.get(origin) if origin in (EDITED, REPLIED) else None
    if not isinstance(source, Mapping):
        return None
    said = source.get("vigil") if origin == REPLIED else None
    what = _PROPOSED.get((origin, str(said) if said is not None else None))
    if what is None:
        return None
    return f"{source['by']}'s {what}" if source.get("by") else f"an analyst's {what}"


def case_href(conversation_id: str) -> str:
    """The panel page of a conversation (its id in one path segment, whatever it holds)."""
    return f"/panel/conversations/{quote(conversation_id, safe='')}"


def _case(case: Mapping[str, Any], kept: str | None, conflicts: set[str], display: Display) -> CaseCited:
    cid = str(case["conversation_id"])
    csat = case.get("csat")
    return CaseCited(
        conversation_id=cid,
        href=case_href(cid),
        closed=_when(case.get("closed_at"), display),
        problem=str(case.get("problem") or ""),
        steps=tuple(str(s) for s in _strings(case.get("steps"))),
        outcome=case.get("outcome") or None,
        csat=int(csat) if isinstance(csat, int | float) else None,
        kept=cid == kept,
        conflicting=cid in conflicts,
    )


def _strings(value: object) -> Sequence[object]:
    return value if isinstance(value, list | tuple) else ()


def _when(value: object, display: Display) -> str | None:
    """A stored time (a datetime, or ISO text in provenance) as the display writes it."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, datetime):
        return None
    return display.stamp(value if value.tzinfo else value.replace(tzinfo=UTC))
