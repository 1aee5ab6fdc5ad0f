"""The learning curve's replayed history: the company's own events, with its new phrasings asked at the end of each
week, each in a conversation of its own, in time order (the replay's clock never goes back)."""

from __future__ import annotations

import itertools
from datetime import timedelta

from bench.eval_learning import Week, history, table


def test_the_phrasings_are_asked_at_the_end_of_every_week_of_the_history_in_conversations_of_their_own():
    events, probes = history("kestrel")
    asked = [e for e in events if e["conversation_id"].startswith("probe-")]
    cases = [e for e in events if not e["conversation_id"].startswith("probe-")]
    assert len(probes) == 7 and all(b - a == timedelta(days=7) for a, b in itertools.pairwise(probes))
    assert len(asked) == 7 * 61 and len({e["conversation_id"] for e in asked}) == len(asked)
    assert max(e.get("sent_at") or e["at"] for e in cases) < asked[-1]["sent_at"]
    moments = [e.get("sent_at") or e["at"] for e in events]
    assert moments == sorted(moments)


def test_the_table_sets_the_miner_on_beside_off_week_by_week():
    _, probes = history("kestrel")
    on = [Week(1, probes[0], 50, 25, 5, 1, 10, 2)]
    off = [Week(1, probes[0], 50, 0, 0, 0, 10, 0)]
    assert "| 1 (13 Sep) | 25/50 (0.50) | 5 (1) | 2/10 | 0/50 (0.00) |" in table("kestrel", on, off)
