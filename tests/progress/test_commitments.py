"""Commitments: which analyst sentences are promises, and the due time each gives (bench/data/README.md's
conventions: the latest moment the promise is still kept, in the customer's zone)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from vigil.progress.commitments import Promise, find_promises, follows_up

LONDON = ZoneInfo("Europe/London")
NEW_YORK = ZoneInfo("America/New_York")
WEDNESDAY = datetime(2026, 1, 14, 10, 30, tzinfo=UTC)  # 10:30 in London (GMT)
FRIDAY = datetime(2026, 1, 16, 15, 0, tzinfo=UTC)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def promises(text: str, sent_at: datetime = WEDNESDAY, zone: ZoneInfo = LONDON) -> list[Promise]:
    return find_promises(text, sent_at=sent_at, zone=zone)


def due(text: str, sent_at: datetime = WEDNESDAY, zone: ZoneInfo = LONDON) -> datetime | None:
    (promise,) = promises(text, sent_at, zone)
    return promise.due_at


def test_a_promise_carries_its_span_and_a_short_phrase_of_what_was_promised():
    text = "Thanks for waiting. I'll check with our engineering team and get back to you within 2 hours."
    (promise,) = promises(text)
    assert (
        text[promise.start : promise.end] == "I'll check with our engineering team and get back to you within 2 hours"
    )
    assert promise.what == "check with our engineering team and get back to you"
    assert promise.due_at == utc(2026, 1, 14, 12, 30)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'll call you back in 30 minutes.", utc(2026, 1, 14, 11, 0)),
        ("I'll send the contract within the hour.", utc(2026, 1, 14, 11, 30)),
        ("I'll get back to you in an hour and a half.", utc(2026, 1, 14, 12, 0)),
        ("I'll check the line again in a couple of hours.", utc(2026, 1, 14, 12, 30)),
        ("We'll apply the credit within 24 hours.", utc(2026, 1, 15, 10, 30)),
        ("I'll send the refund confirmation in 3 days.", utc(2026, 1, 17, 10, 30)),
        ("I'll raise the claim right away.", WEDNESDAY),
    ],
)
def test_durations_count_from_sending(text: str, expected: datetime):
    assert due(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'll call you by 3pm to confirm the slot.", utc(2026, 1, 14, 15, 0)),
        ("I'll ring you at quarter to 4.", utc(2026, 1, 14, 15, 45)),
        ("I'll come back to you before 4.", utc(2026, 1, 14, 16, 0)),
        ("I'll call you tomorrow at 11.", utc(2026, 1, 15, 11, 0)),
        ("I'll email the report on Friday.", utc(2026, 1, 16, 17, 0)),
        ("I'll call you on Wednesday.", utc(2026, 1, 21, 17, 0)),  # a weekday is the next one after today
        ("I'll post the returns bag on 21 January.", utc(2026, 1, 21, 17, 0)),
        ("I'll have the fee taken off by the 18th.", utc(2026, 1, 18, 17, 0)),
        ("I'll call you on the 2nd.", utc(2026, 2, 2, 17, 0)),  # a day of the month that has passed is next month's
    ],
)
def test_clock_times_and_days_are_read_in_the_customers_zone(text: str, expected: datetime):
    assert due(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'll send the report tomorrow morning.", utc(2026, 1, 15, 12, 0)),
        ("I'll call you first thing tomorrow.", utc(2026, 1, 15, 9, 0)),
        ("I'll pick this up first thing Monday morning.", utc(2026, 1, 19, 9, 0)),
        ("I'll call you tomorrow afternoon.", utc(2026, 1, 15, 17, 0)),
        ("I'll call you before lunchtime on Monday.", utc(2026, 1, 19, 12, 0)),
        ("I'll get the confirmation over to you by end of day.", utc(2026, 1, 14, 17, 0)),
        ("I'll post it out today.", utc(2026, 1, 14, 17, 0)),
        ("I'll get this sorted by the end of the week.", utc(2026, 1, 16, 17, 0)),
        ("I'll be in touch next week.", utc(2026, 1, 23, 17, 0)),
    ],
)
def test_parts_of_a_day_and_ends_of_days_and_weeks(text: str, expected: datetime):
    assert due(text) == expected


def test_working_days_skip_the_weekend_at_the_same_clock_time():
    assert due("You'll hear back from me within 2 working days.", FRIDAY) == utc(2026, 1, 20, 15, 0)
    assert due("I'll follow it up next business day.", FRIDAY) == utc(2026, 1, 19, 17, 0)


def test_business_hours_count_only_nine_to_five_on_weekdays():
    assert due("I'll have an answer within 4 business hours.", FRIDAY) == utc(2026, 1, 19, 11, 0)


def test_a_zone_named_in_the_text_wins_over_the_customers():
    assert due("I'll call you at 2pm Eastern tomorrow.") == utc(2026, 1, 15, 19, 0)
    assert due("I'll call you at 3pm UK time on Friday.", zone=NEW_YORK) == utc(2026, 1, 16, 15, 0)
    assert due("I'll ring you at 10 Madrid time on Thursday.") == utc(2026, 1, 15, 9, 0)  # any city of the zone db
    assert due("I'll ring you at 10 Narnia time on Thursday.") == utc(2026, 1, 15, 10, 0)  # none: the customer's


def test_a_day_is_the_customers_local_day_not_the_utc_one():
    late_evening_in_new_york = utc(2026, 1, 15, 2, 0)  # still Wednesday 14th, 21:00, in New York
    assert due("I'll call you tomorrow at 10.", late_evening_in_new_york, NEW_YORK) == utc(2026, 1, 15, 15, 0)


def test_across_the_spring_change_in_london_local_times_move_an_hour_in_utc():
    friday = utc(2026, 3, 27, 15, 0)  # the clocks go forward on Sunday 29 March
    assert due("I'll call you on Monday at 10am.", friday) == utc(2026, 3, 30, 9, 0)
    assert due("We'll be in touch within 2 working days.", friday) == utc(2026, 3, 31, 14, 0)
    assert due("I'll check your line in 2 hours.", utc(2026, 3, 29, 0, 30)) == utc(2026, 3, 29, 2, 30)


def test_across_the_autumn_change_in_london_local_times_move_back():
    friday = utc(2026, 10, 23, 14, 0)  # 15:00 BST; the clocks go back on Sunday 25 October
    assert due("I'll call you on Monday at 10am.", friday) == utc(2026, 10, 26, 10, 0)
    assert due("I'll email the bill tomorrow morning.", utc(2026, 10, 24, 10, 0)) == utc(2026, 10, 25, 12, 0)
    assert due("I'll send the form in 2 days.", friday) == utc(2026, 10, 25, 15, 0)  # 49 hours: same clock time


def test_two_deliverables_are_two_promises_and_a_means_and_its_reply_are_one():
    two = promises("I'll send the report by 5 today and call you tomorrow at 2 to go through it.")
    assert [p.due_at for p in two] == [utc(2026, 1, 14, 17, 0), utc(2026, 1, 15, 14, 0)]
    assert len(promises("Let me check with the billing team and I'll come back to you before 4.")) == 1
    (reply,) = promises("Let me check with the network team; you'll hear from me within the hour.")
    assert reply.due_at == utc(2026, 1, 14, 11, 30)
    assert len(promises("I'll reset the port and check the stats again in 15 minutes.")) == 1


def test_an_escalation_is_a_promise_of_its_own_and_has_no_time():
    first, second = promises("Let me escalate this to the complaints team and I'll update you within 48 hours.")
    assert first.what == "escalate this to the complaints team" and first.due_at is None
    assert second.due_at == utc(2026, 1, 16, 10, 30)


@pytest.mark.parametrize(
    "text",
    [
        "I'll update you as soon as I hear back from the network team.",
        "I'll follow up with billing in a few days.",
        "No promises, but I'll see if I can get the fee waived.",
    ],
)
def test_a_vague_time_or_none_leaves_the_promise_without_a_due_time(text: str):
    assert due(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "I sent the report yesterday.",  # past
        "I said I'd call on Friday and I didn't, sorry.",
        "If it still drops out I can book an engineer for you.",  # a conditional the analyst does not commit to
        "Shall I call you tomorrow?",  # questions
        "Would you like me to send a paper copy?",
        "I can call you tomorrow if you like.",  # offers that wait on the customer
        "If you're still without service on Saturday, give us a call and we'll look at compensation.",
        "The engineer will text you 30 minutes before they arrive.",  # someone else's process
        "Sorry, we can't promise the coverage will improve.",
        "let me just have a look at your account, one moment",  # done in the chat
        "You're welcome, I'll be here if there's anything else.",
    ],
)
def test_what_is_not_a_promise(text: str):
    assert promises(text) == []


def test_a_conditional_the_analyst_commits_to_is_a_promise():
    (promise,) = promises("If the bank rejects the file again, I'll resubmit it manually.")
    assert promise.what == "resubmit it manually" and promise.due_at is None


def test_a_curly_apostrophe_is_read_like_a_straight_one():
    assert due("I\u2019ll call you back in 20 minutes.") == utc(2026, 1, 14, 10, 50)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("I've heard back from engineering: the fault at the exchange is fixed.", True),
        ("As promised, engineering have checked your line and it's clear now.", True),
        ("Thanks for waiting, I'm still checking with engineering.", False),
        ("No news from engineering yet, sorry.", False),
        ("Is there anything else I can help with?", False),
        ("Here's the invoice you asked for.", False),  # a different promise kept
    ],
)
def test_a_follow_up_keeps_a_promise_when_it_delivers_on_the_same_thing(text: str, kept: bool):
    assert follows_up("check with engineering and get back to the customer", text) is kept


def test_a_day_of_the_month_after_by_is_a_date_not_a_clock_time():
    assert due("I'll send the statement by 20 February.") == utc(2026, 2, 20, 17, 0)
    assert due("I'll send the statement by 9 March, at the latest.") == utc(2026, 3, 9, 17, 0)


# --- the shapes a tester found read wrong (issue 28; bench/data/commitments-shapes.jsonl) ---


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Give me 30 minutes and I'll have the corrected bill on your account.", utc(2026, 1, 14, 11, 0)),
        ("Allow 48 hours and I'll have your meter re-commissioned.", utc(2026, 1, 16, 10, 30)),
        ("Expect an update from me within 24 hours.", utc(2026, 1, 15, 10, 30)),
        ("Expect a call from us within 20 minutes.", utc(2026, 1, 14, 10, 50)),
    ],
)
def test_a_duration_said_before_the_promise_or_without_in_counts_from_sending(text: str, expected: datetime):
    assert due(text) == expected


def test_next_and_this_weekday_midnight_and_two_times_in_one_message():
    monday = datetime(2026, 1, 12, 10, 0, tzinfo=UTC)
    assert due("I'll call you back next Tuesday.", monday) == utc(2026, 1, 20, 17, 0)  # the next week's, not tomorrow
    assert due("I'll post it this Friday.", FRIDAY) == utc(2026, 1, 16, 17, 0)  # said on a Friday: today
    assert due("I'll cancel the line at midnight tonight.") == utc(2026, 1, 15, 0, 0)
    first, second = promises("I'll rebook the install this afternoon and dispatch the router tomorrow.")
    assert (first.due_at, second.due_at) == (utc(2026, 1, 14, 17, 0), utc(2026, 1, 15, 17, 0))
    assert (first.what, second.what) == ("rebook the install", "dispatch the router")


def test_a_promise_that_waits_on_the_customer_is_none_and_an_offer_after_a_promise_leaves_the_promise():
    assert promises("I'll update the name once you've sent us the certificate.") == []
    assert promises("As soon as you send the photos I'll raise the claim.") == []
    assert promises("I'll send the contract through when you've signed the direct debit form.") == []
    assert promises("When you've activated the new app on your phone, I'll switch off the SMS codes.") == []
    (check,) = promises("I'll check your price-match eligibility today; if you qualify, I can apply it.")
    assert check.what == "check your price-match eligibility" and check.due_at == utc(2026, 1, 14, 17, 0)
    (sign,) = promises("I'll have a colleague check the offer this Friday, so you can sign next week.", FRIDAY)
    assert sign.due_at == utc(2026, 1, 16, 17, 0)  # the purpose's "next week" is not its time


def test_what_was_promised_keeps_no_preposition_of_its_time():
    (promise,) = promises("I'll call you back by tomorrow lunchtime with a new slot.")
    assert promise.what == "call you back with a new slot"


def test_a_promise_made_to_the_customer_for_a_team_is_one_and_what_a_team_does_is_not():
    (team,) = promises("Our accounts team will come back to you within 2 working days with the refund amount.")
    assert team.what == "come back to you with the refund amount" and team.due_at == utc(2026, 1, 16, 10, 30)
    assert promises("Our engineers will roll out the fix on 17 September.") == []


def test_a_time_said_before_the_promises_of_a_sentence_is_theirs_but_a_conditions_time_is_not():
    moved, cancelled = promises("Tomorrow I'll move your connection and cancel the old landline bundle.")
    assert moved.due_at == cancelled.due_at == utc(2026, 1, 15, 17, 0)
    updated, sent = promises("By Friday I'll have updated your address and sent you new pink slips.")
    assert updated.due_at == sent.due_at == utc(2026, 1, 16, 17, 0)
    (book,) = promises("If the meter still isn't sending readings by tomorrow, I'll book an engineer visit.")
    assert book.due_at is None
    (email,) = promises("Our team will have the account fixed within 2 business days, and I'll email you once done.")
    assert email.due_at is None  # the first clause's time is not the second's


def test_a_check_and_the_report_of_it_in_the_next_sentence_are_one_promise_due_at_the_report():
    text = "Let me check with network ops whether there's planned work tonight. You'll hear from me within the hour."
    (check,) = promises(text)
    assert (check.start, check.end) == (0, len(text) - 1)
    assert check.what.startswith("check with network ops") and check.due_at == utc(2026, 1, 14, 11, 30)


def test_a_purpose_without_a_comma_does_not_give_the_promise_its_time():
    (push,) = promises(
        "I'll push the plan change through by midnight tonight so you're on the new pricing from tomorrow."
    )
    assert push.due_at == utc(2026, 1, 15, 0, 0)


def test_a_bare_hour_tonight_is_in_the_evening_and_a_thing_of_tomorrow_s_is_no_day():
    assert due("I'll email you the fraud report by 9 tonight.") == utc(2026, 1, 14, 21, 0)
    assert due("I'll put a hold on tomorrow's direct debit today.") == utc(2026, 1, 14, 17, 0)


def test_a_team_the_analyst_gets_to_call_the_customer_makes_a_promise_and_a_dash_before_an_offer_ends_one():
    (team,) = promises("I'm getting our priority services team to phone you tomorrow to add you to it.")
    assert team.due_at == utc(2026, 1, 15, 17, 0)
    (confirm,) = promises("I'll confirm the switch in writing next Friday - and if you'd like a copy posted, I can.")
    assert confirm.due_at == utc(2026, 1, 23, 17, 0)
    reissue, mail = promises("I'll reissue your rail pass this afternoon and mail the card out on Monday.")
    assert (reissue.due_at, mail.due_at) == (utc(2026, 1, 14, 17, 0), utc(2026, 1, 19, 17, 0))
