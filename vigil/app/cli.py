"""The `vigil` command: run the daemon, the embedded demo, replay events, manage the database and panel sign-ins."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vigil import __version__
from vigil.core.clock import SystemClock
from vigil.core.errors import SettingsError, VigilError
from vigil.core.lifecycle import Phase
from vigil.core.memory import GrowthReport
from vigil.panel.identity import ROLES

if TYPE_CHECKING:
    from vigil.app.daemon import Daemon
    from vigil.app.settings import Settings
    from vigil.dev.discovery import DemoAddress
    from vigil.knowledge.tuned import Manifest
    from vigil.transport.kafka import KafkaPublisher
    from vigil.transport.settings import KafkaSettings

# Each command imports what it needs when it runs: the daemon's parts (torch, Chroma, the LLM SDK) take seconds to
# import, which `vigil schema` or `vigil token` should not pay; even pydantic and SQLAlchemy take most of a second,
# which `vigil --help` should not pay. tests/app/test_cli_imports.py checks what each command imports.

log = logging.getLogger("vigil")


# Loggers of libraries that print SQL parameters, which hold customer text, at DEBUG. (SQLAlchemy's own loggers stay
# at the WARNING it gives them, and the engines hide parameters even when an operator turns SQL logging on.)
PARAMETER_LOGGERS = ("aiosqlite",)
# bm25s sets its logger to DEBUG when it is imported (after logging is set up here), so a level set here would not
# hold: a filter on the logger does. Its DEBUG and INFO lines are about building an index, for every refresh.
# APScheduler says at INFO each time it runs a job (the knowledge refresh: every few seconds). httpx says at INFO each
# request it makes: every query to a Chroma server (nearly every line of a replica's log), every call to a system.
CHATTY_LOGGERS = ("bm25s", "apscheduler.scheduler", "apscheduler.executors.default", "httpx")
# Alembic says which database dialect it found each time a command opens the database: only DEBUG shows it.
MIGRATION_LOGGER = "alembic.runtime.migration"
MIGRATION_CHATTER = ("Context impl ", "Will assume ")
HARD_EXIT_S = 2.0
EX_TEMPFAIL = 75
"""sysexits' "try again later": ``vigil mine --once`` found another miner running."""
"""After a second signal, how long cancelled work may take to unwind before the process exits regardless."""


class _Below(logging.Filter):
    """Drops records below ``level`` that start with one of ``prefixes`` (any record, with none given)."""

    def __init__(self, level: int, prefixes: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.level = level
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.level:
            return True
        return bool(self.prefixes) and not str(record.msg).startswith(self.prefixes)


def _filter_once(name: str, new: _Below) -> None:
    logger = logging.getLogger(name)
    for old in [f for f in logger.filters if isinstance(f, _Below)]:
        logger.removeFilter(old)
    logger.addFilter(new)


def configure_logging(level: str) -> None:
    """Log to stderr at ``level``. Even at DEBUG, no library logs the parameters of a SQL statement."""
    logging.basicConfig(level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Alembic announces its plugins when it is imported, which a command does after logging is set up.
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    effective = logging.getLogger().getEffectiveLevel()
    quieter = max(logging.INFO, effective)
    for name in PARAMETER_LOGGERS:
        logging.getLogger(name).setLevel(quieter)
    chatter_below = logging.DEBUG if effective <= logging.DEBUG else logging.WARNING
    for name in CHATTY_LOGGERS:
        _filter_once(name, _Below(chatter_below))
    # "Running upgrade 0007 -> 0008" stays: it says the schema changed.
    _filter_once(MIGRATION_LOGGER, _Below(chatter_below, MIGRATION_CHATTER))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `vigil` console script."""
    args = _parser().parse_args(argv)
    try:
        from vigil.app.settings import load_settings

        settings = load_settings()
        configure_logging(settings.log_level)
        command: Callable[[argparse.Namespace, Settings], Coroutine[Any, Any, int]] = args.command
        return asyncio.run(command(args, settings))
    except SettingsError as exc:
        print(f"vigil: {exc}", file=sys.stderr)
        return 2
    except VigilError as exc:
        print(f"vigil: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


class _Choices:
    """An argument's choices, read from their module only when argparse checks a value or shows them: the event
    types live in a module that imports pydantic, which the rest of the command line does not need."""

    def __init__(self, load: Callable[[], Iterable[str]]) -> None:
        self._load = load
        self._choices: tuple[str, ...] | None = None

    def _all(self) -> tuple[str, ...]:
        if self._choices is None:
            self._choices = tuple(self._load())
        return self._choices

    def __contains__(self, value: object) -> bool:
        return value in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())


def _event_types() -> list[str]:
    from vigil.wire.events import json_schemas

    return sorted(json_schemas())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vigil", description="A proactive copilot for customer-support analysts.")
    parser.add_argument("--version", action="version", version=f"vigil {__version__}")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    run_help = (
        "run the daemon on Kafka (VIGIL_KAFKA__BOOTSTRAP_SERVERS) and/or MQTT (VIGIL_MQTT__HOST), as the settings say"
    )
    commands.add_parser("run", help=run_help, description=f"{run_help[0].upper()}{run_help[1:]}.").set_defaults(
        command=_run
    )
    demo = commands.add_parser("demo", help="run everything embedded: broker, daemon, demo traffic")
    demo.add_argument("--no-traffic", action="store_true", help="do not publish the demo conversations")
    demo.set_defaults(command=_demo)
    rp = commands.add_parser("replay", help="publish v1 events from a JSONL file to the input topic")
    rp.add_argument("file", type=Path)
    rp.add_argument("--rate", type=float, default=0.0, help="events per second (default: as fast as possible)")
    rp.add_argument("--topic", help="topic to publish to (default: the input topic)")
    rp.add_argument(
        "--unchecked", action="store_true", help="publish lines that are not v1 events too (vigil dead-letters them)"
    )
    rp.set_defaults(command=_replay)
    send = commands.add_parser("send", help="publish one message to the input topic (a running demo's by default)")
    send.add_argument("text", help="what the message says")
    send.add_argument("--conversation", required=True, help="the conversation id (a new one opens a new case)")
    send.add_argument("--role", choices=("customer", "analyst", "bot", "system"), default="customer")
    send.add_argument("--tenant", help="the tenant (default: the running demo's, else VIGIL_DEFAULT_TENANT)")
    send.add_argument("--author", help="who wrote it, as the panel shows it")
    send.add_argument(
        "--customer", help="the customer's id in the company's systems (metadata.customer_id), for actions on them"
    )
    send.add_argument(
        "--wait",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how long to watch for vigil dead-lettering the message, which is then a failure (default 5; 0: "
        "do not watch)",
    )
    send.set_defaults(command=_send)
    _eval_commands(
        commands.add_parser("eval", help="evaluate vigil offline").add_subparsers(required=True, metavar="ACTION")
    )
    db = commands.add_parser("db", help="database schema").add_subparsers(required=True, metavar="ACTION")
    db.add_parser("upgrade", help="apply migrations up to the newest").set_defaults(command=_db_upgrade)
    _kb_commands(commands.add_parser("kb", help="the knowledge store").add_subparsers(required=True, metavar="ACTION"))
    mine = commands.add_parser(
        "mine",
        help="mine closed, human-resolved cases into knowledge",
        description="Mine closed, human-resolved cases into knowledge. One miner runs at a time: if a daemon's is "
        f"running, this mines nothing and exits {EX_TEMPFAIL}.",
    )
    mine.add_argument("--once", action="store_true", required=True, help="mine what is due now, print a summary, exit")
    mine.set_defaults(command=_mine)
    token = commands.add_parser("token", help="make a panel sign-in token and its VIGIL_PANEL__USERS entry")
    token.add_argument("name", help="who it is for")
    token.add_argument("--role", choices=ROLES, default="analyst")
    token.add_argument("--tenant", action="append", required=True, help="a tenant they may see (repeat; * for all)")
    token.set_defaults(command=_token)
    sessions = commands.add_parser("sessions", help="panel sign-ins").add_subparsers(required=True, metavar="ACTION")
    revoke = sessions.add_parser("revoke", help="sign a person out of the panel in every browser, on every replica")
    revoke.add_argument("user", help="the name they sign in as (as /api/whoami shows it)")
    revoke.set_defaults(command=_sessions_revoke)
    policy = commands.add_parser("policy", help="the actions' policy").add_subparsers(required=True, metavar="ACTION")
    check = policy.add_parser(
        "check",
        help="decide action requests: one JSON request a line in, one verdict a line out",
        description="Decide each action request of FILE (one JSON object a line: action, args, context, and "
        "optionally tenant, role, and for the risk patterns at, conversation_id and customer_id) with a rulebook's "
        "policy, then its risk patterns (risk.yaml) over the lines before, and print one {verdict, rule, reason, "
        "approver} a line, in order (verdict: allow, needs_approval, deny or blocked). The exit code is 1 when a "
        "line is not a valid request (it is denied as invalid_request).",
    )
    check.add_argument("file", help="the requests, JSON lines ('-': standard input)")
    check.add_argument(
        "--rulebook",
        help="a bundled rulebook's name (demo, tau2-retail, tau2-airline) or a directory with actions.yaml and "
        "policy.cedar (default: the default tenant's, from VIGIL_ACTIONS__RULEBOOKS)",
    )
    check.set_defaults(command=_policy_check)
    test = policy.add_parser(
        "test",
        help="run a rulebook's own cases (tests.yaml beside its policy.cedar)",
        description="Decide each case of the rulebook's tests.yaml (a request and the verdict, rule and approver "
        "it must get) and print PASS or FAIL a case, what a failure expected and got, the count, and the rules no "
        "case names. The exit code is 1 when a case fails.",
    )
    test.add_argument(
        "rulebook", help="a bundled rulebook's name (demo, tau2-retail, tau2-airline) or a rulebook's directory"
    )
    test.set_defaults(command=_policy_test)
    schema = commands.add_parser("schema", help="print the JSON Schema of a wire format v1 type")
    # A metavar of its own: without one, argparse lists the choices while the parser is built.
    schema.add_argument("type", metavar="TYPE", choices=_Choices(_event_types), help="the event type: %(choices)s")
    schema.set_defaults(command=_schema)
    return parser


def _kb_commands(kb: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imports = kb.add_parser("import", help="import help articles, FAQs and documents (idempotent by id)")
    imports.add_argument("paths", nargs="+", type=Path, help="files or folders (.md, .yaml, .csv, .json, .jsonl)")
    imports.add_argument("--prune", action="store_true", help="remove entries these files no longer hold")
    imports.set_defaults(command=_kb_import)
    search = kb.add_parser("search", help="rank knowledge for a question ('-': one question per line on stdin)")
    search.add_argument("text")
    search.add_argument("--k", type=_positive_int, default=5, help="how many entries to show (default: 5)")
    search.add_argument("--json", action="store_true", help="print JSON")
    search.add_argument(
        "--tenant",
        help="search as this tenant's conversations do: its own entries (mined ones too) and the global ones "
        "(default: the running demo's tenant, else VIGIL_DEFAULT_TENANT)",
    )
    search.set_defaults(command=_kb_search)
    stats = kb.add_parser("stats", help="entries per kind")
    stats.add_argument("--tenant", action="append", help="count what this tenant sees (repeat; default: every entry)")
    stats.set_defaults(command=_kb_stats)
    kb.add_parser("export", help="every entry as JSON lines").set_defaults(command=_kb_export)
    kb.add_parser("pending", help="mined entries waiting for review, with their provenance").set_defaults(
        command=_kb_pending
    )
    approve = kb.add_parser("approve", help="serve an entry that waits for review")
    approve.add_argument("id")
    approve.set_defaults(command=_kb_govern, status="active")
    kb.add_parser(
        "tune",
        help="fine-tune the embedding model on the knowledge and the analysts' verdicts; serve it if it beats the "
        "shipped one",
        description="Fine-tune the embedding model on the knowledge (each FAQ's questions, each article's headings) "
        "and the analysts' verdicts, on every core, holding the miner's lease; judge it against the shipped model on "
        "questions held back from training, and serve it (every process on this data dir, at its next refresh or "
        f"start) only if it is better. Prints the gate's numbers. With a miner running, exits {EX_TEMPFAIL}.",
    ).set_defaults(command=_kb_tune)
    retire = kb.add_parser("retire", help="stop serving an entry (kept, with its provenance)")
    retire.add_argument("id")
    retire.set_defaults(command=_kb_govern, status="retired")


def _eval_commands(evaluation: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = evaluation.add_parser(
        "replay",
        help="run the pipeline in-process on a file of v1 events, on their own time (no broker)",
        description="Run vigil's pipeline in this process on the v1 events of FILE, one at a time, on a clock set "
        "from each event's time, with the configured database, data dir and settings. Every suggestion it publishes "
        "goes to OUT as a JSON line; a summary goes to stderr. A line that is not a v1 event is named and skipped, "
        "and the exit code is then 1.",
    )
    replay.add_argument("file", type=Path, help="v1 events, one JSON object a line")
    replay.add_argument("--out", type=Path, required=True, help="where to write the suggestions (JSON lines)")
    replay.add_argument(
        "--fresh",
        action="store_true",
        help="start from empty: drop and re-create vigil's tables in the configured database, delete the data "
        "dir's Chroma folder",
    )
    replay.set_defaults(command=_eval_replay)


def _positive_int(text: str) -> int:
    """An argument that must be a whole number of at least 1 (argparse refuses anything else with exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


async def _kb_import(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.knowledge.store import standalone

    async with standalone(settings.knowledge, settings.database, data_dir=settings.data_dir) as knowledge:
        report = await knowledge.import_files(args.paths, prune=args.prune)
    print(f"{report.added} added, {report.updated} updated, {report.unchanged} unchanged, {report.removed} removed")
    return 0


async def _kb_search(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.dev import discovery
    from vigil.knowledge.store import standalone

    demo = discovery.find(settings.data_dir)
    tenant = args.tenant or (demo.tenant if demo is not None and demo.tenant else settings.default_tenant)
    if not (args.json or args.text == "-"):
        print(f"as tenant {tenant}:")
    async with standalone(settings.knowledge, settings.database, data_dir=settings.data_dir) as knowledge:
        queries = sys.stdin if args.text == "-" else [args.text]
        for query in queries:
            hits = await knowledge.search(query.strip(), args.k, tenant=tenant)
            ranked = [{"id": h.entry_id, "kind": h.kind, "title": h.title, "score": round(h.score, 6)} for h in hits]
            if args.json or args.text == "-":
                print(json.dumps(ranked), flush=True)
            else:
                for rank, hit in enumerate(ranked, start=1):
                    print(f"{rank}. [{hit['kind']}] {hit['id']}  {hit['title']}  ({hit['score']:.4f})")
    return 0


async def _kb_stats(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.knowledge.store import standalone

    async with standalone(
        settings.knowledge, settings.database, data_dir=settings.data_dir, searchable=False
    ) as knowledge:
        stats = await knowledge.stats(args.tenant)
    for kind, count in sorted(stats.items()):
        print(f"{kind}: {count}")
    return 0


async def _kb_export(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.knowledge.store import standalone

    async with standalone(
        settings.knowledge, settings.database, data_dir=settings.data_dir, searchable=False
    ) as knowledge:
        for entry in await knowledge.export():
            print(json.dumps(entry, ensure_ascii=False))
    return 0


async def _kb_pending(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.knowledge.store import standalone

    async with standalone(
        settings.knowledge, settings.database, data_dir=settings.data_dir, searchable=False
    ) as knowledge:
        pending = await knowledge.governed(status="pending_review")
    for entry in pending:
        provenance = entry["provenance"] or {}
        cases = [c.get("conversation_id") for c in provenance.get("cases", [])]
        conflicts = provenance.get("conflicts") or []
        print(
            f"{entry['id']}  [{entry['kind']}] {entry['title']}  (confidence {entry['confidence']:.2f}; "
            f"{len(cases)} case{'s' if len(cases) != 1 else ''}: {', '.join(cases)}"
            + (f"; conflicting: {', '.join(conflicts)}" if conflicts else "")
            + ")"
        )
    if not pending:
        print("nothing waits for review")
    return 0


async def _kb_govern(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.knowledge.store import standalone

    async with standalone(
        settings.knowledge, settings.database, data_dir=settings.data_dir, searchable=False
    ) as knowledge:
        found = await knowledge.govern(args.id, status=args.status)
    if not found:
        print(f"vigil: no knowledge entry {args.id!r}", file=sys.stderr)
        return 1
    print(f"{args.id}: {args.status}")
    return 0


async def _kb_tune(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.knowledge.store import standalone
    from vigil.knowledge.tuner import Busy, tune_with_lease

    knowledge_settings = settings.knowledge
    if knowledge_settings.tune_threads is None:  # nothing else to serve here: every core trains
        knowledge_settings = knowledge_settings.model_copy(update={"tune_threads": len(os.sched_getaffinity(0))})
    async with standalone(
        knowledge_settings, settings.database, data_dir=settings.data_dir, searchable=False
    ) as knowledge:
        try:
            manifest = await tune_with_lease(
                knowledge.served,
                knowledge_settings,
                data_dir=settings.data_dir,
                engine=knowledge.engine,
                clock=SystemClock(),
            )
        except Busy as busy:
            print(f"vigil: {busy}; try again then", file=sys.stderr)
            return EX_TEMPFAIL
    print(tune_report(manifest))
    return 0


def tune_report(manifest: Manifest) -> str:
    """What ``vigil kb tune`` prints: what it trained on, the gate's numbers, and what it decided."""
    counts, training = manifest.counts, manifest.training
    lines = [
        f"{manifest.version}: {counts.get('examples', 0)} examples from {counts.get('faq_questions', 0)} FAQ "
        f"questions ({counts.get('faq_pairs', 0)} alternates also with their FAQ's question), "
        f"{counts.get('article_anchors', 0)} article headings and sentences, {counts.get('verdicts_accepted', 0)} "
        f"accepted and {counts.get('verdicts_dismissed', 0)} dismissed answers; {training.get('steps', 0)} steps, "
        f"{training.get('epochs', 0)} epochs; {manifest.seconds:.0f} s in all",
        f"{counts.get('held_back', 0)} held-back questions: as served (the gate) and by the model alone",
        f"  {'':15}{'hit@1':>7}{'MRR':>7}{'hit@1':>12}{'MRR':>7}",
        *(
            f"  {name:15}{served.get('hit_at_1', 0):7.3f}{served.get('mrr', 0):7.3f}"
            f"{alone.get('hit_at_1', 0):12.3f}{alone.get('mrr', 0):7.3f}"
            for name, served, alone in (
                ("shipped model", manifest.shipped, manifest.alone.get("shipped", {})),
                ("tuned model", manifest.tuned, manifest.alone.get("tuned", {})),
            )
        ),
    ]
    verdict = (
        "accepted: served from the next refresh or start" if manifest.accepted else "rejected: the model in use stays"
    )
    lines.append(f"{verdict} ({manifest.reason})")
    return "\n".join(lines)


async def _mine(args: argparse.Namespace, settings: Settings) -> int:
    from prometheus_client import CollectorRegistry

    from vigil.knowledge.store import standalone
    from vigil.mining.miner import Miner
    from vigil.mining.rewrite import rewriter_from

    clock = SystemClock()
    if settings.miner.embed_parallelism is None:  # nothing else to serve here: every core embeds
        miner_settings = settings.miner.model_copy(update={"embed_parallelism": len(os.sched_getaffinity(0))})
        settings = settings.model_copy(update={"miner": miner_settings})
    rewriter = rewriter_from(settings.llm, settings.miner, registry=CollectorRegistry(), clock=clock)
    try:
        async with standalone(settings.knowledge, settings.database, data_dir=settings.data_dir) as knowledge:
            miner = Miner(settings.miner, engine=knowledge.engine, knowledge=knowledge, clock=clock, rewriter=rewriter)
            report = await miner.run()
    finally:
        if rewriter is not None:
            await rewriter.aclose()
    if report.busy is not None:
        print(f"vigil: {report.summary()}; try again then", file=sys.stderr)
        return EX_TEMPFAIL
    print(report.summary())
    return 0


def _exit_now() -> None:
    sys.stderr.flush()
    os._exit(1)


async def _until_signalled(work: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``work`` with an event that SIGTERM or SIGINT sets; a second signal exits at once."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():
            log.warning("second signal: exiting without draining")
            # Unwinding cancels the work in flight, whose clean-ups may wait on a broker or a database (closing a
            # consumer commits, for one): bound it. Nothing is lost either way; what was not committed comes again.
            threading.Timer(HARD_EXIT_S, _exit_now).start()
            raise SystemExit(1)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    loop.add_signal_handler(signal.SIGUSR2, GrowthReport().on_signal)  # what grows (vigil/core/memory.py)
    await work(stop)


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.app.daemon import Daemon

    daemon = Daemon(settings)
    await _until_signalled(daemon.run)
    return 0


async def _demo(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.app.daemon import Daemon
    from vigil.dev.broker import EmbeddedBroker
    from vigil.dev.demo import bundled_knowledge

    broker: EmbeddedBroker | None = None
    if not settings.kafka.bootstrap_servers:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        wanted = settings.demo.broker_port
        broker = EmbeddedBroker(port=wanted, fallback=True, log_path=settings.data_dir / "broker.log")
        bootstrap = broker.start()
        if broker.fell_back:
            log.warning("port %d is taken (VIGIL_DEMO__BROKER_PORT): the embedded broker is on %s", wanted, bootstrap)
        log.info("embedded Kafka-compatible broker (Tansu) on %s", bootstrap)
        settings = settings.model_copy(
            update={"kafka": settings.kafka.model_copy(update={"bootstrap_servers": bootstrap})}
        )
    if DEMO_TENANT not in settings.panel.tenant_display:
        # The demo's company is British: its times in London's, its money in pounds (its shop's records are in pence).
        from vigil.panel.settings import TenantDisplay

        shown = {**settings.panel.tenant_display, DEMO_TENANT: TenantDisplay(time_zone="Europe/London", currency="GBP")}
        settings = settings.model_copy(update={"panel": settings.panel.model_copy(update={"tenant_display": shown})})
    if not settings.knowledge.paths:
        bundled = bundled_knowledge()
        paths = [bundled / "articles", bundled / "faqs"]
        settings = settings.model_copy(update={"knowledge": settings.knowledge.model_copy(update={"paths": paths})})
    try:
        async with _demo_systems(settings) as settings:
            daemon = Daemon(settings)
            await _until_signalled(lambda stop: _demo_with_traffic(daemon, settings, stop, not args.no_traffic))
    finally:
        if broker is not None:
            broker.stop()
    return 0


@contextlib.asynccontextmanager
async def _demo_systems(settings: Settings) -> AsyncIterator[Settings]:
    """The demo company's order system, billing and CRM (vigil/dev/systems/), on their own SQLite file in the data
    dir, seeded on first use: the settings with the actions pointed at them. Systems the settings name already
    (VIGIL_ACTIONS__SYSTEMS) are used instead, and nothing is started."""
    if settings.actions.systems or not settings.actions.enabled:
        yield settings
        return
    from vigil.actions.connectors.settings import SystemSettings
    from vigil.core.clock import SystemClock
    from vigil.dev.systems.seed import ensure_seeded
    from vigil.dev.systems.server import SystemsServer

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    path = settings.data_dir / "systems.sqlite"
    await asyncio.to_thread(ensure_seeded, path, now=SystemClock().now())
    async with SystemsServer(path) as server:
        log.info("the demo's order system, billing and CRM on %s (%s)", server.url, path)
        systems = {name: SystemSettings(base_url=server.url) for name in ("orders", "billing", "crm")}
        actions = settings.actions.model_copy(update={"systems": systems})
        yield settings.model_copy(update={"actions": actions})


DEMO_TENANT = "brightwave"
"""The tenant of the demo's conversations (knowledge/demo/conversations.jsonl)."""
BANNER_MESSAGE = "My hub light is solid amber and the internet is down, what should I do?"


async def _demo_with_traffic(daemon: Daemon, settings: Settings, stop: asyncio.Event, traffic: bool) -> None:
    from vigil.dev import discovery
    from vigil.transport.kafka import KafkaPublisher

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    publisher = KafkaPublisher(settings.kafka)
    starting = asyncio.create_task(_when_demo_ready(daemon, settings, publisher, traffic))
    try:
        await daemon.run(stop)
    finally:
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        discovery.withdraw(settings.data_dir, os.getpid())
        await publisher.close()


async def _when_demo_ready(daemon: Daemon, settings: Settings, publisher: KafkaPublisher, traffic: bool) -> None:
    """Once the daemon is ready: close what earlier runs left open, tell the world where the demo is, play."""
    from vigil.dev import discovery
    from vigil.dev.demo import (
        DemoTraffic,
        bundled_conversations,
        load_conversations,
        load_rewordings,
        rewordings_of,
        tidy_earlier_runs,
    )

    # The daemon has no "ready" event to wait on; /readyz reads the same two things.
    while not (daemon.phase is Phase.RUNNING and daemon.health.ready):  # noqa: ASYNC110
        await asyncio.sleep(0.1)
    kafka = settings.kafka
    played = settings.demo.conversations or bundled_conversations()
    conversations = load_conversations(played)
    await daemon.backoff.retry("connecting the demo producer", publisher.start)
    await daemon.backoff.retry(
        "closing what earlier demo runs left open",
        lambda: tidy_earlier_runs(
            conversations, views=daemon.views, publisher=publisher, topic=kafka.input_topic, clock=daemon.clock
        ),
    )
    panel = f"http://{settings.http.host}:{daemon.http_port}/panel"
    address = discovery.DemoAddress(
        bootstrap_servers=str(kafka.bootstrap_servers),
        input_topic=kafka.input_topic,
        suggestions_topic=kafka.suggestions_topic,
        dlq_topic=kafka.dlq_topic,
        panel_url=panel,
        pid=os.getpid(),
        tenant=next((str(e["tenant"]) for c in conversations for e in c if e.get("tenant")), None),
    )
    discovery.publish(settings.data_dir, address)
    print(demo_banner(address), flush=True)
    if traffic:
        await DemoTraffic(
            conversations,
            publisher=publisher,
            topic=kafka.input_topic,
            clock=daemon.clock,
            backoff=daemon.backoff,
            pace_s=settings.demo.pace_s,
            parallel=settings.demo.parallel,
            rewordings=load_rewordings(rewordings_of(played)),
        ).run()


def demo_banner(address: DemoAddress) -> str:
    """What `vigil demo` prints once it is ready: where to look, and how to talk to it."""
    return "\n".join(
        [
            "vigil demo is ready",
            f"  panel:   {address.panel_url}",
            f"  broker:  {address.bootstrap_servers} (Kafka; events to {address.input_topic})",
            "  send a customer message (from this directory, or with the same VIGIL_DATA_DIR):",
            f'    {_this_vigil()} send --conversation try-1 "{BANNER_MESSAGE}"',
        ]
    )


def _this_vigil() -> str:
    """How to run this vigil from the current directory: ``vigil`` when that is it on the PATH, else its path
    (``.venv/bin/vigil`` after `make run`, whose venv is not activated)."""
    import shutil

    me = Path(sys.argv[0])
    found = shutil.which("vigil")
    with contextlib.suppress(OSError):
        if found is not None and Path(found).samefile(me):
            return "vigil"
    with contextlib.suppress(ValueError):
        return str(me.resolve().relative_to(Path.cwd().resolve()))
    return str(me.resolve())


def _kafka_to_publish(settings: Settings, command: str) -> KafkaSettings:
    """The Kafka that `replay` and `send` publish to: VIGIL_KAFKA__BOOTSTRAP_SERVERS, else the demo running in the
    data dir (its broker and topics), else a clear error."""
    return _kafka_and_demo(settings, command)[0]


def _kafka_and_demo(settings: Settings, command: str) -> tuple[KafkaSettings, DemoAddress | None]:
    """``_kafka_to_publish``'s Kafka, and the running demo it belongs to (None: VIGIL_KAFKA__BOOTSTRAP_SERVERS)."""
    from vigil.dev import discovery

    kafka = settings.kafka
    if kafka.bootstrap_servers:
        return kafka, None
    demo = discovery.find(settings.data_dir)
    if demo is None:
        raise SettingsError(
            "VIGIL_KAFKA__BOOTSTRAP_SERVERS",
            f"not set, and no vigil demo is running with data dir {settings.data_dir} (no "
            f"{discovery.demo_file(settings.data_dir)}); vigil {command} needs a Kafka to publish to: start "
            "`vigil demo` here, or set it",
        )
    update = {
        "bootstrap_servers": demo.bootstrap_servers,
        "input_topic": demo.input_topic,
        "suggestions_topic": demo.suggestions_topic,
        "dlq_topic": demo.dlq_topic,
    }
    return kafka.model_copy(update=update), demo


async def _replay(args: argparse.Namespace, settings: Settings) -> int:
    if not args.file.is_file():  # before anything else: the simplest mistake gets the simplest answer, at once
        print(f"vigil: {'not a file' if args.file.exists() else 'no such file'}: {args.file}", file=sys.stderr)
        return 2
    from vigil.dev.replay import replay
    from vigil.transport.kafka import KafkaPublisher

    kafka = _kafka_to_publish(settings, "replay")
    publisher = KafkaPublisher(kafka)
    try:
        await publisher.start()
        done = await replay(
            args.file,
            publisher=publisher,
            topic=args.topic or kafka.input_topic,
            clock=SystemClock(),
            rate=args.rate,
            checked=None if args.unchecked else settings.ingest,
        )
    finally:
        await publisher.close()
    for bad in done.bad:
        print(f"vigil: {args.file}:{bad.number}: not published, {bad.reason}: {bad.detail}", file=sys.stderr)
    print(f"published {done.sent} events to {args.topic or kafka.input_topic}")
    if done.bad:  # the good lines went out; the exit code says the file was not all good
        print(f"vigil: {len(done.bad)} lines of {args.file} are not v1 events and were not published", file=sys.stderr)
        return 1
    return 0


async def _eval_replay(args: argparse.Namespace, settings: Settings) -> int:
    if not args.file.is_file():
        print(f"vigil: {'not a file' if args.file.exists() else 'no such file'}: {args.file}", file=sys.stderr)
        return 2
    from vigil.app.evaluation import replay

    summary = await replay(args.file, args.out, settings, fresh=args.fresh)
    for bad in summary.bad:
        print(f"vigil: {args.file}:{bad.number}: not replayed, {bad.reason}: {bad.detail}", file=sys.stderr)
    for line in summary.lines(args.out):
        print(line, file=sys.stderr)
    if summary.bad:
        print(f"vigil: {len(summary.bad)} lines of {args.file} were not replayed", file=sys.stderr)
        return 1
    return 0


async def _send(args: argparse.Namespace, settings: Settings) -> int:
    import uuid
    from datetime import UTC, datetime

    from vigil.transport.kafka import KafkaPublisher, dead_letter_of
    from vigil.wire.events import parse

    logging.getLogger("aiokafka").setLevel(logging.WARNING)  # its consumer's chatter is not the user's business
    kafka, demo = _kafka_and_demo(settings, "send")
    event: dict[str, object] = {
        "type": "message",
        "schema_version": 1,
        "message_id": f"{args.conversation}-{uuid.uuid4().hex[:12]}",
        "conversation_id": args.conversation,
        "tenant": args.tenant or (demo.tenant if demo is not None and demo.tenant else settings.default_tenant),
        "sent_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "role": args.role,
        "text": args.text,
    }
    if args.author:
        event["author"] = args.author
    if args.customer:
        event["metadata"] = {"customer_id": args.customer}
    value = json.dumps(event, ensure_ascii=False).encode()
    # Check it as vigil will, so a mistake is told here rather than dead-lettered there.
    parse(value, max_event_bytes=settings.ingest.max_event_bytes, max_text_bytes=settings.ingest.max_text_bytes)
    publisher = KafkaPublisher(kafka)
    try:
        await publisher.start()
        await publisher.send(kafka.input_topic, value, args.conversation.encode())
    finally:
        await publisher.close()
    said = f"message {event['message_id']} in conversation {args.conversation} (tenant {event['tenant']})"
    rejected = await dead_letter_of(kafka, value, timeout_s=args.wait) if args.wait > 0 else None
    if rejected is not None:
        reason, detail = rejected.get("vigil.dlq.reason", "?"), rejected.get("vigil.dlq.detail", "")
        print(f"vigil: {said} was dead-lettered to {kafka.dlq_topic}: {reason}: {detail}", file=sys.stderr)
        return 1
    print(f"sent {said} to {kafka.input_topic}")
    return 0


async def _db_upgrade(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.db.engine import migrate, open_engine

    engine = open_engine(settings.database, data_dir=settings.data_dir)
    try:
        await migrate(engine)
    finally:
        await engine.dispose()
    print("database schema is up to date")
    return 0


async def _token(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.panel.auth import new_token, token_digest
    from vigil.panel.settings import PanelUser

    token = new_token()
    user = PanelUser(name=args.name, role=args.role, tenants=args.tenant, token_sha256=token_digest(token))
    print(f"token (give it to {args.name}; it is not stored anywhere): {token}")
    print("add to VIGIL_PANEL__USERS (a JSON list):")
    print(user.model_dump_json())
    return 0


async def _sessions_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.cases.views import CaseViews
    from vigil.db.engine import open_engine
    from vigil.panel.sessions import SessionRegistry

    engine = open_engine(settings.database, data_dir=settings.data_dir)
    try:
        views = CaseViews(engine, timeout_s=settings.database.timeout_s)
        ended = await SessionRegistry(views, clock=SystemClock()).end_all(args.user)
    finally:
        await engine.dispose()
    print(
        f"{ended} panel sessions of {args.user} ended (a bearer token stays valid: remove it from VIGIL_PANEL__USERS)"
    )
    return 0


async def _policy_check(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.actions.check import INVALID_REQUEST, check, render
    from vigil.actions.rulebook import Rulebook, locate
    from vigil.dev.demo import bundled_knowledge

    name = args.rulebook or settings.actions.rulebook(settings.default_tenant)
    rulebook = Rulebook.load(locate(name, bundled_knowledge() / "rulebooks"), tenants=settings.actions.tenants)
    read = sys.stdin.read if args.file == "-" else partial(Path(args.file).read_text, encoding="utf-8")
    try:
        text = await asyncio.to_thread(read)
    except OSError as exc:
        raise VigilError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
    invalid = False
    for checked in check(rulebook, text.splitlines()):
        invalid = invalid or checked.rule == INVALID_REQUEST
        print(render(checked))
    return 1 if invalid else 0


async def _policy_test(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.actions import expectations
    from vigil.actions.rulebook import Rulebook, locate
    from vigil.dev.demo import bundled_knowledge

    directory = locate(args.rulebook, bundled_knowledge() / "rulebooks")
    path = directory / expectations.TESTS_FILE
    if not path.is_file():
        raise VigilError(f"{path}: no such file (a rulebook's cases are its {expectations.TESTS_FILE})")
    cases = expectations.load(path)
    # The tenants the cases ask as exist too, so a rule for one of them is tested rather than refused.
    tenants = settings.actions.tenants | {case.request.tenant for _, case in cases}
    rulebook = Rulebook.load(directory, tenants=tenants)
    outcomes = expectations.run(rulebook, expectations.load(path, rulebook))
    for line in expectations.report(path, rulebook, outcomes):
        print(line)
    return 0 if all(outcome.passed for outcome in outcomes) else 1


async def _schema(args: argparse.Namespace, settings: Settings) -> int:
    from vigil.wire.events import json_schemas

    print(json.dumps(json_schemas()[args.type], indent=2))
    return 0
