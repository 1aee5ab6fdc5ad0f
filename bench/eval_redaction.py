"""Does the redactor catch the personal data in support chats and keep what only looks like it?

    python -m bench.eval_redaction --split test       # the reported half
    python -m bench.eval_redaction --split tune --errors   # the half rules are tuned on, with every miss shown

Labels: ``bench/data/pii-conversations.jsonl`` (see ``bench/data/README.md``): support conversations of fictional
companies, each message's personal data marked by kind and its look-alikes marked to keep, written before any rule.
The conversations are split by a stable hash of their id into a tune half and a test half.

How it counts. A gold span is caught when every letter and digit in it is inside some redaction (of any kind; a
partial cover is a miss, and is counted apart as partial; the right kind is reported too). Precision is the share of
redacted letters and digits that are in gold spans, and the share of redactions that touch a gold span. A
look-alike is kept when no redaction touches it. Each conversation is redacted with its company's ``public``
strings as ``keep`` and its authors as ``names``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from vigil.mining.redact import PLACEHOLDERS, Redactor, Span

DATA = Path(__file__).resolve().parent / "data" / "pii-conversations.jsonl"
KINDS = tuple(PLACEHOLDERS)


@dataclass(frozen=True, slots=True)
class Gold:
    start: int
    end: int
    label: str  # a PII kind, or what a look-alike is


@dataclass(frozen=True, slots=True)
class Message:
    role: str
    author: str
    text: str
    pii: tuple[Gold, ...]
    keep: tuple[Gold, ...]


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    company: str
    style: str
    public: tuple[str, ...]
    messages: tuple[Message, ...]

    @property
    def authors(self) -> list[str]:
        return sorted({message.author for message in self.messages})


def split_of(conversation_id: str) -> str:
    """A conversation's half; it never changes."""
    return "tune" if hashlib.sha256(conversation_id.encode()).digest()[0] % 2 == 0 else "test"


def _spans(raw: list[dict[str, object]], label: str, text: str, where: str) -> tuple[Gold, ...]:
    spans = []
    for item in raw:
        start, end, value = item["start"], item["end"], item[label]
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)):
            raise ValueError(f"{where}: span {item} is outside the text")
        if text[start:end].strip() != text[start:end]:
            raise ValueError(f"{where}: span {text[start:end]!r} has spaces at an edge")
        if label == "kind" and value not in KINDS:
            raise ValueError(f"{where}: unknown kind {value!r}")
        spans.append(Gold(start, end, str(value)))
    spans.sort(key=lambda span: span.start)
    if any(a.end > b.start for a, b in itertools.pairwise(spans)):
        raise ValueError(f"{where}: {label} spans overlap")
    return tuple(spans)


def load(path: Path = DATA) -> list[Conversation]:
    """Every labelled conversation, checked: offsets inside the text, known kinds, no overlaps, unique ids.

    Raises:
        ValueError: the file breaks one of those rules.
    """
    conversations = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        raw = json.loads(line)
        messages = []
        for index, message in enumerate(raw["messages"]):
            where = f"{path.name}:{number} ({raw['id']}) message {index}"
            text = message["text"]
            pii = _spans(message["pii"], "kind", text, where)
            keep = _spans(message["keep"], "what", text, where)
            if any(p.start < k.end and k.start < p.end for p in pii for k in keep):
                raise ValueError(f"{where}: a look-alike overlaps personal data")
            messages.append(Message(message["role"], message["author"], text, pii, keep))
        conversations.append(
            Conversation(raw["id"], raw["company"], raw["style"], tuple(raw["public"]), tuple(messages))
        )
    ids = [conversation.id for conversation in conversations]
    if len(set(ids)) != len(ids):
        raise ValueError("conversation ids repeat")
    return conversations


def _alnum(text: str, start: int, end: int) -> set[int]:
    return {index for index in range(start, end) if text[index].isalnum()}


@dataclass
class Tally:
    """What the redactor did on a set of messages."""

    caught: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    partial: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    right_kind: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    total: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    kept: int = 0
    look_alikes: int = 0
    redacted_chars: int = 0
    redacted_gold_chars: int = 0
    redactions: int = 0
    redactions_on_gold: int = 0
    misses: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def add(self, conversation: Conversation, message: Message, spans: tuple[Span, ...]) -> None:
        text = message.text
        covered: set[int] = set()
        for span in spans:
            covered |= _alnum(text, span.start, span.end)
        gold_chars: set[int] = set()
        for gold in message.pii:
            need = _alnum(text, gold.start, gold.end)
            gold_chars |= need
            self.total[gold.label] += 1
            if need <= covered:
                self.caught[gold.label] += 1
                kinds = {span.kind for span in spans if span.start < gold.end and gold.start < span.end}
                self.right_kind[gold.label] += gold.label in kinds
            else:
                self.partial[gold.label] += bool(need & covered)
                self.misses.append(f"{conversation.id} {gold.label:<10} {text[gold.start : gold.end]!r} in {text!r}")
        for look_alike in message.keep:
            self.look_alikes += 1
            if any(span.start < look_alike.end and look_alike.start < span.end for span in spans):
                self.broken.append(
                    f"{conversation.id} {look_alike.label:<10} {text[look_alike.start : look_alike.end]!r}"
                )
            else:
                self.kept += 1
        self.redacted_chars += len(covered)
        self.redacted_gold_chars += len(covered & gold_chars)
        for span in spans:
            self.redactions += 1
            if any(span.start < gold.end and gold.start < span.end for gold in message.pii):
                self.redactions_on_gold += 1
            else:
                self.extra.append(f"{conversation.id} {span.kind:<10} {text[span.start : span.end]!r}")


def evaluate(conversations: Iterable[Conversation], repeats: int = 3) -> Tally:
    """Redact every message, one Redactor per company; time each call (the best of ``repeats``)."""
    tally = Tally()
    redactors: dict[tuple[str, ...], Redactor] = {}
    for conversation in conversations:
        redactor = redactors.setdefault(conversation.public, Redactor(keep=conversation.public))
        names = conversation.authors
        for message in conversation.messages:
            best = float("inf")
            for _ in range(repeats):
                began = time.perf_counter()
                redacted = redactor.redact(message.text, names=names)
                best = min(best, time.perf_counter() - began)
            tally.seconds.append(best)
            tally.add(conversation, message, redacted.spans)
    return tally


def table(tally: Tally) -> list[str]:
    lines = ["| kind | gold spans | caught | recall | partial | right kind |", "|---|---:|---:|---:|---:|---:|"]
    for kind in KINDS:
        n = tally.total[kind]
        if n:
            caught = tally.caught[kind]
            lines.append(
                f"| {kind} | {n} | {caught} | {caught / n:.3f} | {tally.partial[kind]} | {tally.right_kind[kind]} |"
            )
    n, caught = sum(tally.total.values()), sum(tally.caught.values())
    lines.append(
        f"| **all** | **{n}** | **{caught}** | **{caught / n:.3f}** | {sum(tally.partial.values())} "
        f"| {sum(tally.right_kind.values())} |"
    )
    return lines


def summary(tally: Tally) -> list[str]:
    chars = tally.redacted_gold_chars / tally.redacted_chars if tally.redacted_chars else 1.0
    spans = tally.redactions_on_gold / tally.redactions if tally.redactions else 1.0
    times = sorted(tally.seconds)
    return [
        f"- look-alikes kept intact: {tally.kept}/{tally.look_alikes} = {tally.kept / tally.look_alikes:.3f}",
        f"- precision: {chars:.3f} of redacted letters and digits are gold PII; "
        f"{tally.redactions_on_gold}/{tally.redactions} = {spans:.3f} of redactions touch a gold span",
        f"- time per message ({len(times)} messages, one core): median {statistics.median(times) * 1e3:.3f} ms, "
        f"p90 {times[int(0.9 * len(times))] * 1e3:.3f} ms, max {times[-1] * 1e3:.3f} ms, "
        f"mean {statistics.fmean(times) * 1e3:.3f} ms",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("tune", "test", "all"), default="test")
    parser.add_argument("--errors", action="store_true", help="list misses, broken look-alikes, extra redactions")
    args = parser.parse_args(argv)
    conversations = [c for c in load() if args.split == "all" or split_of(c.id) == args.split]
    began = time.perf_counter()
    Redactor()
    built = time.perf_counter() - began
    tally = evaluate(conversations)
    messages = sum(len(c.messages) for c in conversations)
    print(f"split {args.split}: {len(conversations)} conversations, {messages} messages", end="; ")
    print(f"Redactor built in {built:.2f} s (name lists loaded)\n")
    print("\n".join(table(tally)))
    print()
    print("\n".join(summary(tally)))
    if args.errors:
        for title, rows in (("misses", tally.misses), ("look-alikes broken", tally.broken), ("extra", tally.extra)):
            print(f"\n{title} ({len(rows)}):")
            print("\n".join(f"  {row}" for row in rows))


if __name__ == "__main__":
    main()
