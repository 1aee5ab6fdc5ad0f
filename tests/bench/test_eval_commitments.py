"""bench.eval_commitments' scoring: the split, matching predicted promises to gold ones, and what counts as right."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.eval_commitments import Span, due_agrees, load, match, score_message, split_of

NOON = datetime(2026, 1, 14, 12, 0, tzinfo=UTC)


def test_the_split_is_a_stable_hash_of_the_id_and_roughly_halves_the_set():
    assert split_of("brightwave-001") == split_of("brightwave-001")
    dev, test = load("commitments.jsonl", "dev"), load("commitments.jsonl", "test")
    assert len(dev) + len(test) == 225 and {r["id"] for r in dev}.isdisjoint(r["id"] for r in test)
    assert 100 <= len(dev) <= 125


def test_a_due_time_is_right_within_a_minute_or_when_both_are_none():
    assert due_agrees(NOON + timedelta(seconds=60), NOON)
    assert not due_agrees(NOON + timedelta(seconds=61), NOON)
    assert due_agrees(None, None)
    assert not due_agrees(NOON, None) and not due_agrees(None, NOON)


def test_overlapping_spans_match_first_and_the_rest_by_order():
    gold = [Span(0, 10, NOON), Span(20, 30, None)]
    predicted = [Span(25, 40, None), Span(50, 60, NOON)]
    pairs = match(predicted, gold)
    assert (predicted[0], gold[1], False) in pairs and (predicted[1], gold[0], True) in pairs


def test_a_message_scores_found_spurious_missed_and_due_times():
    score = score_message([Span(0, 10, NOON), Span(40, 50, None), Span(60, 70, None)], [Span(5, 15, NOON)])
    assert (score.found, score.spurious, score.missed, score.due_right) == (1, 2, 0, 1)
    missed = score_message([], [Span(0, 10, NOON)])
    assert (missed.found, missed.missed, missed.recall) == (0, 1, 0.0)
    wrong_time = score_message([Span(0, 10, NOON + timedelta(hours=1))], [Span(0, 10, NOON)])
    assert wrong_time.due_right == 0 and wrong_time.precision == 1.0
