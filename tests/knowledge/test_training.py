"""How training batches its rows (the training itself runs in tests/knowledge/test_tuner.py)."""

from __future__ import annotations

import random
from collections import Counter

from vigil.knowledge.training import batches
from vigil.knowledge.tuning import Example


def rows(per_entry: dict[str, int]) -> list[Example]:
    return [Example(f"{e} q{n}", f"{e} passage", "another passage", e) for e, k in per_entry.items() for n in range(k)]


def test_a_batch_never_holds_two_rows_of_one_entry():
    # Two rows of one FAQ would share a positive, and each would be taught away from the other's.
    examples = rows({"faq-bill": 5, "faq-late": 3, "router": 4, **{f"faq-{n}": 1 for n in range(20)}})
    epoch = batches(examples, 8, random.Random(1))
    for batch in epoch:
        assert len(batch) <= 8
        assert len({examples[r].entry_id for r in batch}) == len(batch)


def test_an_epoch_holds_every_row_once():
    examples = rows({"faq-bill": 5, "faq-late": 3, "router": 4, **{f"faq-{n}": 1 for n in range(20)}})
    epoch = batches(examples, 8, random.Random(1))
    assert sorted(r for batch in epoch for r in batch) == list(range(len(examples)))


def test_the_batches_are_seeded():
    examples = rows({"a": 3, "b": 2, "c": 7, "d": 1})
    assert batches(examples, 2, random.Random(7)) == batches(examples, 2, random.Random(7))
    assert Counter(len(b) for b in batches(examples, 2, random.Random(7))).total() >= 7  # c's seven need seven
