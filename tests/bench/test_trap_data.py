"""The near-miss evaluation data of issue 26 (bench/data/brightwave-traps.jsonl, bench/data/helpdesk-ferncastle/):
customer phrasings written blind from a help centre, each with the entries that answer it. The checks say what the
files promise their readers; they read the help centres, never a ranking."""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from vigil.knowledge.documents import Entry, discover, read

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "data"
FERNCASTLE = DATA / "helpdesk-ferncastle"
STYLES = {"plain", "terse", "typo", "no-punct", "long-context", "emotional", "non-native", "formal"}
SETS = {
    "brightwave": (DATA / "brightwave-traps.jsonl", "bw-t-"),
    "ferncastle": (FERNCASTLE / "phrasings.jsonl", "fc-p-"),
}
"""Each set's phrasings and the prefix of their ids."""


@cache
def help_centre(name: str) -> tuple[Entry, ...]:
    if name == "brightwave":
        paths = discover([ROOT / "knowledge" / "articles", ROOT / "knowledge" / "faqs"])
    else:
        paths = [FERNCASTLE / "faqs.yaml"]  # not the folder: its phrasings.jsonl would be read as documents
    return tuple(e for p in paths for e in read(p))


def rows(name: str) -> list[dict[str, Any]]:
    path, _ = SETS[name]
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def plain(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


@pytest.mark.parametrize("name", SETS)
def test_every_row_has_the_schema_and_an_id_of_its_own(name: str) -> None:
    _, prefix = SETS[name]
    found = rows(name)
    assert [r["id"] for r in found] == [f"{prefix}{n:03d}" for n in range(1, len(found) + 1)]
    for row in found:
        assert set(row) - {"note"} == {"id", "text", "answer_ids", "style", "hard"}, row["id"]
        assert row["text"].strip() and row["style"] in STYLES and isinstance(row["hard"], bool), row["id"]
        assert len(set(row["answer_ids"])) == len(row["answer_ids"]), row["id"]
        assert not row["hard"] or row.get("note"), f"{row['id']}: a trap names what it must be told apart from"


@pytest.mark.parametrize("name", SETS)
def test_every_answer_is_an_entry_of_the_help_centre(name: str) -> None:
    ids = {e.id for e in help_centre(name)}
    unknown = {(r["id"], a) for r in rows(name) for a in r["answer_ids"] if a not in ids}
    assert not unknown


@pytest.mark.parametrize("name", SETS)
def test_no_phrasing_copies_a_question_the_help_centre_holds_or_another_phrasing(name: str) -> None:
    held = {plain(q) for e in help_centre(name) for q in e.questions}
    if name == "brightwave":
        earlier = (DATA / "brightwave-phrasings.jsonl").read_text("utf-8").splitlines()
        held |= {plain(json.loads(line)["text"]) for line in earlier if line.strip()}
    texts = [plain(r["text"]) for r in rows(name)]
    assert not held & set(texts)
    assert len(set(texts)) == len(texts)


def test_the_ferncastle_faqs_load_as_32_faqs_each_with_alternates() -> None:
    entries = help_centre("ferncastle")
    assert len(entries) == 32
    assert all(e.kind == "faq" and e.id.startswith("fc-") and 3 <= len(e.questions) <= 5 for e in entries)


@pytest.mark.parametrize(
    ("name", "total", "traps", "unanswerable"), [("brightwave", 130, 80, 13), ("ferncastle", 80, 35, 6)]
)
def test_each_set_holds_enough_traps_and_questions_left_unanswered(
    name: str, total: int, traps: int, unanswerable: int
) -> None:
    found = rows(name)
    assert len(found) >= total
    assert sum(1 for r in found if r["hard"] and r["answer_ids"]) >= traps
    assert sum(1 for r in found if not r["answer_ids"]) >= unanswerable


def test_every_ferncastle_faq_is_the_first_answer_of_some_phrasing() -> None:
    first = Counter(r["answer_ids"][0] for r in rows("ferncastle") if r["answer_ids"])
    assert {e.id for e in help_centre("ferncastle")} <= set(first)


def test_the_reported_brightwave_failures_are_in_the_set_with_their_answers() -> None:
    by_text = {r["text"]: r["answer_ids"] for r in rows("brightwave")}
    assert by_text["I want to leave brightwave but keep my mobile number"][0] == "faq-get-pac"
    assert by_text["Is roaming in Spain included on my 5GB plan?"][0] == "faq-roaming-europe"
    assert by_text["my hub has a steady orange light"][0] == "faq-hub-solid-amber"
    assert by_text["my hub keeps switching itself off and on by itself"][0] == "faq-hub-keeps-restarting"
    assert by_text["My static IP isn't showing in the app after I added it yesterday"][0] == "faq-find-static-ip"
    assert "faq-first-bill-higher" not in by_text["My bill this month is £20 higher than usual and I can't see why"]
