"""Next steps on the real pipeline: procedures mined from a tenant's resolved cases, the next step suggested with
its procedure and label, a required step flagged when skipped, and where the case stands kept for the panel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.progress.test_skill import T0, at, change, say, settings
from vigil.core.clock import ManualClock
from vigil.progress.library import MINE
from vigil.testing import Wired, wired

SCRIPT = [
    ("customer", "Hi, I have moved and need to change my delivery address", None),
    ("analyst", "I can help with that. Can you confirm your date of birth and postcode?", "verify_identity"),
    ("customer", "12 May 1980, and the old postcode is SW1A 1AA", None),
    ("analyst", "Thanks, you're verified. What is the new address?", "ask_new_address"),
    ("customer", "4 Elm Road, Leeds LS1 4AP", None),
    ("analyst", "Done: deliveries now go to 4 Elm Road, Leeds LS1 4AP.", "change_address"),
    ("customer", "great thanks", None),
    ("analyst", "Is there anything else I can help with?", "anything_else"),
]


async def resolved_cases(vigil: Wired, count: int, category: str | None = "address_change") -> None:
    for n in range(count):
        conversation = f"done-{n}"
        await vigil.send(change(0, "opened", 0, conversation, **({"category": category} if category else {})))
        for i, (role, text, step) in enumerate(SCRIPT, 1):
            extra = {"metadata": {"step": step}} if step else {}
            await vigil.send(say(i, role, text, i, conversation, **extra))
        await vigil.send(change(99, "closed", 20, conversation, resolution={"resolved_by": "human"}))


@pytest.fixture
async def vigil(tmp_path: Path) -> AsyncIterator[Wired]:
    config = settings(tmp_path, procedures_min_cases=5)
    async with wired(tmp_path, settings=config, clock=ManualClock(T0)) as running:
        await resolved_cases(running, 6)
        mine = next(job for job in running.parts.jobs if job.name == MINE)
        await mine.run(at(30))
        yield running


def next_steps(vigil: Wired, conversation: str) -> list[tuple[str, str, str]]:
    return [
        (s.step.procedure, s.step.label, s.text)
        for s in vigil.published
        if s.kind == "next_step" and s.conversation_id == conversation and s.step is not None
    ]


async def test_nothing_is_suggested_before_any_procedure_is_mined(tmp_path: Path):
    async with wired(tmp_path, settings=settings(tmp_path), clock=ManualClock(T0)) as vigil:
        await vigil.send(say(1, "customer", "I need to change my delivery address", 0, "new"))
        assert next_steps(vigil, "new") == []


async def test_a_procedure_mined_from_too_few_cases_is_not_followed(tmp_path: Path):
    async with wired(tmp_path, settings=settings(tmp_path, procedures_min_cases=7), clock=ManualClock(T0)) as vigil:
        await resolved_cases(vigil, 6)
        await next(job for job in vigil.parts.jobs if job.name == MINE).run(at(30))
        await vigil.send(change(0, "opened", 40, "new", category="address_change"))
        await vigil.send(say(1, "customer", "Hello, I moved house last week", 41, "new"))
        assert next_steps(vigil, "new") == []


async def test_the_next_step_comes_from_the_procedure_named_by_the_cases_category(vigil: Wired):
    await vigil.send(change(0, "opened", 40, "new", category="address_change"))
    await vigil.send(say(1, "customer", "Hello, I moved house last week", 41, "new"))
    ((procedure, label, text),) = next_steps(vigil, "new")
    assert (procedure, label) == ("address_change", "verify_identity")
    assert text == "I can help with that. Can you confirm your date of birth and postcode?"
    got = await vigil.views.conversation("new")
    assert got is not None and got.progress is not None
    assert (got.progress.procedure, got.progress.next_step) == ("address_change", "verify_identity")


async def test_the_case_is_followed_through_the_procedure_step_by_step(vigil: Wired):
    await vigil.send(say(1, "customer", "Hi, I need to change my delivery address", 40, "new"))
    await vigil.send(
        say(
            2,
            "analyst",
            "Can you confirm your date of birth and postcode?",
            41,
            "new",
            metadata={"step": "verify_identity"},
        )
    )
    await vigil.send(say(3, "customer", "12 May 1980, SW1A 1AA", 42, "new"))
    assert [label for _, label, _ in next_steps(vigil, "new")] == ["verify_identity", "ask_new_address"]
    got = await vigil.views.conversation("new")
    assert got is not None and got.progress is not None and got.progress.step == "verify_identity"


async def test_a_step_taken_before_the_one_it_requires_is_flagged(vigil: Wired):
    await vigil.send(say(1, "customer", "Hi, I need to change my delivery address to 4 Elm Road", 40, "new"))
    await vigil.send(
        say(2, "analyst", "Done: deliveries now go to 4 Elm Road.", 41, "new", metadata={"step": "change_address"})
    )
    flagged = [s for s in vigil.published if s.kind == "next_step" and s.text.startswith("Before change_address")]
    assert len(flagged) == 1 and flagged[0].step is not None and flagged[0].step.label == "verify_identity"
    assert flagged[0].text.startswith("Before change_address: verify_identity, ask_new_address have not been done")
    assert flagged[0].text.endswith("Can you confirm your date of birth and postcode?")


async def test_no_next_step_on_a_closed_case(vigil: Wired):
    await vigil.send(say(1, "customer", "Hi, I need to change my delivery address", 40, "new"))
    await vigil.send(change(2, "closed", 41, "new"))
    before = len(vigil.published)
    await vigil.send(say(3, "customer", "hello?", 42, "new"))
    assert len(vigil.published) == before
