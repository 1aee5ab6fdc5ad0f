"""Panel benchmark: how long until an analyst sees a new message, and vigil's suggestion for it, in a browser.

A Tansu broker and ``vigil run`` in its own process (SQLite in a temp dir, answers on with the bundled knowledge,
panel auth none on loopback). Debian's headless Chromium, driven by Playwright, has the
queue page (``/panel``) and one conversation page open. A ``MutationObserver`` in each page stamps with
``Date.now()`` when each queue row first appears, when its badge first turns non-zero, and when each message and
suggestion card first appears on the conversation page; a ``requestAnimationFrame`` after it stamps the start of
the next frame. Customer questions (the bundled FAQ questions that vigil's detector accepts) are produced at a
steady rate, each in a new conversation, plus one a second into the conversation whose page is open.

- Message latency = DOM change - the moment the broker acknowledged the question's record (``time.time()`` in the
  producer's ack callback).
- Suggestion latency = DOM change - the suggestion record's timestamp on the suggestions topic (CreateTime, set by
  vigil's producer as it publishes), read back with a consumer after the run.

``Date.now()`` in Chromium and ``time.time()`` here read the same system clock. ``--watchers N`` adds N plain SSE
clients (httpx streams on ``/api/live``, in this process): the first stamps each update as it parses it (the
latency without a browser), the others only read (what many analysts watching cost vigil).

Run: ``python -m bench.panel [--rate 5] [--seconds 30] [--watchers 0]`` (about 2 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import math
import os
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench import answers, databases, report, traffic
from bench.answers import _progress, _until_handled, wait_ready
from bench.daemon import VigilProcess
from bench.linux import MachineTimes, cpu_seconds
from tests.browser import chromium
from tests.sse import sse_events
from vigil.cases.questions import classify
from vigil.dev.broker import EmbeddedBroker
from vigil.transport.kafka import ensure_topics
from vigil.transport.settings import KafkaSettings

TARGET_MS = 500.0
QUANTILES = ("p50", "p90", "p99", "max")
PARTITIONS = 6

# First sight of each row, non-zero badge, message and card: DOM time, and the start of the next frame.
OBSERVER = """(() => {
  const dom = {row: {}, badge: {}, message: {}, card: {}}, frame = {row: {}, badge: {}, message: {}, card: {}};
  let fresh = [];
  const long = [];  // [start (ms since the epoch), duration (ms)] of each task over 50 ms on the page's main thread
  window.__seen = {dom, frame, long};
  const longTask = (e) => long.push([performance.timeOrigin + e.startTime, e.duration]);
  new PerformanceObserver((list) => list.getEntries().forEach(longTask)).observe({type: "longtask"});
  const all = (node, selector) => (node.matches(selector) ? [node] : []).concat([...node.querySelectorAll(selector)]);
  const stamp = (kind, id, now) => { if (id && !(id in dom[kind])) { dom[kind][id] = now; fresh.push([kind, id]); } };
  const look = (node, now) => {
    if (node.nodeType !== 1 || (node.tagName === "TR" && node.dataset.conversationId in dom.row)) return;  // moved
    for (const n of all(node, "tr[data-conversation-id]")) stamp("row", n.dataset.conversationId, now);
    for (const n of all(node, "span.badge")) {
      if (n.textContent !== "0") stamp("badge", n.closest("tr")?.dataset.conversationId, now);
    }
    for (const n of all(node, "li[data-message-id]")) stamp("message", n.dataset.messageId, now);
    for (const n of all(node, ".card[data-suggestion-id]")) stamp("card", n.dataset.suggestionId, now);
  };
  new MutationObserver((records) => {
    const now = Date.now();
    for (const r of records) for (const n of r.addedNodes) look(n, now);
    if (!fresh.length) return;
    const batch = fresh;
    fresh = [];
    requestAnimationFrame(() => { const t = Date.now(); for (const [k, id] of batch) frame[k][id] = t; });
  }).observe(document, {childList: true, subtree: true});
})();"""


async def produce(
    bootstrap: str, topic: str, texts: itertools.cycle[str], *, rate: float, seconds: float, tag: str, watched: str
) -> dict[str, tuple[str, float]]:
    """Questions at ``rate``/s for ``seconds``, each in a new conversation, and one a second into ``watched``.

    Returns, per message id, its conversation and ``time.time()`` when the broker acknowledged its record."""
    acked: dict[str, tuple[str, float]] = {}

    def ack(conversation: str, message_id: str, future: asyncio.Future[Any]) -> None:
        if not future.exception():
            acked[message_id] = (conversation, time.time())

    producer = traffic._producer(bootstrap, linger_ms=0)
    sends: list[asyncio.Future[Any]] = []
    await producer.start()
    try:
        start, sent, in_watched = time.monotonic(), 0, 0
        while (elapsed := time.monotonic() - start) < seconds:
            due = [f"{tag}-{n:05d}" for n in range(sent, int(elapsed * rate))]
            sent += len(due)
            if elapsed >= in_watched:
                due.append(watched)
                in_watched += 1
            for conversation in due:
                message_id = f"{conversation}-{uuid.uuid4().hex[:8]}"
                fields = {"type": "message", "schema_version": 1, "message_id": message_id}
                fields |= {"conversation_id": conversation, "tenant": "brightwave", "role": "customer"}
                event = traffic.Event(0.0, fields | {"author": "customer", "text": next(texts)})
                future = await producer.send(topic, event.encode(datetime.now(UTC)), key=event.key)
                future.add_done_callback(functools.partial(ack, conversation, message_id))
                sends.append(future)
            await asyncio.sleep(0.002)
        await asyncio.gather(*sends)
    finally:
        await producer.stop()
    return acked


async def published(bootstrap: str, topic: str) -> dict[str, dict[str, Any]]:
    """Every suggestion on ``topic``, by id: its conversation, the message it answers, its record's timestamp."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=10)
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning()
        ends, out = await consumer.end_offsets(partitions), {}
        while [p for p in partitions if await consumer.position(p) < ends[p]]:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for r in records:
                    s = json.loads(r.value or b"{}")
                    out[s["suggestion_id"]] = {"conversation": s["conversation_id"], "in_reply_to": s["in_reply_to"]}
                    out[s["suggestion_id"]] |= {"at": r.timestamp / 1000, "timestamp_type": r.timestamp_type}
        return out
    finally:
        await consumer.stop()


async def watch(client: httpx.AsyncClient, url: str, seen: dict[str, dict[str, float]] | None) -> None:
    """A plain SSE client: when each message and suggestion update was parsed, by message and suggestion id (or,
    without ``seen``, just reading the stream)."""
    async with client.stream("GET", url) as response:
        if seen is None:
            async for _ in response.aiter_raw():
                pass
            return
        async for kind, text in sse_events(response):
            if kind in ("message", "suggestion"):
                data = json.loads(text)
                key = data["message"]["message_id"] if kind == "message" else data["suggestion"]["suggestion_id"]
                seen[kind].setdefault(key, time.time())


Stamps = dict[str, float]


def measure(name: str, seen: Stamps, origins: Stamps, frame: Stamps | None = None) -> dict[str, Any]:
    """Latencies (ms) from each key's origin to its first sight and, on a page, to the start of the frame after it
    (what a page shows is judged by that frame); every latency in the order the updates were sent."""
    row: dict[str, Any] = {"update": name, "expected": len(origins)}
    for what, stamps in (("dom", seen), ("frame", frame)):
        if stamps is not None:
            values = [(stamps[k] - t) * 1000 for k, t in origins.items() if k in stamps]
            row[what] = {f"p{q * 100:g}": report.percentile(values, q) for q in (0.5, 0.9, 0.99)}
            row[what] |= {"seen": len(values), "max": max(values, default=math.nan)}
            row[what]["within_target"] = sum(v <= TARGET_MS for v in values) / max(len(values), 1)
            row[what]["values_ms"] = [round(v, 1) for v in values]
    row["judged"] = row.get("frame", row["dom"])
    return row


def cpu_seconds_by_process(vigil_pid: int, broker_pid: int) -> dict[str, float]:
    """CPU time so far of vigil, the broker, this process, and its other descendants (Playwright and Chromium)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError):
            text = stat.read_text()
            parents[int(stat.parent.name)] = int(text[text.rindex(")") + 2 :].split()[1])
    family = {os.getpid()}
    while grown := {pid for pid, parent in parents.items() if parent in family} - family:
        family |= grown
    names = {vigil_pid: "vigil", broker_pid: "broker", os.getpid(): "bench"}
    out = dict.fromkeys(("vigil", "broker", "bench", "browser"), 0.0)
    for pid in family:
        with contextlib.suppress(OSError):
            out[names.get(pid, "browser")] += cpu_seconds(pid)
    return out


def long_tasks(tasks: list[list[float]], since: float) -> dict[str, float]:
    """How many main-thread tasks over 50 ms a page ran from ``since`` on, their total and the longest (ms)."""
    durations = [d for start, d in tasks if start / 1000 >= since]
    return {"count": len(durations), "total_ms": sum(durations), "max_ms": max(durations, default=0.0)}


async def run(
    rate: float, seconds: float, watchers: int, workdir: Path, profile: Path | None, drain_s: float = 90.0
) -> dict[str, Any]:
    texts = [q for q in answers.faq_questions() if classify(q).asks]
    random.Random(7).shuffle(texts)
    questions, tag = itertools.cycle(texts), uuid.uuid4().hex[:6]
    watched = f"panel-{tag}-watched"
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker, databases.fresh("sqlite", workdir) as db_url:
        topic = f"panel-{tag}"
        kafka = KafkaSettings(bootstrap_servers=broker.bootstrap)
        await ensure_topics(kafka, [topic, f"{topic}.suggestions", f"{topic}.dlq"], partitions=PARTITIONS)
        settings = {"ANSWERS__ENABLED": "true", "PANEL__AUTH": "none"}
        settings["KNOWLEDGE__PATHS"] = json.dumps([str(p) for p in answers.KNOWLEDGE_PATHS])
        vigil = VigilProcess(
            bootstrap=broker.bootstrap,
            topic=topic,
            db_url=db_url,
            workdir=workdir / "vigil",
            partitions=PARTITIONS,
            settings=settings,
        )
        base = f"http://127.0.0.1:{vigil.port}"
        tasks: list[asyncio.Task[None]] = []
        profiler = None
        try:
            await vigil.start()
            await wait_ready(vigil, timeout_s=180)
            _progress("vigil ready; warming up (not measured), which also opens the watched conversation")
            handled = (await vigil.snapshot()).handled
            warm = await produce(
                broker.bootstrap, topic, questions, rate=rate, seconds=3, tag=f"w{tag}", watched=watched
            )
            await _until_handled(vigil, handled + len(warm), timeout_s=60)
            async with chromium() as browser, httpx.AsyncClient(timeout=None) as client:
                pages = []
                for path in ("/panel", f"/panel/conversations/{watched}"):
                    pages.append(await browser.new_page(viewport={"width": 1366, "height": 860}))
                    await pages[-1].add_init_script(OBSERVER)
                    await pages[-1].goto(base + path)
                    await pages[-1].wait_for_selector("body[data-live=on]", timeout=30_000)
                heard: dict[str, dict[str, float]] = {"message": {}, "suggestion": {}}  # by the first SSE client
                tasks = [
                    asyncio.create_task(watch(client, f"{base}/api/live", None if n else heard))
                    for n in range(watchers)
                ]
                await asyncio.sleep(1.0)
                _progress(f"browser live; {rate:g} questions/s for {seconds:g} s with {watchers} extra SSE client(s)")
                handled, machine = (await vigil.snapshot()).handled, MachineTimes.now()
                cpu = cpu_seconds_by_process(vigil.pid, broker.pid)
                profiler = vigil.profile(profile / "vigil-panel.txt") if profile else None
                began, silenced = time.time(), answers.suppressed(await answers._metrics_text(vigil))
                acked = await produce(
                    broker.bootstrap, topic, questions, rate=rate, seconds=seconds, tag=f"q{tag}", watched=watched
                )
                try:
                    await _until_handled(vigil, handled + len(acked), timeout_s=drain_s)
                except TimeoutError:
                    _progress(f"vigil has not handled every question {drain_s:g} s after the last; measuring anyway")
                unhandled = handled + len(acked) - (await vigil.snapshot()).handled
                await asyncio.sleep(2.0)  # the last updates reach the pages
                window_s = time.time() - began
                cpu = {k: (v - cpu[k]) / window_s for k, v in cpu_seconds_by_process(vigil.pid, broker.pid).items()}
                busy_cores = MachineTimes.now().busy_cores_since(machine)
                after = answers.suppressed(await answers._metrics_text(vigil))
                silenced = {reason: n - silenced.get(reason, 0) for reason, n in after.items()}
                stamps = [await p.evaluate("window.__seen") for p in pages]
                for task in tasks:
                    task.cancel()
            suggestions = await published(broker.bootstrap, f"{topic}.suggestions")
        finally:
            for task in tasks:
                task.cancel()
            exit_code = await vigil.stop()
            if profiler is not None:
                await asyncio.to_thread(profiler.wait, 60)
    (queue, queue_frame), (page, page_frame) = [
        [{k: {i: ms / 1000 for i, ms in v.items()} for k, v in s[what].items()} for what in ("dom", "frame")]
        for s in stamps
    ]
    new = {conversation: at for conversation, at in acked.values() if conversation != watched}
    own = {mid: at for mid, (conversation, at) in acked.items() if conversation == watched}
    answered: dict[str, float] = {}  # the first suggestion of each new conversation
    for s in sorted(suggestions.values(), key=lambda s: s["at"]):
        if s["conversation"] in new:
            answered.setdefault(s["conversation"], s["at"])
    cards = {sid: s["at"] for sid, s in suggestions.items() if s["in_reply_to"] in own}
    rows = [
        measure("queue: row appears (message)", queue["row"], new, queue_frame["row"]),
        measure("queue: badge bumps (suggestion)", queue["badge"], answered, queue_frame["badge"]),
        measure("conversation: message appears", page["message"], own, page_frame["message"]),
        measure("conversation: card appears (suggestion)", page["card"], cards, page_frame["card"]),
    ]
    if watchers:
        sent, sugg = (
            {m: t for m, (_, t) in acked.items()},
            {i: s["at"] for i, s in suggestions.items() if s["in_reply_to"] in acked},
        )
        rows.append(measure(f"SSE client 1 of {watchers}: message", heard["message"], sent))
        rows.append(measure(f"SSE client 1 of {watchers}: suggestion", heard["suggestion"], sugg))
    return {
        "sent": len(acked),
        "new_conversations": len(new),
        "suggestions": len(answered) + len(cards),
        "timestamp_types": sorted({s["timestamp_type"] for s in suggestions.values()}),
        "window_s": window_s,
        "unhandled": unhandled,
        "cores": cpu,
        "suppressed": {reason: n for reason, n in silenced.items() if n},
        "machine_busy_cores": busy_cores,
        "rows": rows,
        "long_tasks": {
            name: long_tasks(s["long"], began) for name, s in zip(("queue", "conversation"), stamps, strict=True)
        },
        "exit_code": exit_code,
    }


def table(result: dict[str, Any]) -> str:
    """The Markdown table; the verdict is on the p99 (at the next frame, for a page) and on seeing every update."""
    lines = [
        "| update | seen / expected | in the DOM: p50 / p90 / p99 / max (ms) | next frame: p50 / p90 / p99 / max (ms) "
        "| within 500 ms | p99 < 500 ms |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in result["rows"]:
        j, cells = (
            r["judged"],
            [" / ".join(f"{r[w][q]:.0f}" for q in QUANTILES) if w in r else "" for w in ("dom", "frame")],
        )
        verdict = "met" if j["seen"] == r["expected"] and j["p99"] < TARGET_MS else "**missed**"
        lines.append(
            f"| {r['update']} | {j['seen']:,} / {r['expected']:,} | {cells[0]} | {cells[1]} "
            f"| {j['within_target']:.1%} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.panel", description="Live panel latency in a browser.")
    parser.add_argument("--rate", type=float, default=5.0, help="new conversations (one question each) per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long questions are sent")
    parser.add_argument("--watchers", type=int, default=0, help="extra plain SSE clients on /api/live")
    parser.add_argument("--workdir", type=Path, help="keep the broker's and vigil's logs here (default: a temp dir)")
    parser.add_argument("--profile", type=Path, help="directory for a py-spy profile of vigil during the run")
    args = parser.parse_args(argv)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vigil-bench-")))
        workdir.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(run(args.rate, args.seconds, args.watchers, workdir, args.profile))
    print(table(result))
    print(
        f"\n{result['sent']} questions sent ({result['new_conversations']} new conversations); cores used over "
        f"{result['window_s']:.0f} s (until vigil had handled them all; {result['unhandled']:.0f} never were): "
        + ", ".join(f"{name} {cores:.2f}" for name, cores in result["cores"].items())
        + f", the whole machine {result['machine_busy_cores']:.2f} of {os.cpu_count()}; "
        f"suggestions suppressed: {result['suppressed'] or 'none'}."
    )
    for page, t in result["long_tasks"].items():
        print(
            f"{page} page: {t['count']} tasks over 50 ms, {t['total_ms']:.0f} ms in all, longest {t['max_ms']:.0f} ms"
        )
    plan = {"rate": args.rate, "seconds": args.seconds, "watchers": args.watchers}
    output = report.save("panel", argv, plan, {"result": result})
    print(f"\nresults: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
