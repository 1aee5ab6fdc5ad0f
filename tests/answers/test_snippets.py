"""Snippets keep the answer: the sentences with the steps, the amount, the code; never an introduction alone.

On the bundled help centre (issue 26's reported cases): the missed-engineer FAQ was cut to its last sentence, "take
my number with me" got an article's introduction with no code in it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.conftest import help_centre
from vigil.answers.settings import AnswerSettings
from vigil.answers.skill import AnswerSkill
from vigil.answers.snippets import extract, substance, words
from vigil.knowledge.documents import Entry
from vigil.knowledge.store import Hit
from vigil.wire.events import Message

ENTRIES = {e.id: e for e in help_centre()}


def passage(entry_id: str, number: int = 1) -> str:
    return ENTRIES[entry_id].passages[number - 1].text


def test_a_snippet_of_the_missed_engineer_faq_keeps_the_credit_and_the_rebooking():
    # The question's words are all in the last sentence ("install", "fibre", "billed"); the answer is before it.
    text = extract("nobody came to install my fibre, will I still be billed?", passage("faq-missed-engineer"), 600).text
    assert "£30 missed-appointment credit" in text and "priority" in text
    assert "billing only starts" in text
    assert not text.startswith("We're sorry")  # an opener with nothing in it is left out


def test_a_sentence_that_only_repeats_the_question_is_worth_less_than_the_one_with_the_code():
    intro = extract("can I take my number with me?", passage("leaving-mobile-pac-stac", 1), 600)
    keeping = extract("can I take my number with me?", passage("leaving-mobile-pac-stac", 2), 600)
    assert "PAC to 65075" in keeping.text and keeping.worth > intro.worth


def test_the_items_of_a_list_come_with_their_lead_in():
    text = extract("how do I improve the wifi coverage upstairs", passage("slow-wifi", 3), 600).text
    lines = text.splitlines()
    assert lines[0] == "To improve Wi-Fi coverage from the Brightwave Hub:"
    assert lines[1].startswith("- Put the Hub somewhere central") and len(lines) >= 3
    assert len(text) <= 600


def test_a_snippet_stays_within_max_chars_and_passes_over_what_was_said():
    body = passage("leaving-mobile-pac-stac", 2)
    said = "To keep your Brightwave mobile number, text **PAC to 65075** from your Brightwave phone."
    text = extract("how do I keep my number", body, 160, said=[said]).text
    assert len(text) <= 160 and "65075" not in text


@pytest.mark.parametrize(
    ("sentence", "marks"),
    [
        ("We're sorry.", 0),
        ("Which code you need depends on whether you want to keep your number.", 0),
        ("Text **STAC to 75075** from your Brightwave phone.", 3),  # a number, an emphasis, a step
        ("It costs £2 a day on 5GB.", 1),
        ("Go to Hub > Wi-Fi settings and change it.", 2),  # a menu path, a step
    ],
)
def test_the_marks_of_an_answer_are_read_from_the_text(sentence: str, marks: int):
    assert substance(sentence) == marks


def test_words_meet_across_inflections_and_spellings():
    assert words("Keeping my Wi-Fi") == words("keep wifi")


class OneArticle:
    """A knowledge store whose search finds one passage of one article (the skill reads the rest of the entry)."""

    ranking = "hybrid"

    def __init__(self, entry: Entry, passage_number: int) -> None:
        self._entry = entry
        self._passage = entry.passages[passage_number - 1]

    async def search(self, query: str, k: int = 5, **_: object) -> list[Hit]:
        return [
            Hit(
                entry_id=self._entry.id,
                kind=self._entry.kind,
                title=self._entry.title,
                url=None,
                passage_id=self._passage.id,
                passage=self._passage.text,
                score=1.0,
                dense=0.7,
                lexical=8.0,
            )
        ]

    def passages(self, entry_id: str) -> list[tuple[str, str]]:
        return [(p.id, p.text) for p in self._entry.passages] if entry_id == self._entry.id else []


def asked(text: str) -> Message:
    """A customer's message in a conversation of its own."""
    return Message(
        type="message",
        schema_version=1,
        message_id="m1",
        conversation_id="c-1",
        sent_at=datetime(2026, 12, 6, 9, 0, tzinfo=UTC),
        role="customer",
        text=text,
    )


async def test_when_the_search_finds_an_articles_introduction_the_answer_is_the_section_with_the_code():
    # Reported: "take my number with me" got "Which code you need depends…" with no code in it.
    assert "Which code you need depends" in passage("leaving-mobile-pac-stac", 1)
    knowledge = OneArticle(ENTRIES["leaving-mobile-pac-stac"], 1)
    question = asked("I'm leaving, can I take my number with me?")
    skill = AnswerSkill(knowledge, AnswerSettings())  # type: ignore[arg-type]
    (proposal,) = await skill.propose(question, None)
    assert "PAC to 65075" in proposal.text and proposal.sources[0].id == "leaving-mobile-pac-stac"


async def test_when_the_search_finds_the_introduction_of_a_troubleshooting_article_the_answer_is_its_steps():
    # Reported: slow broadband got an article's introduction ("Work through the checks below in order").
    knowledge = OneArticle(ENTRIES["slow-wifi"], 1)
    question = asked("my broadband is really slow, what can I do?")
    (proposal,) = await AnswerSkill(knowledge, AnswerSettings()).propose(question, None)  # type: ignore[arg-type]
    assert "Work through the checks below" not in proposal.text
    assert "- Put the Hub somewhere central" in proposal.text and "- Restart the Hub" in proposal.text
