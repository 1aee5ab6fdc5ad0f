"""Answers benchmark: how many customer questions one vigil process answers, how fast, and in how much memory.

0. **The limits, in the same run.** The embedder alone, in a process of its own with vigil's one thread, embedding
   the question set in batches of 32 (``bench.embedder.probe``): a process that embeds every question once cannot
   answer faster. And a bare aiokafka consumer reading the questions topic (``bench.bare``): what the broker and the
   client allow. vigil's rates are quoted as shares of both.
1. **Query time at scale, in process.** A throwaway knowledge store (``bench.knowledge_env``) with the bundled
   knowledge plus synthetic passages (sentences of the bundled articles recombined) grown to each of ``--passages``;
   ``KnowledgeStore.search``, as the answer skill calls it, is timed for every question of the set. Synthetic
   passages get the normalised mean of their sentences' real embeddings (embedding 100k passages with the model
   takes too long here); queries use the real model.
2. **End to end, over Kafka.** A Tansu broker and ``vigil run`` in its own process with its default settings
   (SQLite in a temp dir, answers on, the bundled help centre imported at its first start). Customer questions,
   each in a new conversation and stamped with the moment it is sent, go to its input topic while a consumer here
   reads the suggestions topic; latency = suggestion consumed - question produced (``in_reply_to`` links them; one
   clock). Phases, against the same process: steady rates (``--rates``, 20 and 100 questions/s), a burst
   (``--burst`` questions at once) and a backlog (``--backlog`` questions at once: vigil works through them at its
   own pace, which is its sustained rate). Then the process is stopped and started again on the same data, for the
   ready time of a restart; peak RSS is ``VmHWM`` of the first process at the end.

The question set (``question_set``) is chosen before vigil runs: every customer message of the team's labelled sets
that needs something, in four companies' voices, and every Brightwave phrasing. What vigil stays silent on is still
sent and counted. Each suggestion is put on the path it took (its first source's kind: ``faq`` or not).

Run: ``python -m bench.answers`` (about 8 minutes) or ``python -m bench.answers --quick`` (about 4 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import math
import random
import re
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from aiokafka import AIOKafkaConsumer
from prometheus_client.parser import text_string_to_metric_families

from bench import bare, databases, embedder, report, traffic
from bench.daemon import VigilProcess
from bench.knowledge_env import knowledge_store
from bench.linux import MachineTimes
from bench.metrics import Snapshot
from vigil.dev.broker import EmbeddedBroker
from vigil.knowledge.documents import Entry, Passage, discover, read
from vigil.transport.kafka import ensure_topics
from vigil.transport.settings import KafkaSettings

KNOWLEDGE = Path(__file__).resolve().parent.parent / "knowledge"
KNOWLEDGE_PATHS = (KNOWLEDGE / "articles", KNOWLEDGE / "faqs")
DATA = Path(__file__).resolve().parent / "data"
# Issue 11's targets, on this 2-core machine.
TARGET_SUSTAINED_QPS = 300.0
TARGET_P99_AT_100_MS = 150.0
TARGET_BURST_P99_MS = 300.0
TARGET_PEAK_RSS_MIB = 500.0
TARGET_READY_S = 5.0


@dataclass(frozen=True, slots=True)
class Plan:
    """What one benchmark run does."""

    rates: tuple[float, ...] = (20.0, 100.0)
    seconds: float = 30.0
    burst: int = 70
    backlog: int = 6_000
    """Questions produced at once for the sustained rate: vigil works through the backlog at its own pace."""
    passages: tuple[int, ...] = (10_000, 30_000, 100_000)
    partitions: int = 6
    drain_timeout_s: float = 240.0
    bare_records: int = 100_000
    settings: tuple[tuple[str, str], ...] = ()


QUICK = Plan(seconds=15.0, backlog=2_000, passages=(10_000,), bare_records=30_000)


# --- questions ---------------------------------------------------------------------------------------------------


def question_set() -> list[tuple[str, str]]:
    """(pool, text) for every customer message of the team's labelled sets that needs something
    (``requests-*.jsonl``: four companies, every style) and every Brightwave phrasing (``brightwave-phrasings``),
    each text once, in a fixed shuffled order.

    The set is chosen before vigil runs and nothing vigil does selects from it: a message vigil stays silent on is
    still sent and still costs what it costs. It holds more distinct texts than the store keeps vectors of
    (``_RECENT_VECTORS``, 512), so cycling through it in order never meets a text whose vector is still kept.
    """
    found: dict[str, str] = {}
    for path in sorted(DATA.glob("requests-*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("needs"):
                found.setdefault(row["text"], "requests")
    for line in (DATA / "brightwave-phrasings.jsonl").read_text().splitlines():
        found.setdefault(json.loads(line)["text"], "phrasings")
    chosen = [(pool, text) for text, pool in found.items()]
    random.Random(7).shuffle(chosen)
    return chosen


# --- end to end --------------------------------------------------------------------------------------------------


class Suggestions:
    """Reads the suggestions topic in the background; remembers when each suggestion arrived."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=10,  # Tansu holds a fetch this long even when records are waiting
        )
        self.arrived: dict[str, tuple[float, dict[str, Any]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._consumer.start()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=100)
            now = time.time()
            for records in batches.values():
                for record in records:
                    suggestion = json.loads(record.value or b"{}")
                    self.arrived[str(suggestion.get("in_reply_to"))] = (now, suggestion)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._consumer.stop()


@dataclass(slots=True)
class Asked:
    pool: str
    text: str
    at: float


def question_stream(tag: str, questions: Iterator[tuple[str, str]], asked: dict[str, Asked]) -> Iterator[traffic.Event]:
    """Customer questions, each in a new conversation; records when each is handed to the producer."""
    for n in itertools.count():
        pool, text = next(questions)
        conversation = f"{tag}-{n:06d}"
        message_id = f"{conversation}-m1"
        fields = {
            "type": "message",
            "schema_version": 1,
            "message_id": message_id,
            "conversation_id": conversation,
            "tenant": "brightwave",
            "role": "customer",
            "author": "customer",
            "text": text,
        }
        asked[message_id] = Asked(pool, text, time.time())  # traffic stamps sent_at and sends right after this
        yield traffic.Event(0.0, fields)


def suppressed(text: str) -> dict[str, float]:
    """``vigil_suggestions_suppressed_total`` by reason."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "vigil_suggestions_suppressed":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    out[sample.labels["reason"]] = sample.value
    return out


async def _metrics_text(vigil: VigilProcess) -> str:
    async with httpx.AsyncClient(timeout=5.0) as client:
        response = await client.get(f"http://127.0.0.1:{vigil.port}/metrics")
        response.raise_for_status()
        return response.text


async def wait_ready(vigil: VigilProcess, timeout_s: float) -> None:
    async with httpx.AsyncClient(timeout=5.0) as client, asyncio.timeout(timeout_s):
        while True:
            await vigil.snapshot()  # raises if vigil died
            if (await client.get(f"http://127.0.0.1:{vigil.port}/readyz")).status_code == 200:
                return
            await asyncio.sleep(0.05)


async def _until_handled(vigil: VigilProcess, count: float, timeout_s: float) -> tuple[Snapshot, float]:
    """Wait until vigil has handled ``count`` events in all; returns the snapshot and the moment it was seen."""
    async with asyncio.timeout(timeout_s):
        while True:
            snapshot = await vigil.snapshot()
            if snapshot.handled >= count:
                return snapshot, time.monotonic()
            await asyncio.sleep(0.05)


async def _settle(suggestions: Suggestions, quiet_s: float = 1.5) -> None:
    """Wait until no suggestion has arrived for ``quiet_s``."""
    seen = -1
    while len(suggestions.arrived) != seen:
        seen = len(suggestions.arrived)
        await asyncio.sleep(quiet_s)


@dataclass(frozen=True, slots=True)
class Feed:
    """Where the questions go and what reads the suggestions."""

    bootstrap: str
    topic: str
    suggestions: Suggestions
    questions: Iterator[tuple[str, str]]
    """The question set, cycled: every phase goes on where the one before stopped."""


async def phase(
    vigil: VigilProcess, feed: Feed, *, name: str, rate: float | None, seconds: float, count: int, timeout_s: float
) -> dict[str, Any]:
    """Questions at ``rate`` for ``seconds``, or (``rate`` None) ``count`` questions at once; then wait until vigil
    has handled them all. Every latency, per path, and what went unanswered."""
    asked: dict[str, Asked] = {}
    before = await vigil.snapshot()
    silenced_before = suppressed(await _metrics_text(vigil))
    cpu, machine, start = vigil.cpu_seconds(), MachineTimes.now(), time.monotonic()
    stream = question_stream(f"{name}-{uuid.uuid4().hex[:6]}", feed.questions, asked)
    if rate is None:
        sent, produce_s = await traffic.produce_burst(feed.bootstrap, feed.topic, itertools.islice(stream, count))
    else:
        sent, produce_s = await traffic.produce_paced(feed.bootstrap, feed.topic, stream, rate=rate, duration_s=seconds)
    backlog_at_end = sent - ((await vigil.snapshot()).handled - before.handled)
    after, done = await _until_handled(vigil, before.handled + sent, timeout_s)
    cores = (vigil.cpu_seconds() - cpu) / (done - start)
    machine_cores = MachineTimes.now().busy_cores_since(machine)
    await _settle(feed.suggestions)
    silenced_after = suppressed(await _metrics_text(vigil))
    by_path: dict[str, list[float]] = {}
    internal: list[float] = []
    silences: Counter[str] = Counter()
    for message_id, question in asked.items():
        got = feed.suggestions.arrived.get(message_id)
        if got is None:
            silences[question.pool] += 1
            continue
        arrived_at, suggestion = got
        path = "faq" if suggestion["sources"] and suggestion["sources"][0]["kind"] == "faq" else "retrieval"
        by_path.setdefault(path, []).append(arrived_at - question.at)
        internal.append(suggestion["latency_ms"] / 1000)
    every = [v for values in by_path.values() for v in values]
    processing = after.processing - before.processing
    row: dict[str, Any] = {
        "phase": name,
        "rate": rate,
        "sent": sent,
        "achieved_rate": sent / produce_s,
        "handled_rate": sent / (done - start),
        "backlog_at_end_of_producing": backlog_at_end,
        "all_handled_s": done - start,
        "vigil_cores": cores,
        "machine_cores": machine_cores,
        "answered": len(every),
        "silences": dict(silences),
        "silenced_by_reason": {k: v - silenced_before.get(k, 0.0) for k, v in silenced_after.items()},
        "all_p50_ms": report.percentile(every, 0.5) * 1000,
        "all_p99_ms": report.percentile(every, 0.99) * 1000,
        "all_max_ms": max(every, default=math.nan) * 1000,
        "vigil_p99_ms": report.percentile(internal, 0.99) * 1000,
        "processing_p50_ms": processing.quantile(0.5) * 1000,
        "processing_p99_ms": processing.quantile(0.99) * 1000,
        "dead_lettered": after.dead_lettered - before.dead_lettered,
    }
    for path in ("faq", "retrieval"):
        values = by_path.get(path, [])
        row[f"{path}_n"] = len(values)
        row[f"{path}_p50_ms"] = report.percentile(values, 0.5) * 1000
        row[f"{path}_p99_ms"] = report.percentile(values, 0.99) * 1000
    _progress(
        f"{name}: {sent} questions, handled {row['handled_rate']:.1f}/s, answered {len(every)}, p50/p99 "
        f"{row['all_p50_ms']:.0f}/{row['all_p99_ms']:.0f} ms, vigil {cores:.2f} cores"
    )
    return row


async def end_to_end(plan: Plan, workdir: Path, profile: Path | None) -> dict[str, Any]:
    """Start a broker and vigil; steady rates, a burst and a backlog against the same process; restart it for the
    ready time; a bare consumer on the same topic for the broker's limit."""
    questions = question_set()
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker, databases.fresh("sqlite", workdir) as db_url:
        topic = f"answers-{uuid.uuid4().hex[:10]}"
        kafka = KafkaSettings(bootstrap_servers=broker.bootstrap)
        await ensure_topics(kafka, [topic, f"{topic}.suggestions", f"{topic}.dlq"], partitions=plan.partitions)
        settings = {"KNOWLEDGE__PATHS": json.dumps([str(p) for p in KNOWLEDGE_PATHS])} | dict(plan.settings)

        def process() -> VigilProcess:
            return VigilProcess(
                bootstrap=broker.bootstrap,
                topic=topic,
                db_url=db_url,
                workdir=workdir / "vigil",
                partitions=plan.partitions,
                settings=settings,
            )

        vigil = process()
        suggestions = Suggestions(broker.bootstrap, f"{topic}.suggestions")
        feed = Feed(broker.bootstrap, topic, suggestions, itertools.cycle(questions))
        profiler = None
        rows = []
        try:
            started = time.monotonic()
            await vigil.start()
            await wait_ready(vigil, timeout_s=180)
            first_ready_s = time.monotonic() - started
            _progress(f"vigil ready in {first_ready_s:.1f} s (first start: the help centre is imported)")
            await suggestions.start()
            # Warm-up (consumer-group join, first model calls): not measured.
            warm_up = await phase(vigil, feed, name="warm-up", rate=5, seconds=4, count=0, timeout_s=60)
            if profile is not None:
                profiler = vigil.profile(profile / "vigil-answers.txt")
            for rate in plan.rates:
                rows.append(
                    await phase(
                        vigil,
                        feed,
                        name=f"{rate:g}/s",
                        rate=rate,
                        seconds=plan.seconds,
                        count=0,
                        timeout_s=plan.drain_timeout_s,
                    )
                )
            rows.append(await phase(vigil, feed, name="burst", rate=None, seconds=0, count=plan.burst, timeout_s=60))
            rows.append(
                await phase(
                    vigil,
                    feed,
                    name="backlog",
                    rate=None,
                    seconds=0,
                    count=plan.backlog,
                    timeout_s=plan.drain_timeout_s,
                )
            )
            peak_rss = vigil.peak_rss_bytes()
        finally:
            await suggestions.stop()
            exit_code = await vigil.stop()
            if profiler is not None:
                await asyncio.to_thread(profiler.wait, 60)
        again = process()
        started = time.monotonic()
        try:
            await again.start()
            await wait_ready(again, timeout_s=180)
            ready_s = time.monotonic() - started
            restart_rss = again.peak_rss_bytes()
        finally:
            await again.stop()
        _progress(f"restarted: ready in {ready_s:.1f} s")
        sent = sum(r["sent"] for r in [warm_up, *rows])
        bare_rate = await bare.measure(broker.bootstrap, topic, sent, plan.bare_records)
        _progress(f"bare consumer: {bare_rate:,.0f} records/s")
    return {
        "questions": {"distinct": len(questions), "pools": dict(Counter(pool for pool, _ in questions))},
        "first_ready_s": first_ready_s,
        "ready_s": ready_s,
        "phases": rows,
        "peak_rss_mib": peak_rss / 2**20,
        "restart_peak_rss_mib": restart_rss / 2**20,
        "bare_consumer_per_s": bare_rate,
        "exit_code": exit_code,
    }


def embedder_limit(questions: list[str]) -> dict[str, Any]:
    """The embedder's own throughput on the question set, in a process of its own with vigil's one thread: the
    most questions/s a process that embeds each question once could answer."""
    figures = embedder.probe("onnx", questions, min(len(questions), 512), repeats=20, threads=1)
    return {"batch_32_per_s": figures["rates"][32], "batch_1_per_s": figures["rates"][1], **figures}


# --- query time with a big store ---------------------------------------------------------------------------------

_SPLIT = re.compile(r"(?<=[.!?])\s+")


class _SentenceMeanEmbedder:
    """Embeds a synthetic passage as the normalised mean of its sentences' real embeddings (see the module doc)."""

    def __init__(self, sentence_vectors: dict[str, np.ndarray], parts: dict[str, tuple[str, ...]]) -> None:
        self._vectors = sentence_vectors
        self._parts = parts

    def load(self) -> None:
        pass

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.stack([np.mean([self._vectors[s] for s in self._parts[t]], axis=0) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def _sentences() -> list[str]:
    entries = [e for path in discover([KNOWLEDGE / "articles"]) for e in read(path)]
    found = {
        s.strip()
        for e in entries
        for p in e.passages
        for s in _SPLIT.split(p.text.split("\n", 1)[-1].replace("\n", " "))
        if 30 <= len(s.strip()) <= 300
    }
    headings = sorted({p.heading for e in entries for p in e.passages if p.heading})
    return sorted(found) + headings  # headings double as titles of synthetic entries


def _synthetic(count: int, start: int, sentences: list[str], headings: list[str], rng: random.Random):  # type: ignore[no-untyped-def]
    entries, parts = [], {}
    for n in range(start, start + count):
        chosen = tuple(rng.sample(sentences, rng.randint(2, 5)))
        title = f"{rng.choice(headings)} ({n})"
        text = f"{title}\n{' '.join(chosen)}"
        parts[text] = chosen
        entry_id = f"syn-{n:06d}"
        entries.append(
            Entry(
                id=entry_id,
                kind="document",
                title=title,
                body=" ".join(chosen),
                origin="bench",
                passages=(Passage(id=f"{entry_id}#1", heading=None, text=text),),
            )
        )
    return entries, parts


async def store_at_scale(sizes: Sequence[int], questions: Sequence[str]) -> list[dict[str, Any]]:
    """Time search (as the answer skill runs it) for every question with the store grown to each size in turn."""
    rows: list[dict[str, Any]] = []
    if not sizes:
        return rows
    async with knowledge_store() as knowledge:
        await knowledge.import_files(list(KNOWLEDGE_PATHS))
        bundled = (await knowledge.stats())["passages"]
        real = knowledge._embedder
        everything = _sentences()
        headings = [s for s in everything if len(s) < 90 and not s.endswith(".")]
        sentences = [s for s in everything if s not in set(headings)]
        t = time.perf_counter()
        vectors = dict(zip(sentences, await asyncio.to_thread(real.embed, sentences), strict=True))
        _progress(f"embedded {len(sentences)} article sentences in {time.perf_counter() - t:.0f} s")
        rng = random.Random(3)
        have = bundled
        for size in sorted(sizes):
            add = size - have
            if add > 0:
                t = time.perf_counter()
                entries, parts = _synthetic(add, have, sentences, headings, rng)
                knowledge._embedder = _SentenceMeanEmbedder(vectors, parts)  # type: ignore[assignment]
                try:
                    for chunk in range(0, len(entries), 25_000):
                        await knowledge.upsert(entries[chunk : chunk + 25_000])
                finally:
                    knowledge._embedder = real
                have = size
                _progress(f"store grown to {size:,} passages in {time.perf_counter() - t:.0f} s")
            await knowledge.search(questions[0], 3)  # warm
            search_s, embed_s = [], []
            for question in questions:
                vector = await knowledge.embed(question)  # the search as the skill runs it, its question embedded
                t0 = time.perf_counter()
                await knowledge.search(question, 3, vector=vector)
                t1 = time.perf_counter()
                await asyncio.to_thread(real.embed, [question])
                t2 = time.perf_counter()
                search_s.append(t1 - t0)
                embed_s.append(t2 - t1)
            row: dict[str, float] = {"passages": (await knowledge.stats())["passages"], "queries": len(questions)}
            for name, values in (("search", search_s), ("embed", embed_s)):
                row[f"{name}_p50_ms"] = report.percentile(values, 0.5) * 1000
                row[f"{name}_p99_ms"] = report.percentile(values, 0.99) * 1000
            rows.append(row)
            _progress(
                f"{row['passages']:,} passages: search p50/p99 {row['search_p50_ms']:.1f}/{row['search_p99_ms']:.1f} ms"
            )
    return rows


# --- report ------------------------------------------------------------------------------------------------------


def tables(live: dict[str, Any], limits: dict[str, Any], scale: list[dict[str, Any]]) -> str:
    embed = limits["embedder"]["batch_32_per_s"]
    bare_rate = live["bare_consumer_per_s"]
    lines = [
        "| phase | questions | offered/s | handled/s | share of the embedder's batched rate | share of a bare consumer "
        "| answered | p50 / p99 (ms) | FAQ path n, p99 (ms) | retrieval path n, p99 (ms) | vigil processing p99 (ms) "
        "| dead-lettered | vigil CPU (cores) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in live["phases"]:
        offered = f"{r['achieved_rate']:.0f}" if r["rate"] is not None else "at once"
        lines.append(
            f"| {r['phase']} | {r['sent']} | {offered} | {r['handled_rate']:.1f} | {r['handled_rate'] / embed:.2f} "
            f"| {r['handled_rate'] / bare_rate:.2%} | {r['answered']} | {r['all_p50_ms']:.0f} / {r['all_p99_ms']:.0f} "
            f"| {r['faq_n']}, {r['faq_p99_ms']:.0f} | {r['retrieval_n']}, {r['retrieval_p99_ms']:.0f} "
            f"| {r['processing_p99_ms']:.0f} | {r['dead_lettered']:.0f} | {r['vigil_cores']:.2f} |"
        )
    lines.append(
        f"\nLimits in this run: the embedder alone {embed:.0f} questions/s in batches of 32 "
        f"({limits['embedder']['batch_1_per_s']:.0f}/s one at a time); a bare consumer {bare_rate:,.0f} records/s."
    )
    lines.append(
        f"vigil peak RSS: {live['peak_rss_mib']:.0f} MiB; ready {live['first_ready_s']:.1f} s after its first start "
        f"(importing the help centre), {live['ready_s']:.1f} s after a restart."
    )
    if scale:
        lines += [
            "",
            "| passages in store | queries | search p50 / p99 (ms) | embedding one query p50 / p99 (ms) |",
            "|---:|---:|---:|---:|",
        ]
        for r in scale:
            lines.append(
                f"| {r['passages']:,} | {r['queries']} "
                f"| {r['search_p50_ms']:.1f} / {r['search_p99_ms']:.1f} "
                f"| {r['embed_p50_ms']:.1f} / {r['embed_p99_ms']:.1f} |"
            )
    return "\n".join(lines)


def verdicts(live: dict[str, Any]) -> list[str]:
    phases = {r["phase"]: r for r in live["phases"]}

    def line(what: str, ok: bool, value: str) -> str:
        return f"- {what}: {'met' if ok else 'MISSED'} ({value})"

    out = []
    if "backlog" in phases:
        rate = phases["backlog"]["handled_rate"]
        out.append(
            line(f"sustained >= {TARGET_SUSTAINED_QPS:.0f} questions/s", rate >= TARGET_SUSTAINED_QPS, f"{rate:.0f}/s")
        )
    if "100/s" in phases:
        p99 = phases["100/s"]["all_p99_ms"]
        out.append(line(f"p99 <= {TARGET_P99_AT_100_MS:.0f} ms at 100/s", p99 <= TARGET_P99_AT_100_MS, f"{p99:.0f} ms"))
    if "burst" in phases:
        p99 = phases["burst"]["all_p99_ms"]
        out.append(line(f"burst p99 <= {TARGET_BURST_P99_MS:.0f} ms", p99 <= TARGET_BURST_P99_MS, f"{p99:.0f} ms"))
    rss = live["peak_rss_mib"]
    out.append(line(f"peak RSS <= {TARGET_PEAK_RSS_MIB:.0f} MiB", rss <= TARGET_PEAK_RSS_MIB, f"{rss:.0f} MiB"))
    ready = live["ready_s"]
    out.append(line(f"ready <= {TARGET_READY_S:.0f} s after a restart", ready <= TARGET_READY_S, f"{ready:.1f} s"))
    return out


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.answers", description="vigil's answers benchmark.")
    parser.add_argument("--quick", action="store_true", help="15 s per rate, store at 10k passages only")
    parser.add_argument("--rates", help="comma-separated questions/s (default 20,100)")
    parser.add_argument("--seconds", type=float, help="seconds of questions per rate")
    parser.add_argument("--burst", type=int, help="questions sent at once for the burst (default 70)")
    parser.add_argument("--backlog", type=int, help="questions sent at once for the sustained rate (default 6000)")
    parser.add_argument("--passages", help="comma-separated store sizes for the query timing; 0 to skip")
    parser.add_argument("--json", type=Path, help="where to write the results (default bench/results/answers-*.json)")
    parser.add_argument("--profile", type=Path, help="directory for a py-spy profile of vigil during the rates")
    parser.add_argument("--workdir", type=Path, help="keep the broker's and vigil's logs here (default: a temp dir)")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE", help="a vigil setting")
    return parser


def _plan(args: argparse.Namespace) -> Plan:
    plan = QUICK if args.quick else Plan()
    changes: dict[str, Any] = {}
    if args.rates:
        changes["rates"] = tuple(float(r) for r in args.rates.split(","))
    if args.seconds:
        changes["seconds"] = args.seconds
    if args.burst:
        changes["burst"] = args.burst
    if args.backlog:
        changes["backlog"] = args.backlog
    if args.passages is not None:
        changes["passages"] = tuple(int(p) for p in args.passages.split(",") if int(p) > 0)
    if args.setting:
        changes["settings"] = tuple(tuple(item.split("=", 1)) for item in args.setting)
    return dataclasses.replace(plan, **changes)


async def _run(
    plan: Plan, workdir: Path, profile: Path | None
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    questions = [text for _, text in question_set()]
    # The limits first, on a machine where vigil is not running yet.
    limits = {"embedder": await asyncio.to_thread(embedder_limit, questions)}
    _progress(f"embedder alone: {limits['embedder']['batch_32_per_s']:.0f} questions/s in batches of 32")
    scale = await store_at_scale(plan.passages, questions)
    live = await end_to_end(plan, workdir, profile)
    return live, limits, scale


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    plan = _plan(args)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vigil-bench-")))
        workdir.mkdir(parents=True, exist_ok=True)
        live, limits, scale = asyncio.run(_run(plan, workdir, args.profile))
    print(tables(live, limits, scale))
    print()
    print("\n".join(verdicts(live)))
    results = {"end_to_end": live, "limits": limits, "store_at_scale": scale}
    output = report.save("answers", argv, dataclasses.asdict(plan), results, args.json)
    print(f"\nresults: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
