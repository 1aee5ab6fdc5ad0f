"""Analyst turns grouped into steps by their words, for procedures mined without step labels.

Pure and dependency-free: texts become sparse TF-IDF vectors (lower-cased words, every number one token ``<num>``,
so "balance is 5703" and "balance is 120" are the same step), and a leader pass groups them. The most frequent texts
go first, so a reply that analysts send again and again (a template) seeds its own group; each later text joins the
nearest group when its cosine similarity to the group's centre reaches ``threshold``, else starts one. One
reassignment pass against the final centres follows, and groups smaller than ``min_size`` are folded into their
nearest neighbour. The result is deterministic for the same input.

The nearest centre is found through ``Centres``, an inverted index that gives the same answer as comparing with
every centre but compares with few: a centre that shares none of a text's heaviest terms cannot come near it
(below).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

Vector = dict[str, float]
"""A sparse vector: term -> weight, unit length unless empty."""

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|\d+(?:[.,:]\d+)*")


def tokens(text: str) -> list[str]:
    """The words of ``text``, lower-cased, with every number as ``<num>``."""
    return ["<num>" if w[0].isdigit() else w for w in _WORD.findall(text.lower())]


def idf(documents: Iterable[Sequence[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of each term over ``documents`` (token lists)."""
    df: Counter[str] = Counter()
    n = 0
    for doc in documents:
        n += 1
        df.update(set(doc))
    return {t: math.log((1 + n) / (1 + c)) + 1.0 for t, c in df.items()}


def vector(words: Sequence[str], weights: Mapping[str, float]) -> Vector:
    """The unit TF-IDF vector of ``words``; terms without a weight are dropped (unseen when the weights were made)."""
    tf = Counter(w for w in words if w in weights)
    v = {t: c * weights[t] for t, c in tf.items()}
    return _unit(v)


def cosine(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Cosine similarity of two unit vectors."""
    if len(a) > len(b):
        a, b = b, a
    return sum(w * b.get(t, 0.0) for t, w in a.items())


def centre(vectors: Iterable[Mapping[str, float]], keep: int = 40) -> Vector:
    """The unit mean of ``vectors``, keeping its ``keep`` heaviest terms (enough to place a new text)."""
    total: Counter[str] = Counter()
    for v in vectors:
        total.update(v)
    return _unit(dict(total.most_common(keep)))


class Centres:
    """Centres, indexed by their terms, for the nearest one to a text: the same answer as comparing with every centre.

    Why it is exact: a centre that shares none of the terms ``P`` of a unit vector ``v`` has a cosine with it of at
    most the norm of ``v`` without ``P`` (Cauchy-Schwarz, a centre being of unit length). So the centres holding
    one of ``v``'s heaviest terms are compared first (the rare words, which weigh most), then more terms are taken in
    until the best of them beats what any centre not yet compared could reach. With thousands of centres (a chat
    room's varied replies) a text is compared with a handful instead of all, and each comparison is ``cosine``'s own.
    """

    def __init__(self, centres: Iterable[Mapping[str, float]] = ()) -> None:
        self._centres: list[Mapping[str, float]] = []
        self._holding: dict[str, set[int]] = {}
        for c in centres:
            self.append(c)

    def __len__(self) -> int:
        return len(self._centres)

    def __getitem__(self, k: int) -> Mapping[str, float]:
        return self._centres[k]

    def append(self, c: Mapping[str, float]) -> None:
        """Add a centre; it is numbered ``len(self) - 1``."""
        self._centres.append(c)
        for t in c:
            self._holding.setdefault(t, set()).add(len(self._centres) - 1)

    def replace(self, k: int, c: Mapping[str, float]) -> None:
        """Centre ``k`` moved to ``c``."""
        for t in self._centres[k]:
            self._holding[t].discard(k)
        self._centres[k] = c
        for t in c:
            self._holding.setdefault(t, set()).add(k)

    def nearest(self, v: Mapping[str, float], floor: float | None = None, *, last: bool = False) -> tuple[int, float]:
        """The centre most similar to ``v`` and its cosine, as a scan of every centre in order would find it: the
        first of equals (the last with ``last``); ``(-1, -1.0)`` without centres.

        With ``floor``, only a centre at ``floor`` or above is looked for: ``(-1, best)`` when there is none, where
        ``best`` is below ``floor`` (and need not be the best of all).
        """
        if not self._centres:
            return -1, -1.0
        best, sim = self._scan(v, floor, last)
        return (best, sim) if floor is None or sim >= floor else (-1, sim)

    def _scan(self, v: Mapping[str, float], floor: float | None, last: bool) -> tuple[int, float]:
        terms = sorted(v, key=lambda t: -v[t])
        rest = [0.0] * (len(terms) + 1)  # rest[i]: the norm of v without its i heaviest terms
        for i in range(len(terms) - 1, -1, -1):
            rest[i] = math.sqrt(rest[i + 1] ** 2 + v[terms[i]] ** 2)
        best, sim = -1, -1.0
        seen: set[int] = set()
        for i, t in enumerate(terms):
            for k in self._holding.get(t, ()):
                if k in seen:
                    continue
                seen.add(k)
                s = cosine(v, self._centres[k])
                if s > sim or (s == sim and (k > best if last else k < best)):
                    best, sim = k, s
            bound = rest[i + 1] + 1e-9  # the most a centre not yet compared could reach (and rounding)
            if sim > bound or (floor is not None and bound < floor):
                return best, sim
        if sim > 0.0:
            return best, sim
        # No centre shares a term: every cosine is 0, and a scan keeps the first (or the last) centre.
        return (len(self._centres) - 1 if last else 0), 0.0


def cluster(texts: Sequence[str], threshold: float = 0.5, min_size: int = 2) -> list[int]:
    """Group ``texts`` by their words; returns each text's group number, groups numbered by size (0 the largest).

    Args:
        texts: the analyst turns of one procedure.
        threshold: the cosine similarity to a group's centre at which a text joins it.
        min_size: a group with fewer members is folded into its nearest group (when there is another).
    """
    if not texts:
        return []
    words = [tokens(t) for t in texts]
    weights = idf(words)
    vecs = [vector(w, weights) for w in words]
    by_freq = Counter(texts)
    order = sorted(range(len(texts)), key=lambda i: (-by_freq[texts[i]], texts[i], i))
    centres = Centres()
    members: list[list[int]] = []
    for i in order:
        best, _ = centres.nearest(vecs[i], threshold)
        if best >= 0:
            members[best].append(i)
            if len(members[best]) <= 20:  # the centre settles after a few members; later ones hardly move it
                centres.replace(best, centre(vecs[j] for j in members[best]))
        else:
            centres.append(vecs[i])
            members.append([i])
    assign = [centres.nearest(v)[0] for v in vecs]
    assign = _fold_small(assign, vecs, min_size)
    sizes = Counter(assign)
    rank = {g: r for r, (g, _) in enumerate(sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])))}
    return [rank[g] for g in assign]


def _fold_small(assign: list[int], vecs: Sequence[Vector], min_size: int) -> list[int]:
    sizes = Counter(assign)
    big = sorted(g for g, n in sizes.items() if n >= min_size)
    if not big or len(big) == len(sizes):
        return assign
    big_centres = Centres(centre(vecs[i] for i, g in enumerate(assign) if g == b) for b in big)
    out = []
    for i, g in enumerate(assign):
        out.append(g if sizes[g] >= min_size else big[max(big_centres.nearest(vecs[i])[0], 0)])
    return out


def _unit(v: dict[str, float]) -> Vector:
    norm = math.sqrt(sum(w * w for w in v.values()))
    return {t: w / norm for t, w in v.items()} if norm else {}
