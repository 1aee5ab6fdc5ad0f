"""Proactive answers end to end: questions in over Kafka, suggestions out, and the silences counted by reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import Topics, create_topics
from tests.e2e.harness import VigilCli, VigilProcess, case, eventually, message, ready, record
from tests.kafka_client import produce, read_topic
from vigil.dev.broker import EmbeddedBroker

pytestmark = pytest.mark.e2e

KNOWLEDGE = Path(__file__).parent.parent.parent / "knowledge"


def now(offset_s: float = 0.0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=offset_s)).isoformat().replace("+00:00", "Z")


def ask(conversation: str, n: int, text: str, *, role: str = "customer", sent_at: str | None = None):  # type: ignore[no-untyped-def]
    return record(message(conversation, f"{conversation}-m{n}", text, role=role, sent_at=sent_at or now()))


def suppressed(vigil: VigilProcess, reason: str) -> float:
    return vigil.metric("vigil_suggestions_suppressed_total", reason=reason)


async def test_questions_get_answers_and_everything_else_silence(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    await create_topics(kafka.bootstrap, topics)
    daemon = vigil.daemon(
        kafka.bootstrap,
        topics,
        sqlite_url,
        VIGIL_ANSWERS__ENABLED="true",
        VIGIL_KNOWLEDGE__PATHS=json.dumps([str(KNOWLEDGE / "articles"), str(KNOWLEDGE / "faqs")]),
        # Answers alone: an hour-old question would also get its first-response warning (tests/e2e/test_progress.py).
        VIGIL_PROGRESS__ENABLED="false",
    )
    await ready(daemon, timeout_s=120)

    # A paraphrase of an FAQ (with a typo) gets that FAQ as its first source.
    produce(kafka.bootstrap, topics.input, [ask("faq", 1, "wen do u take the money")])
    (out,) = read_topic(kafka.bootstrap, topics.suggestions, expect=1, timeout_s=30)
    answer = json.loads(out.value or b"")
    assert (answer["kind"], answer["in_reply_to"], answer["conversation_id"]) == ("answer", "faq-m1", "faq")
    assert answer["sources"][0]["kind"] == "faq" and answer["sources"][0]["id"] == "faq-bill-date"
    assert answer["confidence"] >= 0.7
    stored = daemon.conversation("faq")
    assert stored is not None and [s["suggestion_id"] for s in stored["suggestions"]] == [answer["suggestion_id"]]

    # Small talk, an id on its own, a closed case, an old message: silence, each counted by its reason.
    produce(
        kafka.bootstrap,
        topics.input,
        [
            ask("talk", 1, "thanks!"),
            ask("talk", 2, "ok one sec"),
            ask("talk", 3, "BW-448120"),
            record(case("done", "done-e1", "closed", when=now(), resolution={"resolved_by": "human"})),
            ask("done", 1, "how do I set up an eSIM?"),
            ask("old", 1, "how do I set up an eSIM?", sent_at=now(-3600)),
            # An analyst's reply arriving with the question: the suggestion would come too late.
            ask("late", 1, "how do I change my wifi password?"),
            ask("late", 2, "Hi! Open the app, Hub > Wi-Fi settings.", role="analyst"),
        ],
    )
    await eventually(
        "silences counted",
        lambda: (
            suppressed(daemon, "not_a_question") >= 3
            and suppressed(daemon, "case_closed") >= 1
            and suppressed(daemon, "stale") >= 1
            and suppressed(daemon, "superseded") >= 1
        ),
        timeout_s=30,
        process=daemon,
    )

    # A follow-up with its own answer, seconds after the first answer: answered.
    produce(kafka.bootstrap, topics.input, [ask("faq", 2, "what is a PAC code?")])
    (_, follow_up) = read_topic(kafka.bootstrap, topics.suggestions, expect=2, timeout_s=30)
    pac = json.loads(follow_up.value or b"")
    assert (pac["in_reply_to"], pac["sources"][0]["id"]) == ("faq-m2", "faq-get-pac")
    # The first question in other words (the same source twice), then in the same words: refused, each for its reason.
    # (Not "when is the payment taken ...": the one ranking puts the bill-date article first for it, which answers it
    # too, so its source is not the same.)
    produce(kafka.bootstrap, topics.input, [ask("faq", 3, "when is the money taken from my account?")])
    await eventually(
        "repeated source", lambda: suppressed(daemon, "repeated_source") >= 1, timeout_s=20, process=daemon
    )
    produce(kafka.bootstrap, topics.input, [ask("faq", 4, "wen do u take the money??")])
    await eventually(
        "repeated question", lambda: suppressed(daemon, "repeated_question") >= 1, timeout_s=20, process=daemon
    )

    assert len(read_topic(kafka.bootstrap, topics.suggestions, expect=3, timeout_s=3)) == 2
    assert daemon.metric("vigil_suggestions_published_total", kind="answer") == 2
    daemon.stop()
