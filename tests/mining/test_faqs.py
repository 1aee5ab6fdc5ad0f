"""FAQs from several entries: entries of one problem whose answers agree make one FAQ, founded by the entry of the
earliest case; contradicting answers, and entries waiting for review for a disagreement, keep an FAQ away."""

from __future__ import annotations

import numpy as np

from vigil.mining.faqs import group
from vigil.mining.merge import Cluster, Member

CLAIM = "I've opened a missing parcel claim with the photo; the refund reaches your card within 3 working days."
CLAIM_AGAIN = "I raised a missing parcel claim using the photo, and the refund reaches your card in 3 working days."
NO_CLAIM = "A parcel left in your safe place is not covered, so no claim: ask the seller and the police instead."


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def entry(entry_id: str, vector: np.ndarray, *cases: tuple[str, str, str]) -> Cluster:
    """An entry of cases (conversation id, closed at, resolution), all at ``vector``."""
    members = [
        Member(cid, closed, f"problem of {cid}", (fix,), None, None, (), (), vector, vector)
        for cid, closed, fix in cases
    ]
    return Cluster(entry_id, "t", members)


def test_entries_of_one_problem_whose_answers_agree_make_one_faq_founded_by_the_earliest_case_s_entry():
    a = entry("e-a", unit(1, 0.2, 0), ("c2", "2026-11-03", CLAIM))
    b = entry("e-b", unit(1, -0.2, 0), ("c1", "2026-11-02", CLAIM_AGAIN), ("c4", "2026-11-05", CLAIM))
    c = entry("e-c", unit(1, 0, 0.2), ("c3", "2026-11-04", CLAIM_AGAIN))
    [faq] = group([a, b, c], [], similarity=0.9, agreement=0.45, min_cases=3)
    assert faq.founder is b
    assert [o.entry_id for o in faq.others] == ["e-a", "e-c"]
    assert sorted(m.conversation_id for m in faq.members) == ["c1", "c2", "c3", "c4"]


def test_too_few_cases_or_too_far_apart_is_no_faq():
    a = entry("e-a", unit(1, 0.2, 0), ("c1", "2026-11-02", CLAIM))
    b = entry("e-b", unit(1, -0.2, 0), ("c2", "2026-11-03", CLAIM_AGAIN))
    far = entry("e-far", unit(0, 1, 0), ("c3", "2026-11-04", CLAIM))
    assert group([a, b, far], [], similarity=0.9, agreement=0.45, min_cases=3) == []
    assert len(group([a, b], [], similarity=0.9, agreement=0.45, min_cases=2)) == 1


def test_entries_whose_answers_contradict_do_not_join():
    a = entry("e-a", unit(1, 0.2, 0), ("c1", "2026-11-02", CLAIM), ("c2", "2026-11-03", CLAIM_AGAIN))
    b = entry("e-b", unit(1, -0.2, 0), ("c3", "2026-11-04", NO_CLAIM), ("c4", "2026-11-05", NO_CLAIM))
    assert group([a, b], [], similarity=0.9, agreement=0.45, min_cases=3) == []


def test_a_group_near_an_entry_waiting_for_review_for_a_disagreement_is_no_faq():
    a = entry("e-a", unit(1, 0.2, 0), ("c1", "2026-11-02", CLAIM))
    b = entry("e-b", unit(1, -0.2, 0), ("c2", "2026-11-03", CLAIM_AGAIN), ("c3", "2026-11-04", CLAIM))
    disputed = entry("e-d", unit(1, 0, 0.1), ("c4", "2026-11-05", CLAIM), ("c5", "2026-11-06", NO_CLAIM))
    assert len(group([a, b], [], similarity=0.9, agreement=0.45, min_cases=3)) == 1
    assert group([a, b], [disputed], similarity=0.9, agreement=0.45, min_cases=3) == []


def test_average_linkage_does_not_chain_one_problem_into_the_next():
    # b is near both a and c, but a and c are far apart: a group's cases must be near on average, not in a chain.
    a = entry("e-a", unit(1, 0, 0), ("c1", "2026-11-02", CLAIM), ("c2", "2026-11-03", CLAIM))
    b = entry("e-b", unit(1, 1, 0), ("c3", "2026-11-04", CLAIM))
    c = entry("e-c", unit(0, 1, 0), ("c4", "2026-11-05", CLAIM), ("c5", "2026-11-06", CLAIM))
    found = group([a, b, c], [], similarity=0.7, agreement=0.45, min_cases=3)
    assert len(found) == 1 and len(found[0].members) == 3
