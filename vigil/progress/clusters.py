"""Analyst turns grouped into steps by their words, for procedures mined without step labels.

Pure and dependency-free: texts become sparse TF-IDF vectors (lower-cased words, every number one token ``<num>``,
so "balance is 5703" and "balance is 120" are the same step), and a leader pass groups them. The most frequent texts
go first, so a reply that analysts send again and again (a template) seeds its own group; each later text joins the
nearest group when its cosine similarity to the group's centre reaches ``threshold``, else starts one. One
reassignment pass against the final centres follows, and groups smaller than ``min_size`` are folded into their
nearest neighbour. The result is deterministic for the same input.
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
    centres: list[Vector] = []
    members: list[list[int]] = []
    for i in order:
        best, sim = _nearest(vecs[i], centres)
        if best >= 0 and sim >= threshold:
            members[best].append(i)
            if len(members[best]) <= 20:  # the centre settles after a few members; later ones hardly move it
                centres[best] = centre(vecs[j] for j in members[best])
        else:
            centres.append(vecs[i])
            members.append([i])
    assign = [_nearest(v, centres)[0] for v in vecs]
    assign = _fold_small(assign, vecs, min_size)
    sizes = Counter(assign)
    rank = {g: r for r, (g, _) in enumerate(sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])))}
    return [rank[g] for g in assign]


def _fold_small(assign: list[int], vecs: Sequence[Vector], min_size: int) -> list[int]:
    sizes = Counter(assign)
    big = sorted(g for g, n in sizes.items() if n >= min_size)
    if not big or len(big) == len(sizes):
        return assign
    big_centres = [centre(vecs[i] for i, g in enumerate(assign) if g == b) for b in big]
    out = []
    for i, g in enumerate(assign):
        out.append(g if sizes[g] >= min_size else big[max(_nearest(vecs[i], big_centres)[0], 0)])
    return out


def _nearest(v: Mapping[str, float], centres: Sequence[Mapping[str, float]]) -> tuple[int, float]:
    best, sim = -1, -1.0
    for k, c in enumerate(centres):
        s = cosine(v, c)
        if s > sim:
            best, sim = k, s
    return best, sim


def _unit(v: dict[str, float]) -> Vector:
    norm = math.sqrt(sum(w * w for w in v.values()))
    return {t: w / norm for t, w in v.items()} if norm else {}
