"""Snippets: the sentences of an entry that answer a question, not the ones that introduce it.

A passage usually opens by setting the scene ("If you're moving your mobile to another network…", "We're sorry.")
and answers further down: the step to take, the amount, the code. Picking sentences by the question's words alone
favours the opener, which repeats the question's words without answering. So a run of sentences is worth the
question's words it states (each once, weighted by how well it tells the entry's sections apart, at half when the
sentence says the opposite: "without", "don't" where the question has no negation), the section's heading when it
states them too, and the marks of an answer it carries, read from the text itself: a number or an amount, a code or
an emphasised term (``**PAC to 65075**``, a word in capitals, a menu path ``Hub > Wi-Fi``), a step (a list item, or
a sentence that opens with a verb rather than a subject). Marks count only on the question's subject: an amount in
a paragraph about something else answers nothing. A sentence with neither the question's words nor marks costs
its room. The snippet is the run of consecutive sentences worth most within ``max_chars``, so it reads as written,
with the lead-in of a list kept with its items. Nothing here knows any help centre's words.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

# A sentence ends at . ! ? before a capital, a digit, a quote, a bracket or markup; a line is always its own.
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(*])|\n+")
_WORD = re.compile(r"[a-z0-9]+")
_HYPHEN = re.compile(r"(?<=[a-z])-(?=[a-z])")
_ITEM = re.compile(r"^(?:[-*•]|\d+[.)])\s+")
_NUMBER = re.compile(r"\d")
_EMPHASIS = re.compile(r"\*\*[^*]+\*\*|`[^`]+`|\b[A-Z]{2,}[A-Z0-9]*\b|\S\s>\s\S")
_NEGATION = re.compile(r"\b(?:not|no|never|without|none|\w+n't)\b", re.IGNORECASE)
_FIRST_WORDS = re.compile(r"[A-Za-z][A-Za-z']*")
STOP = frozenset(
    "a an the and or but if of to in on at by for with from is are was were be been being do does did i you we my "
    "your our it its this that these those can could would will should shall may might must how what when where why "
    "which who whom me us please hi hello hey there so ok okay sorry again still just also too am im get got "
    "about after before than then into out up over any some all no not yes".split()
)
# Words a sentence that states something opens with (a subject, a condition, a link): one that opens otherwise, and
# whose second word is not a verb, is read as a step ("Text PAC to 65075", "Restart the Hub").
_OPENERS = frozenset(
    "a an the this that these those it its it's if when whenever while as because since although though so but "
    "and or our your my their his her we you they i he she there here which who what where why how most many some "
    "any all each every no not only for from to in on at by with without after before during until unless once "
    "yes also just then otherwise however".split()
)
_VERBS = frozenset("is are was were has have had can could will would should may might must does do did isn't".split())

RELEVANCE = 1.0
"""What a word of the question stated in the snippet is worth (at its weight: 1 unless the entry says otherwise)."""
ANSWER = 1.2
"""What carrying an answer is worth: the most marks of one of the snippet's sentences, each at ``ANSWER / 2``."""
MORE = 0.1
"""What each further mark of an answer on the subject is worth: enough to keep the steps after the first, not
enough for a long list of amounts to outweigh the question's words."""
ROOM = 0.5
"""What a sentence with neither the question's words nor a mark of an answer on its subject costs: it is left out
unless it lies between two that answer."""
OPPOSITE = 0.5
"""The share of a word's worth left when its sentence (or heading) is negated and the question is not, or the
other way round: "leaving without your number" does not answer "can I take my number"."""


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of a passage (or of one item of a list), and what it brings to a question."""

    text: str
    item: bool
    """Part of a list item: set on a line of its own."""
    starts: bool
    """The first sentence of its line (an item's later sentences follow it on the same line)."""
    shared: Mapping[str, float]
    """The question's words it states, each with the share of its worth it keeps (``OPPOSITE`` or 1)."""
    marks: int
    """Its marks of an answer when it is on the question's subject (0 otherwise, and for a sentence said)."""
    on_subject: bool

    @property
    def worth(self) -> float:
        """What it adds to a run besides the question's words and the answer it carries: a little for each mark,
        a little less for going on about the subject (the rest of the paragraph that answers), its room for a
        sentence about something else."""
        if self.marks:
            return self.marks * MORE
        return MORE / 4 if self.on_subject else -ROOM


@dataclass(frozen=True, slots=True)
class Snippet:
    """What a passage says to a question, what that is worth and what the passage is about (its first line: an
    FAQ's question, an article's title and section heading)."""

    text: str
    worth: float
    about: str = ""


@functools.lru_cache(maxsize=8192)
def words(text: str) -> frozenset[str]:
    """The words of ``text`` that carry meaning, folded so that inflections and spellings meet ("keeping" and
    "keep", "Wi-Fi" and "wifi"). Kept for the texts read most recently: every answer reads each section of its
    article, and the same articles answer most questions."""
    joined = _HYPHEN.sub("", text.lower())
    return frozenset(stem(w) for w in _WORD.findall(joined) if w not in STOP and len(w) > 1)


@functools.lru_cache(maxsize=16384)
def stem(word: str) -> str:
    """A crude stem: common English endings off, then at most six letters."""
    for ending in ("ing", "ed", "es", "en", "s", "e"):
        if len(word) > len(ending) + 2 and word.endswith(ending):
            word = word[: -len(ending)]
            break
    return word[:6]


def substance(sentence: str, item: bool = False) -> int:
    """How many marks of an answer ``sentence`` carries: a number or amount; a code, an emphasised term or a menu
    path; a step (a list item, or a sentence that opens with a verb)."""
    marks = int(bool(_NUMBER.search(sentence))) + int(bool(_EMPHASIS.search(sentence)))
    return marks + int(item or _is_step(sentence))


def _is_step(sentence: str) -> bool:
    first = _FIRST_WORDS.findall(sentence[:60])
    if not first or sentence.rstrip().endswith("?"):
        return False
    # "We're", "It's": the pronoun is what opens the sentence.
    opener, second = first[0].lower().split("'")[0], (first[1].lower() if len(first) > 1 else "")
    return opener not in _OPENERS and opener not in _VERBS and second not in _VERBS


def split(body: str) -> list[tuple[str, bool, bool]]:
    """The sentences of ``body``, each with whether it is part of a list item (the item's marker dropped) and
    whether it starts its line."""
    found: list[tuple[str, bool, bool]] = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        item = bool(_ITEM.match(line))
        text = _ITEM.sub("", line, count=1) if item else line
        parts = [part.strip() for part in _SENTENCE.split(text) if part.strip()]
        found.extend((part, item, index == 0) for index, part in enumerate(parts))
    return found


def negated(text: str) -> bool:
    """Whether ``text`` says "not", "no", "without" or a "…n't"."""
    return bool(_NEGATION.search(text))


def scored(question: str, body: str, heading: str = "", said: Iterable[str] = ()) -> list[Sentence]:
    """The sentences of ``body``, each with the question's words it states and its marks of an answer when on the
    question's subject: it states one of the question's words, or follows a sentence that does, or belongs to a
    list (with its lead-in) one of whose sentences does, or its passage's ``heading`` states one. A sentence
    already ``said`` in the conversation brings nothing."""
    wanted, asks_not = words(question), negated(question)
    titled = bool(wanted & words(heading))
    already = [words(s) for s in said]
    parts = split(body)
    repeated = [_said(words(text), already) for text, _, _ in parts]
    shared: list[dict[str, float]] = []
    for (text, _, _), gone in zip(parts, repeated, strict=True):
        share = OPPOSITE if negated(text) != asks_not else 1.0
        shared.append({} if gone else dict.fromkeys(wanted & words(text), share))
    on_subject = [titled or bool(shared[i]) or bool(i and shared[i - 1]) for i in range(len(parts))]
    for first, last in _lists(parts):
        if any(shared[first:last]):
            on_subject[first:last] = [True] * (last - first)
    return [
        Sentence(
            text,
            item,
            starts,
            shared[i],
            substance(text, item) if on_subject[i] and not repeated[i] else 0,
            on_subject[i] and not repeated[i],
        )
        for i, (text, item, starts) in enumerate(parts)
    ]


def _said(own: frozenset[str], already: Sequence[frozenset[str]]) -> bool:
    """Whether a sentence of words ``own`` was said already: nearly all its words are in one earlier text."""
    return bool(own) and any(len(own & earlier) >= 0.8 * len(own) for earlier in already)


def _lists(parts: Sequence[tuple[str, bool, bool]]) -> Iterator[tuple[int, int]]:
    """Where the lists are among ``parts``: each list's items, with the sentence that leads into them."""
    index = 0
    while index < len(parts):
        if not parts[index][1]:
            index += 1
            continue
        first = index - 1 if index and parts[index - 1][0].endswith(":") else index
        while index < len(parts) and parts[index][1]:
            index += 1
        yield first, index


def best_run(
    sentences: Sequence[Sentence], max_chars: int, weights: Mapping[str, float] | None = None, titled: float = 0.0
) -> Snippet:
    """The run of consecutive ``sentences`` worth most within ``max_chars`` (the first of equals, the shorter of
    equals): the question's words it states, each once (a word stated in three sentences answers no more than
    once; a run that states more of the question answers more of it), the answer it carries, its sentences' own
    worth, and ``titled`` (what the passage's heading states of the question). The lead-in of a list (a sentence
    ending in ":") is kept when the run opens on its first item."""
    weight = weights or {}
    best: tuple[float, int, int] | None = None
    for start in range(len(sentences)):
        total, length, most = titled, 0, 0
        stated: dict[str, float] = {}
        for end in range(start, len(sentences)):
            sentence = sentences[end]
            length += _rendered(sentence) + 1
            if length - 1 > max_chars:
                break
            total += sentence.worth
            most = max(most, sentence.marks)
            for word, share in sentence.shared.items():
                stated[word] = max(stated.get(word, 0.0), share)
            worth = total + most * ANSWER / 2 + RELEVANCE * sum(weight.get(w, 1.0) * s for w, s in stated.items())
            if best is None or worth > best[0] + 1e-9:
                best = (worth, start, end + 1)
    if best is None:  # not even one sentence fits: the one stating most of the question, cut at a word
        top = max(sentences, key=lambda s: (len(s.shared), s.marks))
        return Snippet(_cut(top.text, max_chars), titled + len(top.shared))
    worth, start, end = best
    lead_in = start > 0 and sentences[start].item and sentences[start - 1].text.endswith(":")
    if lead_in and _length(sentences[start - 1 : end]) <= max_chars:
        start -= 1
    return Snippet(_joined(sentences[start:end]), worth)


def word_weights(question: str, passages: Sequence[str]) -> dict[str, float]:
    """How much each of ``question``'s words tells the ``passages`` of one entry apart: 1 for a word in one of them,
    less the more of them state it, down to 1/n for one all n state (an article about engineers says "engineer" in
    every section; which section answers is told by the question's other words)."""
    wanted = words(question)
    stated = [words(p) for p in passages]
    return {w: 1.0 / max(1, sum(w in s for s in stated)) for w in wanted}


def extract(
    question: str,
    passage: str,
    max_chars: int,
    *,
    title: str = "",
    said: Collection[str] = (),
    weights: Mapping[str, float] | None = None,
) -> Snippet:
    """The run of sentences of ``passage`` that best answers ``question``, within ``max_chars``; sentences already
    ``said`` are passed over. A passage opens with a line naming it: an FAQ's question, or an article's ``title``
    and the heading of its section. The title is left out of the heading: shared by every section, it would put
    a list of prices on the subject of any question about the article."""
    about, body = passage.split("\n", 1) if "\n" in passage else ("", passage)
    heading = about[len(title) :].lstrip(": ") if title and about.startswith(title) else about
    sentences = scored(question, body, heading, said)
    if not sentences:
        return Snippet(passage[:max_chars], 0.0, about)
    share = OPPOSITE if negated(heading) != negated(question) else 1.0
    titled = RELEVANCE / 2 * share * sum((weights or {}).get(w, 1.0) for w in words(question) & words(heading))
    best = best_run(sentences, max_chars, weights, titled)
    return Snippet(best.text, best.worth, about)


def _rendered(sentence: Sentence) -> int:
    return len(sentence.text) + (2 if sentence.item and sentence.starts else 0)


def _length(sentences: Sequence[Sentence]) -> int:
    return len(_joined(sentences))


def _joined(sentences: Sequence[Sentence]) -> str:
    text = ""
    for index, sentence in enumerate(sentences):
        if index:
            text += "\n" if sentence.starts and (sentence.item or sentences[index - 1].item) else " "
        text += f"- {sentence.text}" if sentence.item and sentence.starts else sentence.text
    return text


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1].rsplit(" ", 1)[0]
    return f"{cut}…"
