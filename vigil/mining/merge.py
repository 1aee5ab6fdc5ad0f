"""Merging, not piling up: each mined case joins the entry whose problem is nearest to its own, when near enough,
instead of becoming one more entry that says the same thing.

An entry is a cluster of cases (``Cluster``). A case's vector is the mean of its problem's and its resolution's (the
miner's); an entry's is the normalised mean of its cases'. A new case joins the nearest cluster of its tenant at
cosine ``merge_similarity`` or more (the threshold measured on the team's tune company, docs/evaluation.md), else it
starts its own. The entry states the **best-supported
resolution**: that of the case whose resolution agrees with most of the others' (the medoid by word overlap). A case
whose resolution takes the opposite stance on a decision (``vigil.mining.stances``: money back, a fee, liability) is a
**conflict**: two analysts resolved the same problem differently, and the entry waits for a lead's review instead of
serving either. With ``conflict_similarity`` above 0, a resolution sharing fewer of its words than that is one too.

Resolutions are compared for conflicts by what they decide, not by their vectors: embeddings place "the fee is
refundable" and "the fee is not refundable" side by side (which is why such cases do merge, and are then caught). Nor
by their words alone: two wordings of one answer share as few words as two answers do (docs/evaluation.md).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from vigil.mining.stances import opposed

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP = frozenset(
    "a an the and or but if of to in on at by for with from is are was were be been do does did i you we my your "
    "our it this that can could would will how what when where why which who me us please hi hello there so as "
    "just then now also any all some have has had get got not no yes ok okay thanks thank let know see".split()
)
_TWIN_CLUSTERS = 3
"""How many of the nearest clusters a repeated case's original is looked for in."""
_NEGATION = frozenset({"not", "no", "never", "cannot", "can't", "won't", "isn't", "aren't", "don't", "doesn't"})


@dataclass(slots=True)
class Member:
    """One mined case in an entry: what it taught (redacted), its vector (problem and resolution) and its problem's."""

    conversation_id: str
    closed_at: str
    problem: str
    steps: tuple[str, ...]
    outcome: str | None
    csat: int | None
    message_ids: tuple[str, ...]
    context: tuple[str, ...]
    vector: np.ndarray
    problem_vector: np.ndarray
    repeats: tuple[str, ...] = ()
    """Later cases that repeat this one (the same customer text and resolution, or near-identical, within the
    window): counted here once, not as cases of their own (``Clusters.twin``)."""

    @property
    def answer(self) -> str:
        """What an entry that states this case's resolution answers: its steps (its outcome when it has none)."""
        return " ".join(self.steps) or (self.outcome or "")

    @property
    def passage(self) -> str:
        """The text of the passage an entry of this case alone holds: the problem, then the answer."""
        return passage_text(self.problem, self.answer)

    def vectors(self) -> tuple[tuple[str, np.ndarray], tuple[str, np.ndarray]]:
        """The texts this case's vectors are of: its problem, and its passage."""
        return (self.problem, self.problem_vector), (self.passage, self.vector)

    @property
    def resolution(self) -> str:
        """The steps, then the outcome: what the case says resolves the problem."""
        return " ".join([*self.steps, *([self.outcome] if self.outcome else [])])

    def provenance(self) -> dict[str, object]:
        return {
            "conversation_id": self.conversation_id,
            "closed_at": self.closed_at,
            "problem": self.problem,
            "steps": list(self.steps),
            "outcome": self.outcome,
            "csat": self.csat,
            "message_ids": list(self.message_ids),
            "context": list(self.context),
            **({"repeats": list(self.repeats)} if self.repeats else {}),
        }

    @property
    def shingles(self) -> frozenset[tuple[str, str]]:
        """The case's problem and answer as pairs of adjacent words (case, spacing and punctuation ignored): what
        two copies of one chat share all of, and two customers' own words of one problem little of."""
        return _shingles(f"{self.problem}\n{self.answer}")


@dataclass(slots=True)
class Cluster:
    """The cases of one entry."""

    entry_id: str
    tenant: str
    members: list[Member] = field(default_factory=list)
    status: str | None = None
    """What is stored for the entry (None: not stored yet); a lead's approval or retirement is kept."""
    reviewed: frozenset[str] = frozenset()
    """The conflicts (cases and rival entries) the entry had when last written: a lead who approved it then has
    seen them, so only a new one sends it back for review."""
    accepted: int = 0
    dismissed: int = 0
    """Analysts' verdicts on answers drawn from the entry (vigil/mining/feedback.py)."""
    superseded_by: str | None = None
    """The FAQ that states this entry's answer with others' (``faqs.py``): the entry is kept but not served."""
    subsumes: tuple[str, ...] = ()
    """The entries this one, as an FAQ, supersedes."""
    faq_since: str | None = None
    """When the miner first wrote the entry as an FAQ (ISO 8601; None while it is not one): the lead's learning
    curve counts FAQs from then."""
    changed: bool = False

    @property
    def centroid(self) -> np.ndarray:
        """Where the entry's cases are, problem and resolution together: what a new case is compared with."""
        return _unit_mean([m.vector for m in self.members])

    def kept(self) -> Member:
        """The case whose resolution the most others agree with (ties: the earliest): the entry's resolution."""
        return kept_of(self.members)

    @property
    def problem_centroid(self) -> np.ndarray:
        """Where the entry's customers' problems are: what tells two entries for one problem."""
        return _unit_mean([m.problem_vector for m in self.members])

    def disagrees(self, other: Cluster, threshold: float) -> bool:
        """Whether this entry's resolution and ``other``'s disagree (``disagree``)."""
        return disagree(self.kept().resolution, other.kept().resolution, threshold)

    def conflicts(self, threshold: float) -> list[Member]:
        """The cases whose resolution disagrees with the kept one."""
        kept = self.kept()
        return [m for m in self.members if m is not kept and disagree(kept.resolution, m.resolution, threshold)]


class Clusters:
    """A tenant's entries as clusters, with their centroids in one matrix for the nearest-cluster search."""

    def __init__(self, clusters: Iterable[Cluster] = ()) -> None:
        self._clusters: list[Cluster] = list(clusters)
        self._centroids = np.zeros((0, 0), dtype=np.float32)
        for n, cluster in enumerate(self._clusters):
            self._put(n, cluster.centroid)

    def _put(self, index: int, centroid: np.ndarray) -> None:
        """Set a cluster's centroid, growing the matrix (to the vectors' size, then by doubling) as needed."""
        if self._centroids.shape[1] != centroid.shape[0]:
            self._centroids = np.zeros((16, centroid.shape[0]), dtype=np.float32)
        while index >= len(self._centroids):
            self._centroids = np.concatenate([self._centroids, np.zeros_like(self._centroids)])
        self._centroids[index] = centroid

    def __iter__(self) -> Iterator[Cluster]:
        return iter(self._clusters)

    def __len__(self) -> int:
        return len(self._clusters)

    def nearest(self, vector: np.ndarray) -> tuple[int, float]:
        """The index of the cluster whose problem is nearest ``vector``, and the cosine (-1, 0 when none)."""
        if not self._clusters:
            return -1, 0.0
        sims = self._centroids[: len(self._clusters)] @ vector
        best = int(np.argmax(sims))
        return best, float(sims[best])

    def add(self, member: Member, *, entry_id: str, tenant: str, threshold: float) -> Cluster:
        """Put ``member`` in the nearest cluster at ``threshold`` or more, or in a new one (``entry_id``)."""
        index, similarity = self.nearest(member.vector)
        if index < 0 or similarity < threshold:
            index = len(self._clusters)
            self._clusters.append(Cluster(entry_id=entry_id, tenant=tenant))
        cluster = self._clusters[index]
        cluster.members.append(member)
        cluster.changed = True
        self._put(index, cluster.centroid)
        return cluster

    def rivalries(self, *, problem_similarity: float, threshold: float) -> list[tuple[Cluster, Cluster]]:
        """Pairs of a changed entry and another entry for the same problem (their customers' problems at
        ``problem_similarity`` or more) whose resolutions disagree: two entries that must not both be served.
        Retired entries and entries with no case left are nobody's rivals."""
        live = [c for c in self._clusters if c.members and c.status != "retired"]
        if not live:
            return []
        problems = np.stack([c.problem_centroid for c in live])
        pairs = []
        for i, cluster in enumerate(live):
            if not cluster.changed:
                continue
            for j in np.flatnonzero(problems @ problems[i] >= problem_similarity):
                other = live[int(j)]
                if other is not cluster and cluster.disagrees(other, threshold):
                    pairs.append((cluster, other))
        return pairs

    def withdraw(self, conversation_id: str) -> Cluster | None:
        """Take a case out of its cluster (it was reopened), or off the repeats of the case it repeated; the cluster
        it left, or None."""
        for n, cluster in enumerate(self._clusters):
            for member in cluster.members:
                if member.conversation_id == conversation_id:
                    cluster.members.remove(member)
                    cluster.changed = True
                    self._centroids[n] = cluster.centroid if cluster.members else 0.0
                    return cluster
                if conversation_id in member.repeats:
                    member.repeats = tuple(c for c in member.repeats if c != conversation_id)
                    cluster.changed = True
                    return cluster
        return None

    def twin(self, member: Member, *, similarity: float, window: timedelta) -> tuple[Cluster, Member] | None:
        """A case ``member`` repeats, and its cluster: one closed within ``window`` of it whose problem and answer
        are near-identical in words (the Jaccard similarity of their ``shingles`` at ``similarity`` or more; a
        copy of a chat, or a copy with a name or a number changed). A twin's cluster is among the nearest few (its
        vector is, near enough, one of theirs), so a few hundred cases are compared at most; None when none is."""
        if not self._clusters:
            return None
        closed = datetime.fromisoformat(member.closed_at)
        mine = member.shingles
        sims = self._centroids[: len(self._clusters)] @ member.vector
        few = min(_TWIN_CLUSTERS, len(sims))
        for index in np.argpartition(-sims, few - 1)[:few]:  # the nearest few, without sorting every cluster
            cluster = self._clusters[int(index)]
            for other in cluster.members:
                if abs(datetime.fromisoformat(other.closed_at) - closed) > window:
                    continue
                theirs = other.shingles
                if len(mine & theirs) >= similarity * len(mine | theirs):
                    return cluster, other
        return None


@functools.lru_cache(maxsize=16_384)
def _shingles(text: str) -> frozenset[tuple[str, str]]:
    """``Member.shingles``, kept for the cases a run compares each new one with (the same few hundred, again)."""
    words = _WORD.findall(text.lower())
    return frozenset(itertools.pairwise(words)) or frozenset((w, "") for w in words)


def passage_text(problem: str, answer: str) -> str:
    """A mined entry's passage: the customer's problem on its first line, then the answer (what the answer skill
    quotes, as it does an FAQ's)."""
    return f"{problem}\n{answer}"


def content_words(text: str) -> frozenset[str]:
    """The words that carry a text's meaning (stop words out, negations kept), cut to 6 letters."""
    return frozenset(
        w[:6] if w not in _NEGATION else w for w in _WORD.findall(text.lower()) if w not in _STOP or w in _NEGATION
    )


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """How far two bags of words agree: shared words over the smaller bag's (1: one says all the other does)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def disagree(a: str, b: str, threshold: float) -> bool:
    """Two resolutions disagree: they take opposite stances on a decision ("the fee is not refundable" against
    "I've refunded the fee", ``stances.opposed``), or they share fewer than ``threshold`` of their words (0: never
    by their words alone)."""
    if opposed(a, b) is not None:
        return True
    return threshold > 0 and overlap(content_words(a), content_words(b)) < threshold


def _unit_mean(vectors: Sequence[np.ndarray]) -> np.ndarray:
    mean = np.mean(vectors, axis=0)
    norm = float(np.linalg.norm(mean))
    unit: np.ndarray = mean / norm if norm else mean
    return unit


def kept_of(members: Sequence[Member]) -> Member:
    """Of these cases, the one whose resolution the most others agree with (the medoid by word overlap; ties: the
    earliest); of two, the more detailed."""
    if len(members) <= 2:
        return members[0] if len(members) == 1 else max(members, key=_detail)
    bags = [content_words(m.resolution) for m in members]
    support = [sum(overlap(a, b) for j, b in enumerate(bags) if j != i) for i, a in enumerate(bags)]
    return members[max(range(len(members)), key=lambda i: (support[i], -i))]


def _detail(member: Member) -> tuple[int, int]:
    return (len(member.steps), len(member.resolution))


def representative(members: Sequence[Member]) -> Member:
    """The case whose problem is nearest the cluster's centre: the entry's question."""
    mean = np.mean([m.vector for m in members], axis=0)
    return max(members, key=lambda m: float(m.vector @ mean))
