"""Snippets: the sentences of an entry that answer a question, not the ones that introduce it.

A passage usually opens by setting the scene ("If you're moving your mobile to another network…", "We're sorry.")
and answers further down: the step to take, the amount, the code. Picking sentences by the question's words alone
favours the opener, which repeats the question's words without answering; so each sentence is scored by the
question's words it shares and by what it carries that an answer is made of, read from the text itself: a number
or an amount, a code or an emphasised term (``**PAC to 65075**``, a word in capitals, a menu path ``Hub > Wi-Fi``),
a step (a list item, or a sentence that opens with a verb rather than a subject). A sentence with neither costs
its room. The snippet is the run of consecutive sentences worth most within ``max_chars``, so it reads as written,
with the lead-in of a list kept with its items. Nothing here knows any help centre's words.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

# A sentence ends at . ! ? before a capital, a digit, a quote, a bracket or markup; a line is always its own.
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(*])|\n+")
_WORD = re.compile(r"[a-z0-9]+")
_HYPHEN = re.compile(r"(?<=[a-z])-(?=[a-z])")
_ITEM = re.compile(r"^(?:[-*•]|\d+[.)])\s+")
_NUMBER = re.compile(r"\d")
_EMPHASIS = re.compile(r"\*\*[^*]+\*\*|`[^`]+`|\b[A-Z]{2,}[A-Z0-9]*\b|\S\s>\s\S")
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
"""What a question word found in a sentence is worth."""
SUBSTANCE = 0.6
"""What each mark of an answer (a number, a code or emphasis, a step) is worth."""
ROOM = 0.5
"""What a sentence costs: one that shares no word with the question and carries nothing an answer is made of lowers
the snippet's worth, so it is left out unless it lies between two that answer."""


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of a passage (or one item of a list), and what it is worth to a question."""

    text: str
    item: bool
    """A list item: joined to its neighbours by a line break, not a space."""
    worth: float


def words(text: str) -> set[str]:
    """The words of ``text`` that carry meaning, folded so that inflections and spellings meet ("keeping" and
    "keep", "Wi-Fi" and "wifi")."""
    joined = _HYPHEN.sub("", text.lower())
    return {stem(w) for w in _WORD.findall(joined) if w not in STOP and len(w) > 1}


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


def split(body: str) -> list[tuple[str, bool]]:
    """The sentences of ``body``, each with whether it is a list item (the item's marker dropped)."""
    found: list[tuple[str, bool]] = []
    for raw in body.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        item = bool(_ITEM.match(line))
        text = _ITEM.sub("", line, count=1) if item else line
        found.extend((part.strip(), item) for part in _SENTENCE.split(text) if part.strip())
    return found


def scored(question: str, body: str, heading: str = "", said: Iterable[str] = ()) -> list[Sentence]:
    """The sentences of ``body`` with their worth to ``question``, less their room: the question's words each
    shares, and its marks of an answer when it is on the question's subject (it shares a word, or follows one that
    does, as each item of a list follows its lead-in, or its passage's ``heading`` shares one, which then counts
    for each sentence at half). An amount in a paragraph about something else answers nothing. A sentence already
    ``said`` in the conversation is worth nothing new: it costs its room only."""
    wanted = words(question)
    titled = len(wanted & words(heading)) * RELEVANCE / 2
    already = [words(s) for s in said]
    sentences: list[Sentence] = []
    carried = False  # the sentence before shared a word (or led a list that did, item by item)
    for text, item in split(body):
        own = words(text)
        shared = len(wanted & own)
        if own and any(len(own & w) >= 0.8 * len(own) for w in already):
            worth = -ROOM
        else:
            on_subject = bool(shared or carried or titled)
            marks = substance(text, item) if on_subject else 0
            worth = shared * RELEVANCE + marks * SUBSTANCE - ROOM + (titled if on_subject else 0.0)
        sentences.append(Sentence(text, item, worth))
        carried = shared > 0 or (carried and (item or text.endswith(":")))
    return sentences


@dataclass(frozen=True, slots=True)
class Snippet:
    """What a passage says to a question, what that is worth (the sum of its sentences' worth) and what the passage
    is about (its first line: an FAQ's question, an article's title and section heading)."""

    text: str
    worth: float
    about: str = ""


def best_run(sentences: Sequence[Sentence], max_chars: int) -> Snippet:
    """The run of consecutive ``sentences`` worth most within ``max_chars`` (the first of equals, the shorter of
    equals), with the lead-in of a list (a sentence ending in ":") kept when the run opens on its first item."""
    best: tuple[float, int, int] | None = None
    for start in range(len(sentences)):
        total, length = 0.0, 0
        for end in range(start, len(sentences)):
            length += _rendered(sentences[end]) + 1
            if length - 1 > max_chars:
                break
            total += sentences[end].worth
            if best is None or total > best[0] + 1e-9:
                best = (total, start, end + 1)
    if best is None:  # not even one sentence fits: the worthiest one, cut at a word
        top = max(sentences, key=lambda s: s.worth)
        return Snippet(_cut(top.text, max_chars), top.worth)
    worth, start, end = best
    lead_in = start > 0 and sentences[start].item and sentences[start - 1].text.endswith(":")
    if lead_in and _length(sentences[start - 1 : end]) <= max_chars:
        start -= 1
    return Snippet(_joined(sentences[start:end]), worth)


def extract(question: str, passage: str, max_chars: int, *, title: str = "", said: Collection[str] = ()) -> Snippet:
    """The run of sentences of ``passage`` that best answers ``question``, within ``max_chars``; sentences already
    ``said`` are passed over. A passage opens with a line naming it: an FAQ's question, or an article's ``title``
    and the heading of its section. The title is left out of the heading: shared by every section, it would make
    a list of prices on the subject of any question about the article."""
    heading, body = passage.split("\n", 1) if "\n" in passage else ("", passage)
    if title and heading.startswith(title):
        heading = heading[len(title) :].lstrip(": ")
    about = passage.split("\n", 1)[0] if "\n" in passage else ""
    sentences = scored(question, body, heading, said)
    if not sentences:
        return Snippet(passage[:max_chars], 0.0, about)
    best = best_run(sentences, max_chars)
    return Snippet(best.text, best.worth, about)


def _rendered(sentence: Sentence) -> int:
    return len(sentence.text) + (2 if sentence.item else 0)


def _length(sentences: Sequence[Sentence]) -> int:
    return len(_joined(sentences))


def _joined(sentences: Sequence[Sentence]) -> str:
    text = ""
    for index, sentence in enumerate(sentences):
        if index:
            text += "\n" if sentence.item or sentences[index - 1].item else " "
        text += f"- {sentence.text}" if sentence.item else sentence.text
    return text


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1].rsplit(" ", 1)[0]
    return f"{cut}…"
