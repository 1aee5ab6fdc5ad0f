"""The end-to-end harness's own promise: "the daemon committed the whole input topic" means every record the test
sent, not where the broker's watermark says the partition ends (on Tansu one past the first record of the last
batch), so a test never reads the daemon's state while records it sent are still unread."""

from __future__ import annotations

import json

import pytest

from tests.conftest import create_topics, new_topics
from tests.e2e.action_chat import all_committed, end_offsets
from tests.kafka_client import AckedProducer
from vigil.dev.broker import EmbeddedBroker

pytestmark = pytest.mark.e2e


async def test_a_partition_ends_past_every_record_acknowledged_when_several_went_in_one_batch(kafka: EmbeddedBroker):
    topics = new_topics()
    await create_topics(kafka.bootstrap, topics, partitions=3)
    producer = AckedProducer(kafka.bootstrap, **{"linger.ms": 200})  # the five leave together, in one batch
    for n in range(5):
        producer.produce(topics.input, key=b"c-1", value=json.dumps({"n": n}).encode(), partition=1)
    assert producer.flush(30) == 0

    assert producer.ends(topics.input) == {1: 5}
    assert end_offsets(kafka.bootstrap, topics.input, acked=producer) == {0: 0, 1: 5, 2: 0}
    assert not all_committed(kafka.bootstrap, topics, producer)  # the group has read nothing yet
