"""Gates per suggestion kind: a chain asked in order, the first refusal naming the reason, the base rule elsewhere."""

from __future__ import annotations

from datetime import UTC, datetime

from vigil.flow.case import CaseState
from vigil.flow.gates import Chain, ConfidenceGate, Decision, Gates
from vigil.flow.skills import Proposal
from vigil.wire.events import Event, Message

NOW = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
MESSAGE = Message(
    type="message",
    schema_version=1,
    message_id="m-1",
    conversation_id="c-1",
    sent_at=NOW,
    role="customer",
    text="How do I set up an eSIM?",
)


class Noted:
    """A gate that notes when it is asked, and refuses with ``reason`` if it has one."""

    def __init__(self, name: str, asked: list[str], reason: str | None = None) -> None:
        self.name, self.asked, self.reason = name, asked, reason

    def _decide(self, question: str) -> Decision:
        self.asked.append(f"{self.name}.{question}")
        return Decision.silence(self.reason) if self.reason else Decision.allow()

    async def admit(self, kind: str, event: Event, case: CaseState | None) -> Decision:
        return self._decide("admit")

    async def review(self, proposal: Proposal, event: Event, case: CaseState | None) -> Decision:
        return self._decide("review")

    def timely(self, event: Event, *, superseded: bool) -> Decision:
        return self._decide("timely")


def proposal(kind: str = "answer", confidence: float = 0.9) -> Proposal:
    return Proposal(kind=kind, text="Settings > Mobile Service > Add eSIM", confidence=confidence)


async def test_the_first_gate_that_refuses_names_the_reason_and_those_after_it_are_not_asked():
    asked: list[str] = []
    chain = Chain([Noted("a", asked), Noted("b", asked, "repeated_question"), Noted("c", asked, "case_closed")])
    assert await chain.admit("answer", MESSAGE, None) == Decision.silence("repeated_question")
    assert await chain.review(proposal(), MESSAGE, None) == Decision.silence("repeated_question")
    assert chain.timely(MESSAGE, superseded=False) == Decision.silence("repeated_question")
    assert asked == ["a.admit", "b.admit", "a.review", "b.review", "a.timely", "b.timely"]


async def test_a_chain_asks_its_gates_in_order_and_speaks_when_all_allow():
    asked: list[str] = []
    chain = Chain([Noted("second", asked), Noted("first", asked), Noted("third", asked)])
    assert (await chain.admit("answer", MESSAGE, None)).speak
    assert asked == ["second.admit", "first.admit", "third.admit"]


async def test_a_kind_with_no_chain_gets_the_base_rule():
    asked: list[str] = []
    gates = Gates({"answer": [Noted("policy", asked, "not_a_question")]}, base=ConfidenceGate(0.5))
    assert await gates["answer"].review(proposal("answer"), MESSAGE, None) == Decision.silence("not_a_question")
    assert await gates["next_step"].review(proposal("next_step", 0.4), MESSAGE, None) == Decision.silence(
        "low_confidence"
    )
    assert (await gates["next_step"].review(proposal("next_step", 0.6), MESSAGE, None)).speak
    assert (await gates["next_step"].admit("next_step", MESSAGE, None)).speak
    assert asked == ["policy.review"]  # the answers' gate is never asked about another kind
    assert gates.kinds == {"answer"}


async def test_a_kind_whose_chain_is_empty_gets_the_base_rule_too():
    gates = Gates({"answer": []}, base=ConfidenceGate(0.5))
    assert await gates["answer"].review(proposal("answer", 0.1), MESSAGE, None) == Decision.silence("low_confidence")


async def test_cards_that_are_not_guesses_are_not_held_to_the_answers_confidence_floor(tmp_path):
    """Each capability gates its own kinds: with the answers' floor at 0.95, an answer at 0.9 is silenced, but an
    action's card, an escalation, a handover brief and a reminder are not (a kind nobody gates keeps the floor)."""
    from vigil.app.compose import compose
    from vigil.app.settings import Settings

    settings = Settings(_env_file=None, data_dir=tmp_path, answers={"enabled": False, "min_confidence": 0.95})
    gates = compose(settings, only=["cases", "progress", "actions"]).gates
    for kind in ("action", "escalation", "handover", "follow_up"):
        assert (await gates[kind].review(proposal(kind, 0.8), MESSAGE, None)).speak, kind
    assert not (await gates["answer"].review(proposal("answer", 0.9), MESSAGE, None)).speak
