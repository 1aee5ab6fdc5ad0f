"""Does a suggestion say what the helper said? The match that ``irc_score`` counts, on #ubuntu IRC answers.

A suggestion matches a helper's answer to a question when both hold:

- **close in meaning**: one of its pieces (a line or a sentence) is near the answer, the cosine of their
  all-MiniLM-L6-v2 embeddings (vigil's own model) at least ``THRESHOLD``;
- **the same specifics**: it shares with the answer a word that the question did not already hold (a command, a
  package, a path, a menu, a channel), stop words aside.

Both sides lose their addressee first ("nick: ", "<nick> "): on IRC a helper names the person answered, and a name
says nothing about the answer.

Why both: the embedding hears the topic, and a suggestion on the right topic with the wrong advice ("probably not
mounted" for "is there anything inside /media/cdrom?") is close in meaning; words shared with the question are the
topic too. Why the best piece: a suggestion holds several sentences (a mined case also holds the problem it
solved) and an IRC answer is one line, so the whole text's vector is pulled towards everything else it says. On the
hand-labelled pairs of ``bench/data/irc-match-labels.jsonl`` (tune period only), this rule agreed with the labels
better than the cosine alone, the whole text's cosine, or the shared words alone (docs/evaluation.md, issue 12).
``THRESHOLD`` has the best F1 on those labels (``python -m eval.irc_agreement`` chooses it and measures the
agreement out of fold).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vigil.knowledge.embedding import Embedder, Vectors

THRESHOLD = 0.55
"""Chosen by ``python -m eval.irc_agreement`` on the tune period's labels: the best F1 against them."""

_WORD = re.compile(r"[a-z0-9][a-z0-9._/+'-]*[a-z0-9]|[a-z0-9]")
_STOP = frozenset(
    "a an the and or but if of to in on at by for with from as is are was were be been being do does did have has "
    "had i you he she we they my your our his her their it its it's this that these those me us him them can could "
    "would will should shall may might must how what when where why which who whom please hi hello hey there here "
    "so ok okay sorry again still just right yes no not then than thanks thank really actually sure any some also "
    "too am im i'm get got say said tell know want need try use using like up out about into over dont don't cant "
    "can't".split()
)
"""Words that say nothing specific: they never count as shared."""
_ADDRESSEE = re.compile(r"^\s*(?:<[^>\s]{1,40}>\s*)?(?:[\w\[\]`|^{}\\@-]{1,40}\s*[:,>]\s+)?")
_PIECES = re.compile(r"\n+|(?<=[.!?])\s+(?=\S)")


def unaddressed(text: str) -> str:
    """``text`` without the leading name of the person it speaks to ("nick: ", "nick, ", "<nick> nick2: ")."""
    return _ADDRESSEE.sub("", text.strip(), count=1).strip()


def words(text: str) -> set[str]:
    """The words of ``text`` that could carry an answer's specifics: lower case, stop words aside; a word keeps its
    inner dots, slashes, dashes, pluses and apostrophes (``build-essential``, ``etc/fstab``, ``xorg.conf``,
    ``don't``), and loses what starts or ends it otherwise (``/etc/fstab`` is ``etc/fstab``)."""
    return {word for word in _WORD.findall(text.lower()) if word not in _STOP}


def new_words(suggestion: str, answer: str, question: str) -> set[str]:
    """The words the suggestion shares with the answer that the question did not already hold."""
    return (words(suggestion) & words(unaddressed(answer))) - words(question)


def pieces(text: str) -> list[str]:
    """The lines and sentences of a suggestion, each without an addressee; never empty (a blank text is one
    empty piece)."""
    found = [unaddressed(piece) for piece in _PIECES.split(text)]
    return [piece for piece in found if piece] or [""]


def judge(pair: Pair, score: float, threshold: float = THRESHOLD) -> bool:
    """The verdict on ``pair`` given its score (``Matcher.scores``): the score reaches ``threshold`` and the
    suggestion shares a word with the answer that the question did not hold."""
    return score >= threshold and bool(new_words(pair.suggestion, pair.answer, pair.question))


@dataclass(frozen=True, slots=True)
class Pair:
    """One suggestion beside the helper's answer it is judged against, and the question they both answer."""

    suggestion: str
    answer: str
    question: str


class Matcher:
    """Scores pairs in batches: the embedding of each text is computed once however many pairs hold it."""

    def __init__(self, embedder: Embedder, threshold: float = THRESHOLD) -> None:
        self._embedder = embedder
        self.threshold = threshold

    def scores(self, pairs: Sequence[Pair]) -> list[float]:
        """For each pair, the best cosine between a piece of its suggestion and its (unaddressed) answer: the
        "close in meaning" half of the match."""
        split = [pieces(pair.suggestion) for pair in pairs]
        answers = [unaddressed(pair.answer) for pair in pairs]
        vectors = self._vectors([*(p for ps in split for p in ps), *answers])
        return [
            float(np.max(np.stack([vectors[p] for p in ps]) @ vectors[answer]))
            for ps, answer in zip(split, answers, strict=True)
        ]

    def matches(self, pairs: Sequence[Pair]) -> list[bool]:
        """For each pair, whether the suggestion says what the helper said: close in meaning, with the same
        specifics."""
        return [judge(pair, score, self.threshold) for pair, score in zip(pairs, self.scores(pairs), strict=True)]

    def _vectors(self, texts: list[str]) -> dict[str, Vectors]:
        unique = list(dict.fromkeys(texts))
        embedded = self._embedder.embed(unique) if unique else np.zeros((0, 0), dtype=np.float32)
        return {text: embedded[row] for row, text in enumerate(unique)}
