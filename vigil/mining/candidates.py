"""An FAQ proposed from what an analyst wrote, waiting for a lead's review.

Two things an analyst writes say what a customer should have been told: an answer they edited before sending
(``edits.py``) and a reply that settled a question vigil did not answer (``replies.py``). Each becomes an FAQ of its
tenant with ``pending_review`` status: the customer's message as its question and the analyst's words as its answer,
both redacted as mined entries are. Its provenance has the shape of a mined entry's, one case stated (the review
page reads them alike), plus what it was proposed from, under its origin's name. Approved, it is served like any FAQ
of the tenant; retired, it stays retired: its id is stable, and a candidate already written is never written again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vigil.knowledge.documents import Entry, Passage
from vigil.knowledge.store import Governance

CONFIDENCE = round(2 / 3, 4)
"""As a mined entry of one case that went well: (1 + 1) / (1 + 2)."""


def proposed(
    *,
    entry_id: str,
    origin: str,
    tenant: str,
    conversation_id: str,
    question: str,
    answer: str,
    disagrees_with: Sequence[str],
    source: Mapping[str, Any],
) -> tuple[Entry, Governance]:
    """The FAQ asking ``question`` and answering ``answer`` (both redacted already), waiting for review; it names
    the entries it would replace (``disagrees_with``: the review page shows them beside it) and, under ``origin``,
    the ``source`` it was proposed from."""
    entry = Entry(
        id=entry_id,
        kind="faq",
        title=question,
        body=answer,
        origin=origin,
        url=f"/panel/conversations/{conversation_id}",
        questions=(question,),
        passages=(Passage(id=f"{entry_id}#1", heading=None, text=f"{question}\n{answer}"),),
        tenant=tenant,
    )
    provenance = {
        "source": origin,
        "support": 1,
        "kept": conversation_id,
        "conflicts": [],
        "conflicts_with": list(disagrees_with),
        "cases": [{"conversation_id": conversation_id, "problem": question, "steps": [answer]}],
        origin: dict(source),
    }
    return entry, Governance(status="pending_review", confidence=CONFIDENCE, provenance=provenance)
