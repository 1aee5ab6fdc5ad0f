"""Follow-ups in a conversation: a new question is answered even when its first source was cited already; only
repeats and near-repeats of a question are kept quiet (issue 26)."""

from __future__ import annotations

from pathlib import Path

from tests.answers.test_intervention import KNOWLEDGE, NOW, answered, customer, faq_answer, open_case
from tests.conftest import RememberingEmbedder
from vigil.answers.followups import new_words, said_share, speaks_to
from vigil.answers.intervention import InterventionPolicy
from vigil.app.settings import AnswerSettings, Settings
from vigil.cases.store import CaseStore, Earlier
from vigil.core.clock import ManualClock
from vigil.testing import wired
from vigil.wire.events import SourceRef, Suggestion

SPAIN = (
    "Spain is in our Roam Europe zone. Roaming is included on 30GB and Unlimited (20GB fair use), and costs £2 a "
    "day on 5GB, charged only on days you use your phone abroad."
)


def earlier(asked: str, text: str, source: str) -> Earlier:
    suggestion = Suggestion(
        suggestion_id="s1",
        conversation_id="c-1",
        tenant="default",
        in_reply_to="m1",
        created_at=NOW,
        kind="answer",
        text=text,
        confidence=0.9,
        sources=[SourceRef(kind="faq", id=source)],
        latency_ms=1.0,
    )
    return Earlier(suggestion, asked)


def test_a_questions_new_words_are_those_neither_asked_nor_said_before():
    spain = [earlier("we're off to Spain, will my phone work there and what does it cost?", SPAIN, "faq-roaming")]
    follow_up = "ok thanks. and after Spain we fly on to Turkey for a week, what will that cost me?"
    assert "turkey" in new_words(follow_up, spain) and not {"spain", "cost"} & new_words(follow_up, spain)
    assert new_words("so it's £2 a day in Spain then?", spain) == set()  # all of it asked or said
    assert speaks_to("Turkey uses the World Pass at £6 a day.", new_words(follow_up, spain))
    assert said_share(SPAIN, [SPAIN]) == 1.0 and said_share("Turkey uses the World Pass.", [SPAIN]) < 0.5


async def test_a_cited_source_is_said_again_only_for_what_the_question_asks_anew(store: CaseStore):
    policy = InterventionPolicy(store=store, clock=ManualClock(NOW), settings=AnswerSettings())
    first = customer("c-1", "m1", "How do I get a PAC code?")
    await answered(store, first, "Text PAC to 65075 from your Brightwave phone.", "leaving-mobile-pac-stac")
    # Another part of the same article, on what the customer asks now (how long the code lasts).
    later = customer("c-1", "m2", "how long does it last before it expires?")
    other_part = faq_answer("A PAC or STAC lasts 30 days. If you don't use it, it expires.", "leaving-mobile-pac-stac")
    assert (await policy.review(other_part, later, open_case("c-1"))).speak
    # The same source saying again what it said, or something beside the new question, is still refused.
    again = faq_answer("Text PAC to 65075 from your phone.", "leaving-mobile-pac-stac")
    assert (await policy.review(again, later, open_case("c-1"))).reason == "repeated_source"
    beside = faq_answer("Give the PAC to your new provider.", "leaving-mobile-pac-stac")
    assert (await policy.review(beside, later, open_case("c-1"))).reason == "repeated_source"


async def test_in_a_conversation_about_spain_the_turkey_follow_up_is_answered_and_a_near_repeat_is_not(
    tmp_path: Path, embedder: RememberingEmbedder
):
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        answers={"enabled": True},  # type: ignore[arg-type]
        knowledge={"paths": [KNOWLEDGE / "articles", KNOWLEDGE / "faqs"]},  # type: ignore[arg-type]
    )
    clock = ManualClock(NOW)
    async with wired(tmp_path, settings=settings, clock=clock, embedder=embedder) as vigil:
        await vigil.send(
            customer("c-1", "m1", "we're off to Spain next week, will my phone work there and what does it cost?")
        )
        assert [s.sources[0].id for s in vigil.published] == ["faq-roaming-europe"]
        clock.advance(20)
        await vigil.send(customer("c-1", "a1", "It's £2 a day on the 5GB plan.", clock.now(), role="analyst"))
        clock.advance(20)
        # Reported: nothing, because the search still ranks the Spain FAQ first and it was just cited.
        turkey = "ok thanks. and after Spain we fly on to Turkey for a week, what will that cost me?"
        await vigil.send(customer("c-1", "m2", turkey, clock.now()))
        assert len(vigil.published) == 2, vigil.published
        answer = vigil.published[1]
        assert answer.in_reply_to == "m2" and answer.sources[0].id in {"faq-roaming-turkey", "world-pass"}
        assert "Turkey" in answer.text and "£6 a day" in answer.text
        clock.advance(30)
        # Asking the same thing in other words: the words that are new are none the answers are about.
        await vigil.send(customer("c-1", "m3", "so turkey isn't in roam europe then?", clock.now()))
        assert len(vigil.published) == 2
        assert vigil.sample("vigil_suggestions_suppressed_total", reason="repeated_source") == 1
