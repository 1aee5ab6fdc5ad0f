"""Progress end to end, on the real clock: the daemon over Kafka warns of an SLA target and reminds the analyst of a
promise at their moments, with the timers surviving a restart in between."""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import Topics, create_topics
from tests.e2e.harness import Database, VigilCli, eventually, message, ready, record
from tests.kafka_client import produce, read_topic
from vigil.dev.broker import EmbeddedBroker

pytestmark = pytest.mark.e2e


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


async def test_timers_armed_before_a_restart_fire_after_it_at_their_own_moment(
    vigil: VigilCli, kafka: EmbeddedBroker, topics: Topics, sqlite_url: str
) -> None:
    await create_topics(kafka.bootstrap, topics)
    settings = {
        "VIGIL_PROGRESS__SLA": json.dumps({"*": {"*": {"first_response_s": 40}}}),
        "VIGIL_PROGRESS__WARN_BEFORE_S": "20",  # the warning 20 s after the customer's message
        "VIGIL_PROGRESS__REMIND_BEFORE_S": "900",  # at most half the time: 30 s after a promise due in a minute
    }
    first = vigil.daemon(kafka.bootstrap, topics, sqlite_url, **settings)
    await ready(first, timeout_s=120)
    sent = datetime.now(UTC)
    produce(
        kafka.bootstrap,
        topics.input,
        [
            record(message("waiting", "waiting-m1", "My internet is down", sent_at=stamp(sent))),
            record(message("promised", "promised-m1", "Is there an outage?", sent_at=stamp(sent))),
            record(
                message(
                    "promised", "promised-m2", "I'll get back to you within 1 minute.", role="analyst",
                    sent_at=stamp(sent),
                )
            ),
        ],
    )  # fmt: skip
    db = Database(sqlite_url)
    await db.reach("message", 3, first)
    first.stop(signal.SIGTERM)

    second = vigil.daemon(kafka.bootstrap, topics, sqlite_url, **settings)
    await ready(second, timeout_s=120)
    said = read_topic(kafka.bootstrap, topics.suggestions, expect=2, timeout_s=60)
    follow_ups = {json.loads(r.value or b"")["conversation_id"]: json.loads(r.value or b"") for r in said}
    assert set(follow_ups) == {"waiting", "promised"}
    warning, reminder = follow_ups["waiting"], follow_ups["promised"]
    assert warning["kind"] == reminder["kind"] == "follow_up"
    assert warning["text"].startswith("First response is due by")
    assert reminder["text"].startswith("Reminder: due by")
    # Each at its own moment (the sweep runs every half second), though it was armed by the daemon that stopped.
    for suggestion, moment in ((warning, sent + timedelta(seconds=20)), (reminder, sent + timedelta(seconds=30))):
        late = datetime.fromisoformat(suggestion["created_at"]) - moment
        assert timedelta(0) <= late < timedelta(seconds=3), (suggestion["text"], late)
    promised = second.conversation("promised")
    assert promised is not None
    (commitment,) = promised["commitments"]
    assert commitment["status"] == "open"
    assert datetime.fromisoformat(commitment["due_at"]) == sent + timedelta(minutes=1)
    await eventually(
        "the first response breached and counted",
        lambda: second.metric("vigil_sla_breaches_total", clock="first_response", priority="none") == 1,
        timeout_s=30,
        process=second,
    )
    second.stop(signal.SIGTERM)
