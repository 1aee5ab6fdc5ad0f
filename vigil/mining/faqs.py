"""FAQs from entries that say the same thing: a second, looser grouping of a tenant's mined entries, for FAQs only.

The miner's first merge (``merge.py``) keeps problems apart by placing a case only near an entry's centre, and so a
problem resolved in several wordings ends in several entries, none of them with the cases an FAQ needs. Here the
entries are grouped again by **average linkage** of their cases' vectors (problem and resolution together): two
groups join when their cases are, on average, at ``similarity`` or more. An average over every pair of cases does not
chain one problem into the next as a centre does (the union of two groups is never nearer a third than the nearer of
the two was); at a looser threshold than the first merge's it mixed no problems on either of the team's companies,
where the first merge at such thresholds did. On the tune company's entries the
customers' problems alone told the entries of one problem from the rest far worse (docs/evaluation.md).

Their answers are then checked for agreement: two groups whose best-supported resolutions disagree
(``merge.disagree``) do not join. Only entries the miner serves take part, and a group near an entry that waits for
review for a disagreement (its cases', or a rival entry's) is no FAQ: a problem resolved in contradicting ways waits
for a lead, not on a fast path. (A disagreement between two groups does not keep them from being FAQs: the word
overlap that ``disagree`` measures tells different wordings of one answer from contradicting answers no better than
it tells different problems apart, and it would have kept every FAQ of the tune company away; docs/evaluation.md.)

A group of several entries with at least ``min_cases`` cases is an FAQ: its **founder** (the
entry of its earliest case, so that its id does not change as later cases join) becomes the FAQ, and the other
entries are **superseded** by it (kept, not served) for as long as the group holds.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vigil.mining.merge import Cluster, Member, disagree, kept_of


@dataclass(frozen=True, slots=True)
class Faq:
    """A group of entries that makes one FAQ: the founder's entry becomes it, the others are superseded."""

    founder: Cluster
    others: tuple[Cluster, ...]

    @property
    def clusters(self) -> tuple[Cluster, ...]:
        """The group's entries, the founder first."""
        return (self.founder, *self.others)

    @property
    def members(self) -> list[Member]:
        """Every case of the group, the founder's first."""
        return [m for c in self.clusters for m in c.members]


def group(
    served: Sequence[Cluster],
    held: Sequence[Cluster],
    *,
    similarity: float,
    agreement: float,
    min_cases: int,
) -> list[Faq]:
    """The FAQs among a tenant's entries.

    Args:
        served: the entries the miner serves (no conflict, not waiting for review, not retired): what may group.
        held: the tenant's other live entries (waiting for review): a group near one of them is no FAQ.
        similarity: the average cosine, over every pair of their cases, at which two groups are one problem.
        agreement: two groups' resolutions sharing fewer words than this disagree (``merge.disagree``).
        min_cases: the cases a group needs to be an FAQ.
    """
    clusters = [*served, *held]
    if len(served) < 2:
        return []
    sums = np.stack([np.sum([m.vector for m in c.members], axis=0) for c in clusters])
    sizes = np.array([len(c.members) for c in clusters], dtype=np.float32)
    parts: dict[int, list[int]] = {i: [i] for i in range(len(clusters))}
    alive = np.ones(len(clusters), dtype=bool)
    disputed: set[int] = set()
    heap = _pairs(sums, sizes, len(served), similarity)
    while heap:
        link, a, b = heapq.heappop(heap)
        if not (alive[a] and alive[b]) or abs(-link - _link(sums, sizes, a, b)) > 1e-5:
            continue  # a side has grown since: its pair with the other was queued again with its new linkage
        if b >= len(served):
            disputed.update(parts[a], parts[b])
            continue
        if disagree(_kept(clusters, parts[a]), _kept(clusters, parts[b]), agreement):
            continue  # two answers that do not agree stay apart; each group may still be an FAQ of its own
        parts[a] += parts.pop(b)
        alive[b] = False
        sums[a] += sums[b]
        sizes[a] += sizes[b]
        _queue(heap, sums, sizes, alive, a, similarity)
    return [
        _faq([clusters[i] for i in part])
        for _, part in sorted(parts.items())
        if len(part) > 1 and disputed.isdisjoint(part) and sum(len(clusters[i].members) for i in part) >= min_cases
    ]


def _pairs(sums: np.ndarray, sizes: np.ndarray, served: int, similarity: float) -> list[tuple[float, int, int]]:
    """The first groups' pairs at ``similarity`` or more, as a heap (nearest first): each pair of a served group
    with a later group once, from one matrix product (a tenant's thousands of entries, every run)."""
    links = (sums[:served] @ sums.T) / np.outer(sizes[:served], sizes)
    first, second = np.nonzero(np.triu(links >= similarity, k=1))
    heap = [(-float(links[a, b]), int(a), int(b)) for a, b in zip(first, second, strict=True)]
    heapq.heapify(heap)
    return heap


def _queue(
    heap: list[tuple[float, int, int]],
    sums: np.ndarray,
    sizes: np.ndarray,
    alive: np.ndarray,
    a: int,
    similarity: float,
) -> None:
    """Queue the pairs of ``a`` (a group that just grew) at ``similarity`` or more with the other groups, nearest
    first; a pair is written smaller index first, so that a group that waits for review (the indices after the
    served ones) is always its second."""
    links = (sums @ sums[a]) / (sizes * sizes[a])
    for b in np.flatnonzero((links >= similarity) & alive):
        if b != a:
            heapq.heappush(heap, (-float(links[b]), min(a, int(b)), max(a, int(b))))


def _link(sums: np.ndarray, sizes: np.ndarray, a: int, b: int) -> float:
    """The mean cosine over every pair of a case of ``a`` and a case of ``b`` (their vectors are unit vectors)."""
    return float(sums[a] @ sums[b]) / float(sizes[a] * sizes[b])


def _kept(clusters: Sequence[Cluster], part: Sequence[int]) -> str:
    return kept_of([m for i in part for m in clusters[i].members]).resolution


def _faq(clusters: Sequence[Cluster]) -> Faq:
    """The group with its founder: the entry of its earliest case (ties: the smallest conversation id)."""
    founder = min(clusters, key=lambda c: min((m.closed_at, m.conversation_id) for m in c.members))
    return Faq(founder=founder, others=tuple(sorted((c for c in clusters if c is not founder), key=_id)))


def _id(cluster: Cluster) -> str:
    return cluster.entry_id
