"""Lexical retrieval: BM25 over passages (``bm25s``), English stop words removed and words stemmed.

The index lives in memory and is rebuilt whole when the knowledge changes: bm25s indexes tens of thousands of
passages in well under a second, far less than re-embedding them. bm25s (with SciPy) is imported when the first
index is built or a text is tokenised, not with this module: `vigil kb stats` and `kb export` never search.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import bm25s
    import Stemmer


@functools.cache
def _stemmer() -> Stemmer.Stemmer:
    import Stemmer  # noqa: PLC0415

    return Stemmer.Stemmer("english")


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """One lower-case word stemmed as the index stems it ("flashing" and "flashes" are "flash")."""
    return str(_stemmer().stemWord(word))


_HYPHENATED = re.compile(r"(?<=\w)-(?=\w)")


def _tokens(texts: Sequence[str]) -> list[list[str]]:
    # "Wi-Fi" and "wifi", "e-SIM" and "eSIM" are the same word to a customer.
    import bm25s  # noqa: PLC0415

    joined = [_HYPHENATED.sub("", text) for text in texts]
    tokenized = bm25s.tokenize(joined, stopwords="en", stemmer=_stemmer(), return_ids=False, show_progress=False)
    return [list(words) for words in tokenized]


def analyse(text: str) -> list[str]:
    """The words BM25 sees in ``text``: hyphens joined, stop words removed, stemmed (what RM3 counts)."""
    return _tokens([text])[0] if text.strip() else []


@dataclass(frozen=True, slots=True)
class LexicalHit:
    """A passage and its BM25 score (higher is better; 0 means no query word matched)."""

    passage_id: str
    score: float


class LexicalIndex:
    """BM25 over a fixed set of passages."""

    def __init__(self, ids: Sequence[str], texts: Sequence[str]) -> None:
        if len(ids) != len(texts):
            raise ValueError("one id per text")
        self._ids = list(ids)
        self._retriever: bm25s.BM25 | None = None
        if self._ids:
            import bm25s  # noqa: PLC0415

            self._retriever = bm25s.BM25()
            self._retriever.index(_tokens(texts), show_progress=False)

    def __len__(self) -> int:
        return len(self._ids)

    def search(self, query: str, k: int, *, only: np.ndarray | None = None) -> list[LexicalHit]:
        """The ``k`` best passages for ``query``; passages with no matching word are left out, and so are those
        ``only`` (one 0 or 1 per passage, in index order) masks out: they score 0 before the top ``k`` are taken,
        so a tenant's search is never crowded out by passages it may not see."""
        if self._retriever is None or not query.strip():
            return []
        words = _tokens([query])
        if not words[0]:
            return []
        if only is not None and len(only) != len(self._ids):
            raise ValueError("one mask value per passage")
        k = min(k, len(self._ids))
        # n_threads=0: in this thread (any other number starts a thread pool for the one query, every call)
        found, scores = self._retriever.retrieve(words, k=k, show_progress=False, n_threads=0, weight_mask=only)
        return [
            LexicalHit(self._ids[int(index)], float(score))
            for index, score in zip(np.asarray(found)[0], np.asarray(scores)[0], strict=True)
            if score > 0
        ]

    def search_weighted(
        self, weights: Mapping[str, float], k: int, *, only: np.ndarray | None = None
    ) -> list[LexicalHit]:
        """The ``k`` best passages for a weighted query (analysed word -> weight, as ``fusion.rm3`` makes): each
        word's BM25 contribution times its weight. Words the index has never seen are ignored; ``only`` masks
        passages out as in ``search``."""
        if self._retriever is None:
            return []
        if only is not None and len(only) != len(self._ids):
            raise ValueError("one mask value per passage")
        total = np.zeros(len(self._ids), dtype=np.float64)
        for word, weight in weights.items():
            ids = self._retriever.get_tokens_ids([word])
            if ids and weight:
                total += weight * np.asarray(self._retriever.get_scores_from_ids(ids), dtype=np.float64)
        if only is not None:
            total *= only
        k = min(k, len(self._ids))
        best = np.argsort(-total, kind="stable")[:k]
        return [LexicalHit(self._ids[int(i)], float(total[i])) for i in best if total[i] > 0]
