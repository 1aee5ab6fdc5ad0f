"""What a closed case teaches: the customer's problem, the analyst's resolving turns, the outcome."""

from __future__ import annotations

from datetime import UTC, datetime

from vigil.mining.distil import distil, resolving, score
from vigil.mining.select import ClosedCase, Turn

AT = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def case(*turns: tuple[str, str], summary: str | None = None, csat: int | None = None) -> ClosedCase:
    return ClosedCase(
        conversation_id="c1",
        tenant="acme",
        closed_at=AT,
        summary=summary,
        csat=csat,
        turns=tuple(
            Turn(f"m{n}", role, "Dana Reyes" if role == "customer" else "sam.k", text, AT)
            for n, (role, text) in enumerate(turns, start=1)
        ),
    )


def test_the_problem_is_the_first_customer_message_that_says_more_than_hello():
    taught = distil(
        case(
            ("customer", "Hi there!"),
            (
                "customer",
                "my parcel says delivered but it never arrived, tracking shows a photo of someone else's door",
            ),
            ("analyst", "I'm sorry about that. I've opened a missing-parcel claim and the refund goes out in 3 days."),
        )
    )
    assert taught is not None
    assert taught.problem.startswith("my parcel says delivered")
    assert taught.problem_ids == ("m2",)


def test_a_short_first_message_is_joined_by_the_next():
    taught = distil(
        case(
            ("customer", "hello, quick question"),
            ("customer", "how do I change the delivery address on an order that has already shipped?"),
            ("analyst", "Go to Orders, open the order and tap Change address; it works until the van is loaded."),
        )
    )
    assert taught is not None
    assert taught.problem == "quick question how do I change the delivery address on an order that has already shipped?"
    assert taught.problem_ids == ("m1", "m2")


def test_greetings_verification_questions_and_sign_offs_are_not_the_resolution():
    taught = distil(
        case(
            ("customer", "The app logs me out every time I open it since the update"),
            ("analyst", "Hi, you're now chatting with Sam. Happy to help!"),
            ("analyst", "Could you please confirm your date of birth and postcode for security?"),
            ("analyst", "Which phone are you using?"),
            ("analyst", "Thanks. Please uninstall the app, restart the phone, then install it again and sign in."),
            ("analyst", "Is there anything else I can help with? Have a great day!"),
        )
    )
    assert taught is not None
    assert taught.step_ids == ("m5",)
    assert taught.steps == ("Please uninstall the app, restart the phone, then install it again and sign in.",)


def test_a_resolving_turn_keeps_its_substance_not_its_greeting_or_its_question_back():
    taught = distil(
        case(
            ("customer", "can I add TV to my broadband? We've just cancelled our old TV provider"),
            (
                "analyst",
                "Hi Dana, I'm Megan. Yes, you can! TV is £12 a month on a 30-day plan. Is it the same address?",
            ),
        )
    )
    assert taught is not None
    assert taught.steps == ("Yes, you can! TV is £12 a month on a 30-day plan.",)


def test_what_the_analyst_did_and_why_count_as_resolution_in_conversation_order():
    analyst = [
        Turn("a1", "analyst", "sam", "This happens because the card on file expired last month.", AT),
        Turn("a2", "analyst", "sam", "Let me check.", AT),
        Turn("a3", "analyst", "sam", "I've updated the payment method and re-sent the invoice to you.", AT),
    ]
    assert [t.message_id for t in resolving(analyst)] == ["a1", "a3"]
    assert score("Let me check.") == 0
    assert score("What is your order number?") == 0


def test_the_outcome_is_the_analyst_s_closing_summary_and_context_keeps_quoted_errors():
    taught = distil(
        case(
            ("customer", 'Printing fails with "Error 0x80070005 access denied" on the new laptop'),
            ("analyst", "Open Settings > Printers, remove the printer, then add it again as administrator."),
            summary="Driver reinstalled as admin; printing works.",
        )
    )
    assert taught is not None
    assert taught.outcome == "Driver reinstalled as admin; printing works."
    assert any("0x80070005" in c for c in taught.context)


def test_a_case_with_no_resolving_analyst_turn_teaches_nothing():
    assert distil(case(("customer", "my order never came"), ("analyst", "ok, done. Bye!"))) is None
    assert distil(case(("analyst", "Hello, how can I help?"))) is None


def test_analyst_words_leave_out_chatter():
    taught = distil(
        case(
            ("customer", "my order never came and it has been two weeks now"),
            ("analyst", "Thanks! Bear with me."),
            ("analyst", "I've refunded it."),
        )
    )
    assert taught is not None
    assert taught.analyst_words == 3


def chat_room(*lines: tuple[str, str, str]) -> ClosedCase:
    """A case as a chat room gives it: (role, nick, text), helpers addressing people by their nick."""
    return ClosedCase(
        conversation_id="c2",
        tenant="acme",
        closed_at=AT,
        summary=None,
        csat=None,
        turns=tuple(Turn(f"m{n}", role, nick, text, AT) for n, (role, nick, text) in enumerate(lines, start=1)),
    )


def test_a_terse_chat_room_resolution_of_commands_is_kept_without_the_nicks_it_addressed():
    taught = distil(
        chat_room(
            ("customer", "kiamo", "how do I get my webcam working in skype? it shows a black window"),
            ("analyst", "zoli2k", "kiamo: sudo apt-get install v4l-utils"),
            ("customer", "kiamo", "zoli2k: done"),
            ("analyst", "zoli2k", "kiamo, then run skype from a terminal with LD_PRELOAD set"),
        )
    )
    assert taught is not None
    assert taught.steps == ("sudo apt-get install v4l-utils", "then run skype from a terminal with LD_PRELOAD set")
    assert taught.analyst_words < 30
    assert not taught.thin(30)


def test_a_bare_command_or_link_is_a_resolving_turn():
    assert score("lspci -v") > 0
    assert score("dmesg | grep usb") > 0
    assert score("http://paste.ubuntu.com") > 0
    assert score("lol") == 0


def test_a_canned_answer_a_helper_called_up_is_the_helper_s_turn():
    taught = distil(
        chat_room(
            ("customer", "fairway", "are NTFS partitions fully supported? (both R/W)"),
            ("analyst", "Vlet", "!ntfs | fairway"),
            ("bot", "ubotu", "fairway: For NTFS write access see https://help.ubuntu.com/community/MountingWindows"),
        )
    )
    assert taught is not None
    assert taught.steps == ("For NTFS write access see https://help.ubuntu.com/community/MountingWindows",)
    assert taught.step_ids == ("m3",)


def test_a_short_case_that_only_reports_what_was_done_is_thin_and_an_instruction_is_not():
    handed_off = distil(
        case(("customer", "my claim has had no answer for a week"), ("analyst", "I've passed this to the claims team."))
    )
    instructed = distil(
        case(("customer", "how do I get my invoices?"), ("analyst", "Go to Account > Billing > Invoices."))
    )
    assert handed_off is not None and instructed is not None
    assert handed_off.thin(30)
    assert not instructed.thin(30)
    assert not handed_off.thin(5)


def test_only_a_participant_is_taken_for_an_addressee():
    taught = distil(
        chat_room(
            ("customer", "ronald", "any one know how to install the ALSA driver? my soundcard is not supported"),
            ("analyst", "skx", "Note: alsa is already installed, run alsamixer and unmute the Master channel"),
        )
    )
    assert taught is not None
    assert taught.steps == ("Note: alsa is already installed, run alsamixer and unmute the Master channel",)
