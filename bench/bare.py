"""The baseline: a bare aiokafka consumer that reads a topic and does nothing with the records.

It is configured as vigil's ``KafkaSource`` is (a consumer group, ``getmany`` with the same limits), so the rate
it reaches is what the broker and the client allow, and vigil's rate is read as a fraction of it. It reads the
topic ``passes`` times (seeking back to the beginning), because one pass is over too soon to time well. Run as
``python -m bench.bare --bootstrap HOST:PORT --topic T --expect N``; it prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import subprocess
import sys
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from bench.linux import peak_rss_bytes

_ROOT = Path(__file__).resolve().parent.parent
_FETCH_MAX_RECORDS = 500  # vigil's KafkaSettings.fetch_max_records default
_SESSION_TIMEOUT_MS = 6000


async def consume(bootstrap: str, topic: str, expect: int, passes: int, timeout_s: float) -> dict[str, float]:
    """Read the ``expect`` records of ``topic`` ``passes`` times, timed from the first batch (after the join)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"bare-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=_SESSION_TIMEOUT_MS // 10,
        max_poll_records=_FETCH_MAX_RECORDS,
    )
    await consumer.start()
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        first_at, first_batch = await _read(consumer, expect, deadline)
        for _ in range(passes - 1):
            await consumer.seek_to_beginning()
            await _read(consumer, expect, deadline)
        seconds = time.monotonic() - first_at
        events = expect * passes - first_batch
        return {"events": events, "seconds": seconds, "events_per_s": events / seconds}
    finally:
        await consumer.stop()


async def _read(consumer: AIOKafkaConsumer, expect: int, deadline: float) -> tuple[float, int]:
    """Read ``expect`` records; returns when the first batch arrived and how many records it held."""
    seen = first_batch = 0
    first_at = 0.0
    while seen < expect:
        if time.monotonic() > deadline:
            raise TimeoutError(f"read {seen} of {expect} records before the deadline")
        batch = await consumer.getmany(timeout_ms=200, max_records=_FETCH_MAX_RECORDS)
        count = sum(len(records) for records in batch.values())
        if count and not seen:
            first_at, first_batch = time.monotonic(), count
        seen += count
    return first_at, first_batch


async def measure(bootstrap: str, topic: str, events: int, records: int) -> float:
    """The bare consumer's rate (records/s) on ``topic``, which holds ``events`` records, read in a process of its
    own until it has read about ``records``."""
    passes = max(1, math.ceil(records / events))
    args = ["--bootstrap", bootstrap, "--topic", topic, "--expect", str(events), "--passes", str(passes)]
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.bare", *args, cwd=_ROOT, stdout=subprocess.PIPE
    )
    out, _ = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"the bare consumer failed with code {process.returncode}")
    return float(json.loads(out)["events_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--passes", type=int, default=1)
    parser.add_argument("--timeout-s", type=float, default=120.0)
    args = parser.parse_args()
    result = asyncio.run(consume(args.bootstrap, args.topic, args.expect, args.passes, args.timeout_s))
    print(json.dumps(result | {"peak_rss_bytes": peak_rss_bytes("self")}))


if __name__ == "__main__":
    main()
