"""The redactor: personal data leaves a support message as placeholders; what only looks like it stays."""

from __future__ import annotations

import pytest

from bench.eval_redaction import KINDS, load, split_of
from vigil.mining.redact import Redacted, Redactor, Span


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor(keep=["0808 157 0192", "Brightwave Max", "192.168.1.254"])


def redacted_kinds(result: Redacted, text: str) -> dict[str, str]:
    return {text[span.start : span.end]: span.kind for span in result.spans}


@pytest.mark.parametrize(
    ("text", "secret", "placeholder"),
    [
        ("it's d.okafor77@example.co.uk", "d.okafor77@example.co.uk", "[EMAIL]"),
        ("call me on 07700 900461 after 5", "07700 900461", "[PHONE]"),
        ("my mobile is +44 7700 900238", "+44 7700 900238", "[PHONE]"),
        ("reach me at (415) 555-0132 or email", "(415) 555-0132", "[PHONE]"),
        ("her number is 06 12 34 56 78.", "06 12 34 56 78", "[PHONE]"),
        ("new contact number +91 98765 43210, old one gone", "+91 98765 43210", "[PHONE]"),
        ("landline 029 2018 0554", "029 2018 0554", "[PHONE]"),
        ("card is 4929 1873 0042 5514 if you need it", "4929 1873 0042 5514", "[CARD]"),
        ("card 5555-5555-5555-4444 exp 09/27", "5555-5555-5555-4444", "[CARD]"),
        ("use 4242424242424242 please", "4242424242424242", "[CARD]"),
        ("IBAN IE29 AIBK 9311 5212 3456 78, account name", "IE29 AIBK 9311 5212 3456 78", "[IBAN]"),
        ("type it as DE89370400440532013000 instead", "DE89370400440532013000", "[IBAN]"),
        ("my IP is 86.14.203.77.", "86.14.203.77", "[IP]"),
        ("from 2001:db8:85a3::8a2e:370:7334 I think", "2001:db8:85a3::8a2e:370:7334", "[IP]"),
        ("the router MAC is 3C:84:6A:1F:09:B2", "3C:84:6A:1F:09:B2", "[MAC]"),
        ("new mac 00-1B-63-84-45-E6 on the nic", "00-1B-63-84-45-E6", "[MAC]"),
        ("send it to 14 Elm Grove, Leeds LS6 2AB please", "14 Elm Grove, Leeds LS6 2AB", "[ADDRESS]"),
        ("postcode M20 2RN", "M20 2RN", "[ADDRESS]"),
        ("office is 500 Market Street, Suite 210, San Francisco, CA 94105", None, "[ADDRESS]"),
        ("it's Apartment 4, 19 Clontarf Road, Dublin 3, D03 X2K7 now", None, "[ADDRESS]"),
        ("date of birth is 14.07.1992", "14.07.1992", "[DATE_OF_BIRTH]"),
        ("born 23rd November 1962.", "23rd November 1962", "[DATE_OF_BIRTH]"),
        ("confirmed: 12/03/1987", "12/03/1987", "[DATE_OF_BIRTH]"),
        ("account number 40392817, thanks", "40392817", "[ID]"),
        ("order #PO-448120 arrived soaked", "#PO-448120", "[ID]"),
        ("tracking PC7740921GB", "PC7740921GB", "[ID]"),
        ("booking reference KX7P2Q.", "KX7P2Q", "[ID]"),
        ("frequent flyer number KF 448 210 337?", "KF 448 210 337", "[ID]"),
        ("car reg LK19 XYZ", "LK19 XYZ", "[ID]"),
    ],
)
def test_each_kind_of_personal_data_is_replaced_by_its_placeholder(
    redactor: Redactor, text: str, secret: str | None, placeholder: str
) -> None:
    result = redactor.redact(text)

    assert placeholder in result.text
    if secret is not None:
        assert secret not in result.text
        assert result.text == text.replace(secret, placeholder)


def test_a_number_that_fails_its_check_is_not_a_card_or_an_iban(redactor: Redactor) -> None:
    kinds = set(
        redacted_kinds(redactor.redact("ref 4929 1873 0042 5518, IBAN IE29 AIBK 9311 5212 3456 79"), "").values()
    )

    assert "card" not in kinds
    assert "iban" not in kinds


@pytest.mark.parametrize(
    "text",
    [
        "Ubuntu 22.04 with kernel 5.15.0-91-generic",
        "paying for 150 Mbps and getting 9 Mbps",
        "it costs £29.99 a month, or €1,136.40 a year",
        "error 0x80070005 when I open the file",
        "Ledgerly says E-104 bank details rejected",
        "firmware says 3.1.4.2",
        "Chrome 122.0.6261.112 on Windows 11 23H2",
        "the printer is a Zebra ZD421, model NT-200",
        "delivery on 12/03/2025 between 8am and 1pm",
        "engineer booked Thursday 14 March at 14:30",
        "we sent 12,000 emails over port 25 at 99.9% uptime",
        "Brightwave Max is £64.50 and the hub is at 192.168.1.254",
    ],
)
def test_look_alikes_are_kept_verbatim(redactor: Redactor, text: str) -> None:
    result = redactor.redact(text)

    assert result.text == text
    assert result.spans == ()


def test_the_company_keeps_its_public_numbers_however_they_are_written() -> None:
    text = "Call us on 0808 157 0192 or +44 808 157 0192; I'm on 07700 900461"

    kept = Redactor(keep=["0808 157 0192"]).redact(text)
    plain = Redactor().redact(text)

    assert kept.text == "Call us on 0808 157 0192 or +44 808 157 0192; I'm on [PHONE]"
    assert plain.text.count("[PHONE]") == 3


def test_names_known_to_the_case_are_found_in_full_by_part_and_in_any_case(redactor: Redactor) -> None:
    result = redactor.redact(
        "Thanks Priya, and okafor is the surname; Daniel Okafor's account", names=["Daniel Okafor", "priya.k"]
    )

    assert result.text == "Thanks [NAME], and [NAME] is the surname; [NAME]'s account"


def test_a_handle_does_not_make_its_common_words_names(redactor: Redactor) -> None:
    result = redactor.redact("I'm a guest here and an admin", names=["guest-5531", "admin_2"])

    assert result.text == "I'm a guest here and an admin"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("if im out my landlord Tom Reilly will let him in", "if im out my landlord [NAME] will let him in"),
        ("ask for Sarah at reception", "ask for [NAME] at reception"),
        ("ask for jenny at reception", "ask for [NAME] at reception"),
        ("the driver was called Gary according to the app", "the driver was called [NAME] according to the app"),
        ("A witness, Mr Adebayo from number 31, saw it", "A witness, Mr [NAME] from number 31, saw it"),
        ("My GP, Dr Sian Evans, has written a letter", "My GP, Dr [NAME], has written a letter"),
        ("my partner Dana did, she does the invoicing", "my partner [NAME] did, she does the invoicing"),
        ("the audit log shows Dana Whitaker deleted it", "the audit log shows [NAME] deleted it"),
    ],
)
def test_third_parties_are_named_by_the_words_around_them_or_the_name_list(
    redactor: Redactor, text: str, expected: str
) -> None:
    assert redactor.redact(text).text == expected


@pytest.mark.parametrize(
    "text",
    [
        "I'm moving on Monday, in May, and I'd like to cancel. Will that cost anything?",
        "The Grafton Street branch is open until 4pm",
        "I am in Ho Chi Minh city",
        "switched it to Europe/London remotely",
    ],
)
def test_words_that_are_also_names_are_kept_where_they_are_not(redactor: Redactor, text: str) -> None:
    assert redactor.redact(text).text == text


def test_spans_point_into_the_original_text(redactor: Redactor) -> None:
    text = "Hi, I'm Priya. Your ticket is #55120 and I'll text 07700 900461."

    result = redactor.redact(text, names=["priya.k"])

    assert result.spans == (Span(8, 13, "name"), Span(30, 36, "identifier"), Span(51, 63, "phone"))
    assert [text[span.start : span.end] for span in result.spans] == ["Priya", "#55120", "07700 900461"]
    assert result.text == "Hi, I'm [NAME]. Your ticket is [ID] and I'll text [PHONE]."


def test_overlapping_finds_become_one_redaction(redactor: Redactor) -> None:
    result = redactor.redact("email daniel.okafor@example.com", names=["Daniel Okafor"])

    assert result.text == "email [EMAIL]"
    assert result.spans == (Span(6, 31, "email"),)


def test_redacting_redacted_text_changes_nothing(redactor: Redactor) -> None:
    for conversation in load():
        authors = conversation.authors
        for message in conversation.messages:
            once = redactor.redact(message.text, names=authors)
            twice = redactor.redact(once.text, names=authors)
            assert twice.text == once.text, message.text
            assert twice.spans == ()


def test_the_labelled_file_is_well_formed() -> None:
    conversations = load()  # raises on spans outside the text, unknown kinds, overlaps, repeated ids
    messages = [message for conversation in conversations for message in conversation.messages]
    pii = [span for message in messages for span in message.pii]
    keep = [span for message in messages for span in message.keep]

    assert len(conversations) >= 40
    assert len(pii) >= 300
    assert len(keep) >= 100
    assert {span.label for span in pii} == set(KINDS)
    halves = {split_of(conversation.id) for conversation in conversations}
    assert halves == {"tune", "test"}
    first = messages[1]
    assert first.text[first.pii[0].start : first.pii[0].end] == "Priya"
    for message in messages:
        for span in message.pii + message.keep:
            edge = message.text[span.start : span.end]
            assert edge == edge.strip() and edge
