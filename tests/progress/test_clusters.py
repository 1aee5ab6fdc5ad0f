"""Analyst turns grouped into steps by their words: the index of centres finds what a scan of them all would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.progress import clusters
from vigil.progress.clusters import Centres

_TERMS = st.sampled_from([f"w{i}" for i in range(12)])
_VECTOR = st.dictionaries(_TERMS, st.floats(min_value=0.01, max_value=5.0), max_size=6).map(clusters._unit)


def _scan(v: dict[str, float], centres: list[dict[str, float]], *, last: bool = False) -> tuple[int, float]:
    """The nearest centre the slow way: every one compared, in order."""
    best, sim = -1, -1.0
    for k, c in enumerate(centres):
        s = clusters.cosine(v, c)
        if s > sim or (last and s == sim):
            best, sim = k, s
    return best, sim


@settings(max_examples=300, deadline=None)
@given(st.lists(_VECTOR, max_size=12), _VECTOR, st.booleans())
def test_the_nearest_centre_is_the_one_a_scan_of_every_centre_finds(
    centres: list[dict[str, float]], v: dict[str, float], last: bool
) -> None:
    assert Centres(centres).nearest(v, last=last) == _scan(v, centres, last=last)


@settings(max_examples=300, deadline=None)
@given(st.lists(_VECTOR, max_size=12), _VECTOR, st.floats(min_value=0.05, max_value=0.95))
def test_with_a_floor_only_a_centre_at_or_above_it_is_found(
    centres: list[dict[str, float]], v: dict[str, float], floor: float
) -> None:
    best, sim = _scan(v, centres)
    found, found_sim = Centres(centres).nearest(v, floor)
    if sim >= floor:
        assert (found, found_sim) == (best, sim)
    else:
        assert found == -1 and found_sim < floor


@settings(max_examples=200, deadline=None)
@given(st.lists(_VECTOR, min_size=2, max_size=10), st.lists(_VECTOR, min_size=1, max_size=4), _VECTOR)
def test_a_moved_centre_is_found_where_it_is_now(
    centres: list[dict[str, float]], moved: list[dict[str, float]], v: dict[str, float]
) -> None:
    index = Centres(centres)
    for n, c in enumerate(moved):
        index.replace(n % len(centres), c)
        centres[n % len(centres)] = c
    assert index.nearest(v) == _scan(v, centres)


def test_without_centres_there_is_no_nearest() -> None:
    assert Centres().nearest({"w1": 1.0}) == (-1, -1.0)


def test_a_text_sharing_no_word_with_any_centre_goes_to_the_first_as_a_scan_would() -> None:
    index = Centres([{"a": 1.0}, {"b": 1.0}])
    assert index.nearest({"c": 1.0}) == (0, 0.0)
    assert index.nearest({"c": 1.0}, last=True) == (1, 0.0)
    assert index.nearest({"c": 1.0}, 0.5)[0] == -1


def test_replies_sent_again_and_again_form_their_own_group_and_numbers_are_one_token() -> None:
    texts = [
        "your balance is 5703",
        "your balance is 120",
        "your balance is 88",
        "please restart the router",
        "please restart the router now",
        "restart the router please",
    ]
    groups = clusters.cluster(texts)
    assert groups[0] == groups[1] == groups[2]
    assert groups[3] == groups[4] == groups[5]
    assert groups[0] != groups[3]
