"""Answers benchmark: how long a customer waits for a suggested answer, and what a big knowledge store costs.

1. **End to end, over Kafka.** A Tansu broker and ``vigil run`` in its own process (SQLite in a temp dir, answers
   on, the bundled knowledge imported at start-up). Customer questions, each in a new
   conversation and stamped with the moment they are sent, are produced at a steady rate (20 and 100 questions/s
   by default) while a consumer in this process reads the suggestions topic. Latency = time the suggestion is
   consumed - time its question was produced (``in_reply_to`` links them; one machine clock). Two pools of
   questions are mixed half and half: the bundled FAQs' questions and alternates (the FAQ path), and hand-written
   questions that an article answers and no FAQ does (the retrieval path). Each suggestion is counted on the path
   it took (its first source's kind), questions without a suggestion are counted as silences.
2. **Query time at scale, in process.** A throwaway knowledge store (``bench.knowledge_env``) with the bundled
   knowledge plus synthetic passages (sentences of the bundled articles recombined) grown to each of ``--passages``;
   ``KnowledgeStore.match_faq`` and ``KnowledgeStore.search`` are timed for every question of both pools.
   Embedding 100k passages with the real model takes far too long on this machine (~50 passages/s on one thread),
   so synthetic passages get the normalised mean of their sentences' real embeddings; queries use the real model.

Run: ``python -m bench.answers`` (about 7 minutes) or ``python -m bench.answers --quick`` (about 3 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
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

from bench import databases, report, traffic
from bench.daemon import VigilProcess
from bench.knowledge_env import knowledge_store
from bench.linux import MachineTimes
from bench.metrics import Snapshot
from vigil.answers.questions import classify
from vigil.answers.settings import AnswerSettings
from vigil.answers.skill import MODELS, SOURCES, features
from vigil.dev.broker import EmbeddedBroker
from vigil.knowledge.documents import Entry, Passage, discover, read
from vigil.knowledge.store import KnowledgeStore
from vigil.transport.kafka import ensure_topics
from vigil.transport.settings import KafkaSettings

KNOWLEDGE = Path(__file__).resolve().parent.parent / "knowledge"
KNOWLEDGE_PATHS = (KNOWLEDGE / "articles", KNOWLEDGE / "faqs")
TARGET_E2E_P99_MS = 150.0
TARGET_FAQ_P99_MS = 50.0

# Questions an article answers and no FAQ does, written from knowledge/articles (one or two per article).
RETRIEVAL_QUESTIONS = (
    "can I join the priority support register if I rely on my broadband for a medical device?",
    "how do I unlock my My Brightwave account after too many wrong passwords?",
    "the unlock email never arrived, what now?",
    "can my daughter talk to you about my account on my behalf?",
    "should I turn band steering off on the hub for my smart plugs?",
    "what happens after I order fibre, when does the engineer come?",
    "which fibre speed do I need for working from home and gaming?",
    "how do I escalate my complaint to customer relations?",
    "when can I take my complaint to the ombudsman?",
    "what are your live chat opening hours?",
    "how much do I pay if I cancel during the cooling-off period?",
    "why am I using so much more mobile data than usual?",
    "how is the early termination charge worked out on my broadband?",
    "what happens during an engineer visit, do I need to be home?",
    "the engineer didn't turn up for my appointment, can I get compensation?",
    "how do I get a free returns bag for my old hub?",
    "what if my returned hub has not been checked in yet?",
    "my esim QR code says this code is no longer valid, what do I do?",
    "what happens if the second payment attempt fails too?",
    "I'm struggling to pay my bill this month, can you help?",
    "what does a flashing amber light on the hub mean?",
    "the hub has a red light, is it broken?",
    "how quickly will a replacement hub arrive?",
    "how do I factory reset the hub?",
    "how do I leave Brightwave TV?",
    "how long does a PAC code last?",
    "I found my phone after barring the SIM, can I unbar it?",
    "how do I protect my bank accounts after my phone was stolen?",
    "can I keep my broadband if my new address can't get the same speed?",
    "why does a new-build home need an engineer visit?",
    "how do I avoid a gap in broadband when I move into a new build?",
    "how long does a broadband fault take to fix?",
    "will I get a credit for the outage last week?",
    "how do I run a proper speed test on my connection?",
    "how much is the sports pack and can I cancel it any time?",
    "how do I set up my TV box?",
    "do you offer a static IP address?",
    "does World Pass work in the USA and how much is it a day?",
)


@dataclass(frozen=True, slots=True)
class Plan:
    """What one benchmark run does."""

    rates: tuple[float, ...] = (20.0, 100.0)
    seconds: float = 30.0
    passages: tuple[int, ...] = (10_000, 30_000, 100_000)
    partitions: int = 6
    drain_timeout_s: float = 240.0
    settings: tuple[tuple[str, str], ...] = ()


QUICK = Plan(seconds=15.0, passages=(10_000,))


# --- questions ---------------------------------------------------------------------------------------------------


def faq_questions() -> list[str]:
    """Every bundled FAQ's question and alternates."""
    entries = [e for path in discover([KNOWLEDGE / "faqs"]) for e in read(path)]
    return [q for e in entries if e.kind == "faq" for q in e.questions]


def heading_questions() -> list[str]:
    """Article section headings that are already questions in all but the question mark ("How to ...")."""
    entries = [e for path in discover([KNOWLEDGE / "articles"]) for e in read(path)]
    starts = ("how ", "what ", "when ", "why ", "which ", "can ", "if ")
    headings = {p.heading for e in entries for p in e.passages if p.heading}
    return sorted(h[0].lower() + h[1:].rstrip(".") + "?" for h in headings if h.lower().startswith(starts))


async def pools(knowledge: KnowledgeStore) -> tuple[dict[str, list[str]], dict[str, int]]:
    """The two pools, chosen with vigil's own rules on the bundled knowledge.

    FAQ pool: every FAQ question and alternate that the question detector accepts (the others are silenced by
    design). Retrieval pool: hand-written questions and question-like headings of the articles that the detector
    accepts, that no FAQ matches confidently, and whose retrieval answer clears ``min_confidence``; the others are
    counted in the returned statistics and left out (they would take the FAQ path, or get no suggestion).
    """
    settings = AnswerSettings()
    faq = [q for q in faq_questions() if classify(q).asks]
    candidates = list(dict.fromkeys([*RETRIEVAL_QUESTIONS, *heading_questions()]))
    stats = Counter(candidates=len(candidates), faq_candidates=len(faq_questions()), faq=len(faq))
    retrieval = []
    model = MODELS[knowledge.ranking]
    for question in candidates:
        if not classify(question).asks:
            stats["not_a_question"] += 1
            continue
        hits = await knowledge.search(question, SOURCES)
        if hits and hits[0].kind == "faq" and model.probability(features(hits)) >= settings.faq_confidence:
            stats["faq_matches"] += 1
            continue
        if not hits or hits[0].kind == "faq" or model.probability(features(hits)) < settings.min_confidence:
            stats["low_confidence"] += 1
            continue
        retrieval.append(question)
    stats["retrieval"] = len(retrieval)
    return {"faq": faq, "retrieval": retrieval}, dict(stats)


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


def question_stream(tag: str, mix: list[tuple[str, str]], asked: dict[str, Asked]) -> Iterator[traffic.Event]:
    """Customer questions, each in a new conversation; records when each is handed to the producer."""
    for n in itertools.count():
        pool, text = mix[n % len(mix)]
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


async def _wait_ready(vigil: VigilProcess, timeout_s: float) -> None:
    async with httpx.AsyncClient(timeout=5.0) as client, asyncio.timeout(timeout_s):
        while True:
            await vigil.snapshot()  # raises if vigil died
            if (await client.get(f"http://127.0.0.1:{vigil.port}/readyz")).status_code == 200:
                return
            await asyncio.sleep(0.2)


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


async def one_rate(
    vigil: VigilProcess,
    suggestions: Suggestions,
    *,
    bootstrap: str,
    topic: str,
    mix: list[tuple[str, str]],
    rate: float,
    seconds: float,
    drain_timeout_s: float,
) -> dict[str, Any]:
    """Questions at ``rate`` for ``seconds``; every latency, per path, and what went unanswered."""
    asked: dict[str, Asked] = {}
    before = await vigil.snapshot()
    silenced_before = suppressed(await _metrics_text(vigil))
    cpu, machine, start = vigil.cpu_seconds(), MachineTimes.now(), time.monotonic()
    sent, produce_s = await traffic.produce_paced(
        bootstrap,
        topic,
        question_stream(f"q{rate:g}-{uuid.uuid4().hex[:6]}", mix, asked),
        rate=rate,
        duration_s=seconds,
    )
    cores = (vigil.cpu_seconds() - cpu) / produce_s
    machine_cores = MachineTimes.now().busy_cores_since(machine)
    backlog_at_end = sent - ((await vigil.snapshot()).handled - before.handled)
    after, done = await _until_handled(vigil, before.handled + sent, drain_timeout_s)
    await _settle(suggestions)
    silenced_after = suppressed(await _metrics_text(vigil))
    by_path: dict[str, list[float]] = {}
    internal: dict[str, list[float]] = {}
    silences: Counter[str] = Counter()
    crossed: Counter[str] = Counter()
    for message_id, question in asked.items():
        got = suggestions.arrived.get(message_id)
        if got is None:
            silences[question.pool] += 1
            continue
        arrived_at, suggestion = got
        path = "faq" if suggestion["sources"] and suggestion["sources"][0]["kind"] == "faq" else "retrieval"
        if path != question.pool:
            crossed[f"{question.pool}->{path}"] += 1
        by_path.setdefault(path, []).append(arrived_at - question.at)
        internal.setdefault(path, []).append(suggestion["latency_ms"] / 1000)
    every = [v for values in by_path.values() for v in values]
    row: dict[str, Any] = {
        "rate": rate,
        "sent": sent,
        "achieved_rate": sent / produce_s,
        "handled_rate": sent / (done - start),
        "backlog_at_end_of_producing": backlog_at_end,
        "drain_s_after_producing": done - start - produce_s,
        "vigil_cores": cores,
        "machine_cores": machine_cores,
        "answered": len(every),
        "silences": dict(silences),
        "silenced_by_reason": {k: v - silenced_before.get(k, 0.0) for k, v in silenced_after.items()},
        "path_not_pool": dict(crossed),
        "all_p50_ms": report.percentile(every, 0.5) * 1000,
        "all_p99_ms": report.percentile(every, 0.99) * 1000,
        "dead_lettered": after.dead_lettered - before.dead_lettered,
    }
    for path in ("faq", "retrieval"):
        values, inside = by_path.get(path, []), internal.get(path, [])
        row[f"{path}_n"] = len(values)
        row[f"{path}_p50_ms"] = report.percentile(values, 0.5) * 1000
        row[f"{path}_p99_ms"] = report.percentile(values, 0.99) * 1000
        row[f"{path}_max_ms"] = max(values, default=float("nan")) * 1000
        row[f"{path}_vigil_p50_ms"] = report.percentile(inside, 0.5) * 1000
        row[f"{path}_vigil_p99_ms"] = report.percentile(inside, 0.99) * 1000
    return row


async def end_to_end(
    plan: Plan, workdir: Path, profile: Path | None, questions: dict[str, list[str]]
) -> dict[str, Any]:
    """Start a broker and vigil, run every rate against the same process, stop it."""
    mix = [("faq", q) for q in questions["faq"]] + [("retrieval", q) for q in questions["retrieval"]]
    random.Random(7).shuffle(mix)
    mix = _alternate(mix)
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker, databases.fresh("sqlite", workdir) as db_url:
        topic = f"answers-{uuid.uuid4().hex[:10]}"
        kafka = KafkaSettings(bootstrap_servers=broker.bootstrap)
        await ensure_topics(kafka, [topic, f"{topic}.suggestions", f"{topic}.dlq"], partitions=plan.partitions)
        settings = {
            "ANSWERS__ENABLED": "true",
            "KNOWLEDGE__PATHS": json.dumps([str(p) for p in KNOWLEDGE_PATHS]),
        } | dict(plan.settings)
        vigil = VigilProcess(
            bootstrap=broker.bootstrap,
            topic=topic,
            db_url=db_url,
            workdir=workdir / "vigil",
            partitions=plan.partitions,
            settings=settings,
        )
        suggestions = Suggestions(broker.bootstrap, f"{topic}.suggestions")
        profiler = None
        try:
            started = time.monotonic()
            await vigil.start()
            await _wait_ready(vigil, timeout_s=180)
            ready_s = time.monotonic() - started
            _progress(f"vigil ready in {ready_s:.1f} s (RSS peak so far {vigil.peak_rss_bytes() / 2**20:.0f} MiB)")
            await suggestions.start()
            # Warm-up (consumer-group join, first model calls): not measured.
            await one_rate(
                vigil,
                suggestions,
                bootstrap=broker.bootstrap,
                topic=topic,
                mix=mix,
                rate=5,
                seconds=4,
                drain_timeout_s=60,
            )
            if profile is not None:
                profiler = vigil.profile(profile / "vigil-answers.txt")
            rows = []
            for rate in plan.rates:
                rows.append(
                    await one_rate(
                        vigil,
                        suggestions,
                        bootstrap=broker.bootstrap,
                        topic=topic,
                        mix=mix,
                        rate=rate,
                        seconds=plan.seconds,
                        drain_timeout_s=plan.drain_timeout_s,
                    )
                )
                r = rows[-1]
                _progress(
                    f"{rate:g} q/s: all p50/p99 {r['all_p50_ms']:.0f}/{r['all_p99_ms']:.0f} ms, FAQ p99 "
                    f"{r['faq_p99_ms']:.0f} ms, retrieval p99 {r['retrieval_p99_ms']:.0f} ms, handled "
                    f"{r['handled_rate']:.1f}/s, silences {r['silences']}"
                )
            peak_rss = vigil.peak_rss_bytes()
        finally:
            await suggestions.stop()
            exit_code = await vigil.stop()
            if profiler is not None:
                await asyncio.to_thread(profiler.wait, 60)
    return {
        "pools": {k: len(v) for k, v in questions.items()},
        "ready_s": ready_s,
        "rates": rows,
        "peak_rss_mib": peak_rss / 2**20,
        "exit_code": exit_code,
    }


def _alternate(mix: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """FAQ and retrieval questions taking turns, so both paths get the same share of every second."""
    faq = [m for m in mix if m[0] == "faq"]
    other = [m for m in mix if m[0] != "faq"]
    length = max(len(faq), len(other))
    return [
        m
        for pair in zip(
            itertools.islice(itertools.cycle(faq), length),
            itertools.islice(itertools.cycle(other), length),
            strict=True,
        )
        for m in pair
    ]


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


async def store_at_scale(
    sizes: Sequence[int],
) -> tuple[dict[str, list[str]], dict[str, int], list[dict[str, Any]]]:
    """Choose the question pools on the bundled knowledge, then time match_faq and search for every question with
    the store grown to each size in turn."""
    rows = []
    async with knowledge_store() as knowledge:
        await knowledge.import_files(list(KNOWLEDGE_PATHS))
        chosen, selection = await pools(knowledge)
        _progress(f"question pools: {selection}")
        questions = chosen["faq"] + chosen["retrieval"]
        if not sizes:
            return chosen, selection, rows
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
            faq_s, search_s, embed_s = [], [], []
            for question in questions:
                t0 = time.perf_counter()
                await knowledge.match_faq(question)
                t1 = time.perf_counter()
                await knowledge.search(question, 3)
                t2 = time.perf_counter()
                await asyncio.to_thread(real.embed, [question])
                t3 = time.perf_counter()
                faq_s.append(t1 - t0)
                search_s.append(t2 - t1)
                embed_s.append(t3 - t2)
            row = {"passages": (await knowledge.stats())["passages"], "queries": len(questions)}
            for name, values in (("match_faq", faq_s), ("search", search_s), ("embed", embed_s)):
                row[f"{name}_p50_ms"] = report.percentile(values, 0.5) * 1000
                row[f"{name}_p99_ms"] = report.percentile(values, 0.99) * 1000
            rows.append(row)
            _progress(
                f"{row['passages']:,} passages: match_faq p50/p99 {row['match_faq_p50_ms']:.1f}/"
                f"{row['match_faq_p99_ms']:.1f} ms, search {row['search_p50_ms']:.1f}/{row['search_p99_ms']:.1f} ms"
            )
    return chosen, selection, rows


# --- report ------------------------------------------------------------------------------------------------------


def tables(live: dict[str, Any], scale: list[dict[str, Any]]) -> str:
    lines = [
        "| questions/s (achieved) | handled/s | answered | silences (FAQ / retrieval pool) | all p50 / p99 (ms) "
        "| FAQ path n, p50 / p99 (ms) | retrieval path n, p50 / p99 (ms) | dead-lettered | vigil CPU (cores) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in live["rates"]:
        s = r["silences"]
        lines.append(
            f"| {r['rate']:g} ({r['achieved_rate']:.1f}) | {r['handled_rate']:.1f} | {r['answered']} / {r['sent']} "
            f"| {s.get('faq', 0)} / {s.get('retrieval', 0)} | {r['all_p50_ms']:.0f} / {r['all_p99_ms']:.0f} "
            f"| {r['faq_n']}: {r['faq_p50_ms']:.0f} / {r['faq_p99_ms']:.0f} "
            f"| {r['retrieval_n']}: {r['retrieval_p50_ms']:.0f} / {r['retrieval_p99_ms']:.0f} "
            f"| {r['dead_lettered']:.0f} | {r['vigil_cores']:.2f} |"
        )
    lines.append(f"\nvigil peak RSS: {live['peak_rss_mib']:.0f} MiB; ready {live['ready_s']:.1f} s after start.")
    if scale:
        lines += [
            "",
            "| passages in store | queries | match_faq p50 / p99 (ms) | search p50 / p99 (ms) | embedding one query "
            "p50 / p99 (ms) |",
            "|---:|---:|---:|---:|---:|",
        ]
        for r in scale:
            lines.append(
                f"| {r['passages']:,} | {r['queries']} | {r['match_faq_p50_ms']:.1f} / {r['match_faq_p99_ms']:.1f} "
                f"| {r['search_p50_ms']:.1f} / {r['search_p99_ms']:.1f} "
                f"| {r['embed_p50_ms']:.1f} / {r['embed_p99_ms']:.1f} |"
            )
    return "\n".join(lines)


def verdicts(live: dict[str, Any]) -> list[str]:
    out = []
    for r in live["rates"]:
        if r["rate"] == 20:
            ok = r["all_p99_ms"] < TARGET_E2E_P99_MS
            out.append(
                f"- p99 < {TARGET_E2E_P99_MS:.0f} ms end to end at 20/s: "
                f"{'met' if ok else 'MISSED'} ({r['all_p99_ms']:.0f} ms)"
            )
        ok = r["faq_p99_ms"] < TARGET_FAQ_P99_MS
        out.append(
            f"- FAQ path p99 < {TARGET_FAQ_P99_MS:.0f} ms at {r['rate']:g}/s: "
            f"{'met' if ok else 'MISSED'} ({r['faq_p99_ms']:.0f} ms)"
        )
    return out


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.answers", description="vigil's answers benchmark.")
    parser.add_argument("--quick", action="store_true", help="15 s per rate, store at 10k passages only")
    parser.add_argument("--rates", help="comma-separated questions/s (default 20,100)")
    parser.add_argument("--seconds", type=float, help="seconds of questions per rate")
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
    if args.passages is not None:
        changes["passages"] = tuple(int(p) for p in args.passages.split(",") if int(p) > 0)
    if args.setting:
        changes["settings"] = tuple(tuple(item.split("=", 1)) for item in args.setting)
    return dataclasses.replace(plan, **changes)


async def _run(plan: Plan, workdir: Path, profile: Path | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    questions, selection, scale = await store_at_scale(plan.passages)
    live = await end_to_end(plan, workdir, profile, questions)
    live["selection"] = selection
    return live, scale


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    plan = _plan(args)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        workdir = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vigil-bench-")))
        workdir.mkdir(parents=True, exist_ok=True)
        live, scale = asyncio.run(_run(plan, workdir, args.profile))
    print(tables(live, scale))
    print()
    print("\n".join(verdicts(live)))
    results = {"end_to_end": live, "store_at_scale": scale}
    output = report.save("answers", argv, dataclasses.asdict(plan), results, args.json)
    print(f"\nresults: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
