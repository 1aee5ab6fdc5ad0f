"""The #ubuntu IRC threads of ``../shared/data/ubuntu-irc`` as v1 message events, for ``vigil eval replay``.

Each thread (jkkummerfeld/irc-disentanglement, train split, CC BY 4.0) becomes a conversation whose id is the
thread's ``thread_id``; each of its lines a ``message`` event with the id ``FILE:LINE`` (unique across threads).
Roles: the thread's first speaker asked, so is the ``customer``; the channel's bots (``ubotu``, ``ubottu``,
``ubot3``) are ``bot``; everyone else who spoke in it is an ``analyst`` (a helper). Times: the log's ``date`` and
``HH:MM``, taken as UTC, with a day added where a log's time falls back across midnight, and never earlier than the
line before it in the same log (so a log's lines stay in order). The events are written in time order across every
thread, as a chat platform would send them (ties: by log, then line). The log, line and ``reply_to`` (which in this
file names the later line that answers it) are kept in ``metadata``.

With ``cases``, each thread is also a case: ``opened`` at its first line, just before it, and ``closed`` as resolved
by a human (``resolution.resolved_by == "human"``) at its last line, just after it: the life a miner of resolved
cases needs (issue 12). A thread has no end in the log; its last line is the best guess of one.

    python eval/ubuntu_irc.py --out ubuntu-train.jsonl [--min-messages 3 --min-speakers 2] [--since D --until D]
    python eval/ubuntu_irc.py --cases --out ubuntu-cases.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
THREADS = ROOT.parent / "shared" / "data" / "ubuntu-irc" / "threads-train.jsonl.gz"
BOTS = frozenset({"ubotu", "ubottu", "ubot3"})
MIDNIGHT_DROP = timedelta(hours=12)
"""A time this much earlier than the line before it in the same log is the next day's."""


@dataclass(frozen=True, slots=True)
class Selection:
    """Which threads to convert: at least so many messages and speakers, dated within [since, until]."""

    min_messages: int = 1
    min_speakers: int = 1
    since: date | None = None
    until: date | None = None

    def keeps(self, thread: dict[str, Any]) -> bool:
        day = date.fromisoformat(thread["date"])
        return (
            len(thread["messages"]) >= self.min_messages
            and len({m["speaker"] for m in thread["messages"]}) >= self.min_speakers
            and (self.since is None or day >= self.since)
            and (self.until is None or day <= self.until)
        )


def read_threads(path: Path) -> list[dict[str, Any]]:
    """Every thread of a ``threads-*.jsonl.gz`` file (or a plain ``.jsonl``)."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def line_times(threads: Iterable[dict[str, Any]]) -> dict[tuple[str, int], datetime]:
    """When each (log, line) was said: its log's date and time, across midnight, never before the line before."""
    by_log: dict[str, list[tuple[int, str, str]]] = {}
    for thread in threads:
        for message in thread["messages"]:
            by_log.setdefault(thread["file"], []).append((message["line"], thread["date"], message["time"]))
    times: dict[tuple[str, int], datetime] = {}
    for log, lines in by_log.items():
        previous: datetime | None = None
        days = timedelta(0)
        for line, day, clock in sorted(lines):
            moment = datetime.fromisoformat(f"{day}T{clock}:00+00:00") + days
            if previous is not None and moment < previous - MIDNIGHT_DROP:
                days += timedelta(days=1)
                moment += timedelta(days=1)
            moment = max(moment, previous) if previous is not None else moment
            times[(log, line)] = previous = moment
    return times


def role(speaker: str, asker: str) -> str:
    """The v1 role of a speaker in a thread that ``asker`` opened."""
    if speaker.lower() in BOTS:
        return "bot"
    return "customer" if speaker == asker else "analyst"


_OPENED, _SAID, _CLOSED = 0, 1, 2
"""Where a case event goes among the events of its line's moment: opened before the line, closed after it."""


def events(
    threads: list[dict[str, Any]], selection: Selection, tenant: str | None = None, *, cases: bool = False
) -> list[dict[str, Any]]:
    """The selected threads' messages as v1 events, in time order (ties: by log, then line), and with ``cases`` each
    thread's ``opened`` and ``closed`` case events around its first and last lines."""
    times = line_times(threads)
    keyed: list[tuple[tuple[datetime, str, int, int], dict[str, Any]]] = []
    for thread in threads:
        if not selection.keeps(thread):
            continue
        asker = thread["messages"][0]["speaker"]
        for message in thread["messages"]:
            at = times[(thread["file"], message["line"])]
            event = _message(thread, message, at, asker, tenant)
            keyed.append(((at, thread["file"], message["line"], _SAID), event))
        if cases:
            first, last = thread["messages"][0], thread["messages"][-1]
            opened_at, closed_at = times[(thread["file"], first["line"])], times[(thread["file"], last["line"])]
            keyed.append(
                ((opened_at, thread["file"], first["line"], _OPENED), _case(thread, "opened", opened_at, tenant))
            )
            keyed.append(
                ((closed_at, thread["file"], last["line"], _CLOSED), _case(thread, "closed", closed_at, tenant))
            )
    keyed.sort(key=lambda pair: pair[0])
    return [event for _, event in keyed]


def _case(thread: dict[str, Any], change: str, at: datetime, tenant: str | None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "case",
        "schema_version": 1,
        "event_id": f"{thread['thread_id']}:{change}",
        "conversation_id": thread["thread_id"],
        "at": at.isoformat().replace("+00:00", "Z"),
        "event": change,
    }
    if change == "closed":
        event["resolution"] = {"resolved_by": "human"}
    if tenant is not None:
        event["tenant"] = tenant
    return event


def _message(
    thread: dict[str, Any], message: dict[str, Any], at: datetime, asker: str, tenant: str | None
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "message",
        "schema_version": 1,
        "message_id": f"{thread['file']}:{message['line']}",
        "conversation_id": thread["thread_id"],
        "sent_at": at.isoformat().replace("+00:00", "Z"),
        "role": role(message["speaker"], asker),
        "author": message["speaker"],
        "text": message["text"].strip(),
        "metadata": {"source": "ubuntu-irc", "file": thread["file"], "line": message["line"]},
    }
    if message.get("reply_to") is not None:
        event["metadata"]["reply_to"] = message["reply_to"]
    if tenant is not None:
        event["tenant"] = tenant
    return event


def write(lines: Iterable[dict[str, Any]], out: TextIO) -> int:
    """Write events as JSON lines; returns how many."""
    count = 0
    for event in lines:
        out.write(json.dumps(event, ensure_ascii=False) + "\n")
        count += 1
    return count


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--threads", type=Path, default=THREADS, help=f"the threads file (default: {THREADS})")
    parser.add_argument("--out", type=Path, help="where to write the events (default: stdout)")
    parser.add_argument("--min-messages", type=int, default=1, help="keep threads of at least N messages")
    parser.add_argument("--min-speakers", type=int, default=1, help="keep threads of at least N speakers")
    parser.add_argument("--since", type=date.fromisoformat, help="keep threads dated on or after (YYYY-MM-DD)")
    parser.add_argument("--until", type=date.fromisoformat, help="keep threads dated on or before (YYYY-MM-DD)")
    parser.add_argument("--tenant", help="the tenant of every event (default: none, so vigil's default tenant)")
    parser.add_argument(
        "--cases", action="store_true", help="also open each thread as a case and close it, resolved by a human"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Convert, and say on stderr how many threads and events were written."""
    args = _arguments(argv)
    threads = read_threads(args.threads)
    selection = Selection(args.min_messages, args.min_speakers, args.since, args.until)
    converted = events(threads, selection, args.tenant, cases=args.cases)
    kept = len({e["conversation_id"] for e in converted})
    if args.out is None:
        count = write(converted, sys.stdout)
    else:
        with args.out.open("w", encoding="utf-8") as out:
            count = write(converted, out)
    span = f", {_when(converted[0])} to {_when(converted[-1])}" if converted else ""
    print(f"{kept} threads of {len(threads)}, {count} events{span}", file=sys.stderr)
    return 0


def _when(event: dict[str, Any]) -> str:
    return str(event.get("sent_at", event.get("at")))


if __name__ == "__main__":
    sys.exit(main())
