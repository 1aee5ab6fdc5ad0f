"""Follow-ups: what a new question in a conversation asks that was neither asked nor said before.

A customer who was told about roaming in Spain and then asks "and after Spain we fly on to Turkey, what will that
cost me?" asks something new (Turkey), though the Spain answer is still the nearest to their words. One who asks
"what number do I text for the PAC again?" after being told "Text PAC to 65075" asks nothing new: every word of
the question is in what was asked or said. So an answer from a source already cited in the conversation is worth
saying only when it speaks to a word of the question that is new to the conversation and it is not mostly what was
said already; and when the first source was cited, another part of it or the next source may answer the new part
(``skill.py`` looks; ``intervention.py`` holds the line).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from vigil.answers.snippets import words
from vigil.cases.store import Earlier
from vigil.wire.events import Suggestion


def answers(earlier: Iterable[Earlier]) -> list[Earlier]:
    """The answers among a conversation's earlier suggestions."""
    return [e for e in earlier if e.suggestion.kind == "answer"]


def cited(earlier: Iterable[Earlier]) -> set[tuple[str, str]]:
    """The sources the earlier answers were drawn from (an answer's first source is the one it was drawn from)."""
    return {_first(e.suggestion) for e in answers(earlier) if e.suggestion.sources}


def said_from(source: tuple[str, str], earlier: Iterable[Earlier]) -> list[str]:
    """What the earlier answers drawn from ``source`` said."""
    return [e.suggestion.text for e in answers(earlier) if e.suggestion.sources and _first(e.suggestion) == source]


def new_words(question: str, earlier: Sequence[Earlier]) -> set[str]:
    """The words of ``question`` (folded as ``snippets.words`` folds them) that no question answered earlier in the
    conversation asked and no earlier answer said."""
    before: set[str] = set()
    for e in answers(earlier):
        before |= words(e.suggestion.text)
        if e.asked is not None:
            before |= words(e.asked)
    return set(words(question) - before)


def speaks_to(text: str, wanted: set[str]) -> bool:
    """Whether ``text`` says something about one of the ``wanted`` words."""
    return bool(wanted & words(text))


def said_share(text: str, said: Iterable[str]) -> float:
    """The share of ``text``'s words that were already said (0 when it has none)."""
    own = words(text)
    if not own:
        return 0.0
    before: set[str] = set()
    for s in said:
        before |= words(s)
    return len(own & before) / len(own)


def _first(suggestion: Suggestion) -> tuple[str, str]:
    return (suggestion.sources[0].kind, suggestion.sources[0].id)
