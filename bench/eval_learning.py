"""The learning curve on replayed history: week by week, the share of new customers' questions answered right from
mined knowledge, with the miner on and off.

    python -m bench.eval_learning --company hearthlight      # a reported company (and copperleaf)
    python -m bench.eval_learning --company kestrel          # the tune company (and thistledown)

A company's labelled cases (``bench/data/mining-<company>-cases.jsonl``: seven weeks of chats, opened, answered and
closed) are replayed through ``vigil eval replay`` (the CLI, a subprocess: the real pipeline on the events' own time,
the scheduler firing the miner every simulated day) into an empty store with no other knowledge. At the end of each
week of that history, every new customer phrasing of the company (``-phrasings.jsonl``: its recurring problems in
other words, and questions no case answers) is asked again, each in a conversation of its own that never closes.
What vigil answered is read from the suggestions the replay wrote; what each answer cited first is looked up in the
store the replay left: an answer is right when that entry's cases are mostly of the phrasing's problem (as
``bench.eval_mining`` scores it). Per week:
- **answered right**: of the answerable phrasings, the share with a published answer that is right (an answer is
  published only past the gate's confidence floor);
- **wrong**: answers to answerable phrasings that cite another problem's entry, and those at 0.8 or more;
- **unanswerable answered**: of the phrasings no case answers, how many got an answer at all.

With the miner off, vigil knows nothing of the company, and says nothing: the curve starts at 0 and stays there.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.eval_mining import problem_of, rows

CONFIDENT = 0.8
MINE_EVERY_S = 86_400
"""The miner's interval in simulated time: once a day."""


@dataclass(frozen=True)
class Week:
    number: int
    at: datetime
    answerable: int
    right: int
    wrong: int
    wrong_confident: int
    unanswerable: int
    unanswerable_answered: int


def _when(row: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(row.get("sent_at") or row["at"]).replace("Z", "+00:00"))


def history(company: str) -> tuple[list[dict[str, Any]], list[datetime]]:
    """The company's events with the phrasings asked at the end of each week of its history, in time order; and
    the moments the phrasings are asked."""
    events = rows(company, "cases")
    phrasings = rows(company, "phrasings")
    tenant = next(e["tenant"] for e in events if e.get("tenant"))
    first, last = min(map(_when, events)), max(map(_when, events))
    monday = (first - timedelta(days=first.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    probes: list[datetime] = []
    at = monday + timedelta(days=7)
    while at - timedelta(days=7) <= last:
        probes.append(at - timedelta(hours=1))
        at += timedelta(days=7)
    asked = [
        {
            "type": "message",
            "schema_version": 1,
            "message_id": f"probe-w{week}-{p['id']}",
            "conversation_id": f"probe-w{week}-{p['id']}",
            "tenant": tenant,
            "sent_at": (moment + timedelta(seconds=n)).isoformat().replace("+00:00", "Z"),
            "role": "customer",
            "author": f"Probe {n}",
            "text": p["text"],
        }
        for week, moment in enumerate(probes, start=1)
        for n, p in enumerate(phrasings)
    ]
    return sorted(events + asked, key=_when), probes


def replay(events: list[dict[str, Any]], folder: Path, *, miner: bool) -> tuple[list[dict[str, Any]], Path]:
    """``vigil eval replay`` on ``events`` into a store of its own in ``folder``; the suggestions it published,
    and the SQLite database it left."""
    folder.mkdir(parents=True, exist_ok=True)
    source, out, database = folder / "events.jsonl", folder / "suggestions.jsonl", folder / "vigil.db"
    source.write_text("".join(json.dumps(e) + "\n" for e in events), "utf-8")
    env = {
        **os.environ,
        "VIGIL_DATA_DIR": str(folder),
        "VIGIL_DATABASE__URL": f"sqlite+aiosqlite:///{database}",
        "VIGIL_ANSWERS__ENABLED": "true",
        "VIGIL_KNOWLEDGE__PATHS": "[]",
        "VIGIL_MINER__ENABLED": "true" if miner else "false",
        "VIGIL_MINER__INTERVAL_S": str(MINE_EVERY_S),
        "VIGIL_MINER__REQUIRE_REVIEW": "false",  # served as mined: what the miner learns, not what a lead approved
        "VIGIL_LLM__API_KEY": "",
    }
    vigil = Path(sys.executable).with_name("vigil")  # the venv's console script
    command = [str(vigil), "eval", "replay", str(source), "--out", str(out), "--fresh"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"vigil eval replay exited {done.returncode}:\n{done.stderr[-4000:]}")
    suggestions = [json.loads(line) for line in out.read_text("utf-8").splitlines() if line.strip()]
    return suggestions, database


def problems_of_entries(database: Path, labels: dict[str, dict[str, Any]]) -> dict[str, str | None]:
    """Each entry's problem, by id, as ``bench.eval_mining`` reads it."""
    with sqlite3.connect(database) as conn:
        stored = conn.execute("SELECT id, provenance FROM knowledge_entry").fetchall()
    return {
        identity: problem_of({"provenance": (json.loads(provenance) if provenance else None) or {"cases": []}}, labels)
        for identity, provenance in stored
    }


def curve(company: str, folder: Path, *, miner: bool) -> list[Week]:
    events, probes = history(company)
    labels = {r["conversation_id"]: r for r in rows(company, "labels")}
    phrasings = {p["id"]: p for p in rows(company, "phrasings")}
    suggestions, database = replay(events, folder / ("on" if miner else "off"), miner=miner)
    problems = problems_of_entries(database, labels) if database.exists() else {}
    answers: dict[str, dict[str, Any]] = {}
    for s in suggestions:
        if s["kind"] == "answer" and s["conversation_id"].startswith("probe-"):
            answers.setdefault(s["conversation_id"], s)
    weeks = []
    for week, moment in enumerate(probes, start=1):
        tally: Counter[str] = Counter()
        for pid, phrasing in phrasings.items():
            answer = answers.get(f"probe-w{week}-{pid}")
            cited = problems.get(answer["sources"][0]["id"]) if answer and answer["sources"] else None
            if phrasing["problem"] is None:
                tally["unanswerable"] += 1
                tally["unanswerable_answered"] += answer is not None
                continue
            tally["answerable"] += 1
            if answer is None:
                continue
            if cited == phrasing["problem"]:
                tally["right"] += 1
            else:
                tally["wrong"] += 1
                tally["wrong_confident"] += answer["confidence"] >= CONFIDENT
        weeks.append(
            Week(
                week,
                moment,
                tally["answerable"],
                tally["right"],
                tally["wrong"],
                tally["wrong_confident"],
                tally["unanswerable"],
                tally["unanswerable_answered"],
            )
        )
    return weeks


def table(company: str, on: list[Week], off: list[Week]) -> str:
    lines = [
        f"{company}: new phrasings asked at the end of each week of replayed history",
        "",
        "| week (asked) | answered right, miner on | wrong (at >= 0.8) | unanswerable answered | answered right, "
        "miner off |",
        "|---|---|---|---|---|",
    ]
    for a, b in zip(on, off, strict=True):
        lines.append(
            f"| {a.number} ({a.at:%d %b}) | {a.right}/{a.answerable} ({a.right / a.answerable:.2f}) | "
            f"{a.wrong} ({a.wrong_confident}) | {a.unanswerable_answered}/{a.unanswerable} | "
            f"{b.right}/{b.answerable} ({b.right / b.answerable:.2f}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--company", choices=("kestrel", "hearthlight", "copperleaf", "thistledown"), required=True)
    parser.add_argument("--keep", type=Path, help="keep the replays' stores and files here (default: a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vigil-learning-") as scratch:
        folder = args.keep or Path(scratch)
        on = curve(args.company, folder, miner=True)
        off = curve(args.company, folder, miner=False)
    print(table(args.company, on, off))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
