"""Merging: a case joins the entry of the same problem; the entry states its best-supported resolution; cases
that resolve it differently are conflicts."""

from __future__ import annotations

import numpy as np

from vigil.mining.merge import Cluster, Clusters, Member, content_words, overlap
from vigil.mining.settings import MinerSettings


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def member(cid: str, vector: np.ndarray, *steps: str, outcome: str | None = None) -> Member:
    return Member(cid, "2026-11-02T09:00:00+00:00", f"problem of {cid}", steps, outcome, None, (), (), vector, vector)


def one_entry(*members: Member) -> Cluster:
    """The cases of one entry."""
    return Cluster("e1", "t", list(members))


def test_a_case_joins_the_nearest_entry_at_the_threshold_and_starts_its_own_below_it():
    clusters = Clusters()
    a = clusters.add(member("c1", unit(1, 0, 0), "restart it"), entry_id="e1", tenant="t", threshold=0.8)
    b = clusters.add(member("c2", unit(1, 0.2, 0), "restart it"), entry_id="e2", tenant="t", threshold=0.8)
    c = clusters.add(member("c3", unit(0, 1, 0), "refund it"), entry_id="e3", tenant="t", threshold=0.8)
    assert a is b and a.entry_id == "e1" and len(a.members) == 2
    assert c.entry_id == "e3"
    assert len(clusters) == 2


def test_clusters_grow_past_their_first_allocation():
    clusters = Clusters()
    for n in range(40):
        angle = n * np.pi / 80
        clusters.add(member(f"c{n}", unit(np.cos(angle), np.sin(angle))), entry_id=f"e{n}", tenant="t", threshold=1.0)
    assert len(clusters) == 40
    index, similarity = clusters.nearest(unit(np.cos(39 * np.pi / 80), np.sin(39 * np.pi / 80)))
    assert index == 39 and similarity > 0.999


def test_the_entry_keeps_the_resolution_most_cases_agree_with():
    v = unit(1, 0, 0)
    cluster = one_entry(
        member("c1", v, "Call the courier depot and ask for a redelivery slot."),
        member("c2", v, "Open the claim form, choose 'missing parcel', upload the photo; refund in 3 days."),
        member("c3", v, "Fill in the missing parcel claim form with the photo; the refund takes 3 working days."),
        member("c4", v, "Submit a missing parcel claim and attach the photo, refund within 3 days."),
    )
    assert cluster.kept().conversation_id in ("c2", "c3", "c4")
    assert [m.conversation_id for m in cluster.conflicts(0.3)] == ["c1"]


def test_a_resolution_that_negates_the_kept_one_is_a_conflict():
    v = unit(1, 0, 0)
    cluster = one_entry(
        member("c1", v, "The cancellation fee is refundable: I've refunded the fee to your card."),
        member("c2", v, "The cancellation fee is not refundable, I've refunded nothing."),
    )
    assert len(cluster.conflicts(0.3)) == 1


def test_withdrawing_a_case_takes_it_out_of_its_entry():
    clusters = Clusters()
    clusters.add(member("c1", unit(1, 0, 0)), entry_id="e1", tenant="t", threshold=0.8)
    clusters.add(member("c2", unit(1, 0.1, 0)), entry_id="e2", tenant="t", threshold=0.8)
    left = clusters.withdraw("c1")
    assert left is not None and [m.conversation_id for m in left.members] == ["c2"]
    assert clusters.withdraw("c9") is None


def test_a_negation_elsewhere_in_a_resolution_is_no_conflict():
    v = unit(1, 0, 0)
    cluster = one_entry(
        member("c1", v, "The photo doesn't match your address. I've opened a claim; refund in 3 working days."),
        member("c2", v, "I've raised a claim, so you'll get the refund in 3 working days."),
    )
    assert cluster.conflicts(0.45) == []


def test_word_overlap_is_shared_words_over_the_smaller_bag():
    a = content_words("Restart the hub and wait two minutes")
    b = content_words("restart your hub, then wait")
    assert overlap(a, b) == 1.0
    assert overlap(a, frozenset()) == 0.0


def test_two_wordings_of_one_resolution_are_no_conflict_however_few_words_they_share():
    v = unit(1, 0, 0)
    cluster = one_entry(
        member("c1", v, "I've rebooked it for tomorrow, free of charge. The driver comes between 8am and 6pm."),
        member("c2", v, "Go to Collections, press Rebook; the booking you've paid for covers it, at no charge."),
    )
    assert overlap(content_words(cluster.members[0].answer), content_words(cluster.members[1].answer)) < 0.3
    assert cluster.conflicts(MinerSettings().conflict_similarity) == []


def test_a_resolution_that_decides_the_other_way_is_a_conflict_in_any_words():
    v = unit(1, 0, 0)
    cluster = one_entry(
        member("c1", v, "Size adjustments come from the hub's scanner and are final; I'm unable to refund it."),
        member("c2", v, "Reply with a photo and a tape measure within 14 days and we'll refund the £6.40."),
    )
    assert len(cluster.conflicts(MinerSettings().conflict_similarity)) == 1
