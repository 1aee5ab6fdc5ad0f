"""Question detection: what asks for help and what does not."""

from __future__ import annotations

import pytest

from vigil.cases.questions import classify

ASKS = [
    "How do I set up an eSIM?",
    "how do i change the wifi password",
    "Can you check why my bill is higher this month",
    "is there a way to keep my number if I leave",
    "my broadband stopped working after the storm",
    "I was charged twice for November",
    "I need to change my address, moving next week",
    "the hub light is flashing amber and nothing loads",
    "thanks, but how do I make it permanent?",
    "hi, anyone know why roaming is not working in Turkey",
    "Router says no internet",
    "I want to cancel my TV add-on",
]
QUIET = [
    "thanks!",
    "Thank you so much",
    "ok one sec",
    "👍",
    "BW-448120",
    "07700 900123",
    "hello?",
    "anyone here?",
    "hi",
    "ok that worked, cheers",
    "https://example.com/screenshot.png",
    "",
    "yes",
]


@pytest.mark.parametrize("text", ASKS)
def test_questions_and_problem_reports_ask(text: str):
    assert classify(text).asks, classify(text)


@pytest.mark.parametrize("text", QUIET)
def test_small_talk_ids_and_acknowledgements_do_not(text: str):
    assert not classify(text).asks, classify(text)


def test_the_verdict_says_which_rule_decided():
    assert classify("what is a PAC code").reason == "question_form"
    assert classify("BW-448120").reason == "identifier"
    assert classify("thanks").reason == "small_talk"
    assert classify("it keeps dropping").reason == "request_or_problem"


@pytest.mark.parametrize(
    "text", ["BW-448120", "order 88231", "4471 2290 1183", "#12345", "ref: AB-12/77", "07700 900123"]
)
def test_an_id_or_number_on_its_own_is_an_identifier(text: str):
    assert classify(text).reason == "identifier"


@pytest.mark.parametrize(
    "text", ["5G not working since the update", "3 days and still no parcel", "2 routers both dead"]
)
def test_a_message_that_starts_with_a_number_is_not_taken_for_an_identifier(text: str):
    assert classify(text).reason != "identifier"


def test_a_problem_report_that_starts_with_a_number_asks():
    assert classify("5G not working since the update").asks


@pytest.mark.parametrize(
    "text",
    [
        "need a courtesy car",  # a request with no subject
        "pls call me back on 07700 900377",
        "oh can you put a safe place note, side gate",
        "is the invoice sent by email",  # a yes/no question with a noun subject and no question mark
        "Is parcelo open on bank holiday monday",
        "hey do you know if there's going to be a price rise next year",
        "I just wanted to check the policy documents are in the app now",
        "my mobile data isnt working since this morning",  # symptom reports
        "Hub has a solid amber light",
        "my direct debit went out twice this month",
        "the integration stopped syncing orders since the 12th",
    ],
)
def test_implicit_requests_yes_no_questions_without_a_mark_and_symptom_reports_ask(text: str):
    assert classify(text).asks, classify(text)


@pytest.mark.parametrize(
    "text",
    [
        "have a nice day",
        "Thank you very much for your help, have a nice day",
        "thank you, that's all I wanted. appreciate it",
        "ok will fill it in tonight",
        "Hi, I just want to say the new window is perfect",
    ],
)
def test_goodbyes_thanks_and_plans_do_not_ask(text: str):
    assert not classify(text).asks, classify(text)


def test_thanks_that_turn_to_something_new_ask():
    assert classify("thanks, but the light is still flashing").asks
