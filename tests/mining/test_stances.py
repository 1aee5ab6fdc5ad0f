"""What a resolution decides, and when two resolutions decide a problem opposite ways: a refund or none, a fee or
none, liable or not. Two wordings of one answer are not a contradiction, however few words they share."""

from __future__ import annotations

import pytest

from vigil.mining.stances import opposed, stances


@pytest.mark.parametrize(
    ("text", "decision", "stance"),
    [
        ("If your measurements match, we'll refund the £6.40 to your card.", "money_back", 1),
        ("I'm afraid size adjustments are final and I'm unable to refund it.", "money_back", -1),
        ("That means we're not able to compensate for it being stolen afterwards.", "money_back", -1),
        ("Adjustments from the hub scanner are final and non-refundable.", "money_back", -1),
        ("We can't pay out for theft after that, I'm afraid.", "money_back", -1),
        ("I've refunded nothing.", "money_back", -1),
        ("I've rebooked it for tomorrow, free of charge.", "fee", -1),
        ("I've rebooked today's collection for tomorrow, and there's no extra charge.", "fee", -1),
        ("A £25 early exit fee applies in the last eight weeks.", "fee", 1),
        ("We aren't liable once a safe place is nominated.", "liable", -1),
        ("Good news, I've waived the redelivery fee for you.", "fee", -1),
        ("The fee has been waived this once.", "fee", -1),
        ("We don't waive the £35 fee for a missed slot, I'm afraid.", "fee", 1),
    ],
)
def test_a_sentence_states_or_negates_a_decision(text: str, decision: str, stance: int) -> None:
    assert stances(text)[decision] == frozenset({stance})


def test_a_text_that_says_both_ways_on_a_decision_opposes_nothing_on_it() -> None:
    both = "There's no refund of the delivery fee. But we'll refund the item's price once it's back."
    assert stances(both)["money_back"] == frozenset({1, -1})
    assert opposed(both, "We'll refund you in full.") is None


def test_resolutions_that_decide_a_problem_opposite_ways_are_opposed() -> None:
    refused = "The booking was for a small parcel. Size adjustments are final; I'm unable to refund it."
    refunded = "Send a photo with a tape measure within 14 days; if it matches, we'll refund the £6.40 to your card."
    assert opposed(refused, refunded) == "money_back"
    assert opposed("Rebooked for Monday at no charge.", "Rebooking costs £4.50, a fee charged to your card.") == "fee"


def test_two_wordings_of_one_answer_are_not_opposed_however_few_words_they_share() -> None:
    one = "I've rebooked it for tomorrow, free of charge. You don't pay again."
    other = "Go to Collections, press Rebook; the booking you've already paid for covers it, at no charge."
    assert opposed(one, other) is None
    assert opposed("Restart the hub and wait two minutes.", "Hold the reset button for 15 seconds.") is None
