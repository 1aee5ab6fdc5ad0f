"""``vigil policy check``: decide a file of action requests, one verdict a line, as a support-operations lead does
before changing a rule (what would this rulebook say about last month's actions?).

Input, one JSON object a line (``ActionRequest``)::

    {"action": "refund_order", "args": {"order_id": "ORD-10001", "amount_cents": 1500, ...},
     "context": {"identity_verified": true, "confirmed": true, "customer": {"id": "BW-100001"},
                 "order": {"customer_id": "BW-100001", "status": "delivered", ...}},
     "tenant": "brightwave", "role": "analyst"}

Output, one JSON object a line, in the same order: ``{"verdict": "allow"|"needs_approval"|"deny", "rule", "reason"}``.
A line that is not a request is denied under the rule ``invalid_request`` with what is wrong, so the output stays
line for line with the input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from pydantic import ValidationError

from vigil.actions.policy import Verdict
from vigil.actions.rulebook import ActionRequest, Rulebook

INVALID_REQUEST = "invalid_request"


def check(rulebook: Rulebook, lines: Iterable[str]) -> Iterator[Verdict]:
    """The verdict for each line of ``lines`` (blank lines included, as invalid requests)."""
    for number, line in enumerate(lines, start=1):
        try:
            request = ActionRequest.model_validate_json(line)
        except ValidationError as exc:
            problem = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in problem["loc"]) or "the line"
            yield Verdict("deny", INVALID_REQUEST, f"line {number}: {where}: {problem['msg']}")
            continue
        yield rulebook.decide(request)


def render(verdict: Verdict) -> str:
    """One output line."""
    return json.dumps(verdict.to_json(), ensure_ascii=False)
