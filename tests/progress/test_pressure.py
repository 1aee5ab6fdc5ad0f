"""Customer pressure: chasers, sentiment, and when vigil suggests an escalation."""

from __future__ import annotations

import time

import pytest

from vigil.progress.pressure import chasing, pressure, sentiment


@pytest.mark.parametrize(
    "text",
    ["Any update?", "hello??", "Still waiting to hear back.", "It's been 3 days now.", "??", "Just checking in again"],
)
def test_chasers_are_recognised(text: str):
    assert chasing(text)


@pytest.mark.parametrize("text", ["Thanks, that's great.", "When will the SIM arrive?", "Can I change my plan?"])
def test_questions_and_thanks_are_not_chasers(text: str):
    assert not chasing(text)


def test_sentiment_is_in_range_and_reads_support_threats_as_negative():
    assert sentiment("Thanks so much, really appreciate it.") > 0.5
    assert sentiment("I want to speak to a manager and I'm going to cancel.") <= -0.5
    assert -1.0 <= sentiment("Useless, ridiculous, a disgrace, the worst, I'll cancel and complain.") <= 1.0


def test_two_chasers_since_the_last_reply_call_for_an_escalation():
    result = pressure(["Any update?", "Hello??"])
    assert result.chases == 2 and result.escalate
    assert "chased 2 times" in result.why


def test_one_polite_chaser_does_not():
    result = pressure(["Hi, any update on this?"])
    assert result.chases == 1 and not result.escalate and result.why == ""


def test_a_strongly_negative_mood_that_is_getting_worse_calls_for_an_escalation():
    result = pressure(
        ["Why is this taking so long?", "This is getting frustrating.", "Worst service ever, I'm fed up."]
    )
    assert result.trend < 0 and result.escalate


def test_a_mood_that_recovers_does_not():
    result = pressure(["This is a disgrace, the worst service I've had.", "Oh it's working now, brilliant, thank you!"])
    assert result.trend > 0 and not result.escalate


def test_no_messages_is_no_pressure():
    assert pressure([]).escalate is False


def test_a_question_about_cancelling_is_not_a_threat_to_cancel():
    asked = pressure(["How do I get a PAC code?", "What's the charge if I cancel early?"])
    assert not asked.escalate
    threatened = pressure(["This is the third time. I'm going to cancel my contract."])
    assert threatened.sentiment < sentiment("What's the charge if I cancel early?")


def test_one_sad_remark_alone_is_not_a_customer_to_escalate_but_one_furious_message_is():
    assert not pressure(["it says 'this code is no longer valid' 🙁"]).escalate
    assert pressure(["Terrible. Just terrible. You've charged me twice AGAIN."]).escalate


def test_a_message_near_the_size_limit_is_scored_in_a_bounded_time_from_its_opening_and_close():
    # VADER's time grows faster than the text: a 59 KB message took over a second, inside the skill's transaction.
    middle = "I have been waiting for days and nobody called me back, this is terrible. Can you refund it? " * 640
    huge = f"This is unacceptable, I am furious. {middle} Fix it now or I cancel."
    assert len(huge.encode()) > 56_000
    started = time.perf_counter()
    score = sentiment(huge)
    assert time.perf_counter() - started < 0.2
    assert score <= -0.5  # what the customer says first and last is read


def test_a_service_that_failed_the_customer_reads_as_angry_though_no_word_of_it_is_rude():
    # VADER alone: 0.0 (neutral) for the customer who took a day off for an engineer who never came.
    assert sentiment("I took a day off and the engineer never came.") <= -0.75
    assert sentiment("The engineer came and fixed the line, thank you") > 0
