"""Shared fixtures: a real Tansu broker, real PostgreSQL and SQLite databases, unique topics per test."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
import pytest
from prometheus_client import CollectorRegistry

from tests.chroma import ChromaServer
from tests.fake_anthropic import FakeAnthropic
from tests.mosquitto import Mosquitto
from vigil.app.settings import Settings
from vigil.cases.store import CaseStore
from vigil.cases.views import CaseViews
from vigil.core.clock import Clock, SystemClock
from vigil.dev.broker import EmbeddedBroker
from vigil.knowledge.documents import Entry, discover, read
from vigil.knowledge.embedding import Embedder, Vectors
from vigil.knowledge.onnx_embedding import OnnxEmbedder
from vigil.knowledge.store import KnowledgeStore
from vigil.transport.kafka import ensure_topics

PG_ADMIN = os.environ.get("VIGIL_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """Put back the logger levels the CLI's ``configure_logging`` sets, so later tests log as before."""
    from vigil.app.cli import CHATTY_LOGGERS, MIGRATION_LOGGER, PARAMETER_LOGGERS

    names = (*PARAMETER_LOGGERS, *CHATTY_LOGGERS, MIGRATION_LOGGER, "sqlalchemy.engine", "alembic.runtime.plugins", "")
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    filters = [list(logger.filters) for logger in loggers]
    try:
        yield
    finally:
        for logger, level, kept in zip(loggers, levels, filters, strict=True):
            logger.setLevel(level)
            logger.filters[:] = kept


@pytest.fixture(scope="session")
def kafka() -> Iterator[EmbeddedBroker]:
    """One Tansu broker for the whole session (tests use unique topics)."""
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Mosquitto]:
    """A Mosquitto of the test's own, with persistence: tests stop and restart it on the same port and files."""
    broker = Mosquitto(tmp_path / "mosquitto")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def chroma(tmp_path: Path) -> Iterator[ChromaServer]:
    """A Chroma server on a free port, with its data under the test's folder, started."""
    server = ChromaServer(tmp_path)
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def own_kafka() -> Iterator[EmbeddedBroker]:
    """A broker of the test's own, for tests that freeze or kill it."""
    with EmbeddedBroker() as broker:
        yield broker


@contextlib.contextmanager
def frozen(broker: EmbeddedBroker, timeout_s: float = 5.0) -> Iterator[None]:
    """The broker stopped with SIGSTOP, and thawed on exit.

    A stop is delivered to each thread on its own time: a busy broker can still answer a request sent just after
    ``kill`` returns. Wait until every thread of it is stopped, so what the test sends next meets a silent broker.
    """
    os.kill(broker.pid, signal.SIGSTOP)
    try:
        tasks = Path(f"/proc/{broker.pid}/task")
        deadline = time.monotonic() + timeout_s
        while not all(_thread_state(task) in {"T", "t", "X", "Z", None} for task in tasks.iterdir()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the broker (pid {broker.pid}) did not stop within {timeout_s}s")
            time.sleep(0.001)
        yield
    finally:
        os.kill(broker.pid, signal.SIGCONT)


def _thread_state(task: Path) -> str | None:
    try:
        stat = (task / "stat").read_text()
    except FileNotFoundError:  # the thread ended meanwhile
        return None
    return stat[stat.rindex(")") + 2]


@dataclass(frozen=True)
class Topics:
    input: str
    suggestions: str
    dlq: str
    group: str


def new_topics() -> Topics:
    tag = uuid.uuid4().hex[:10]
    return Topics(f"in-{tag}", f"sug-{tag}", f"dlq-{tag}", f"group-{tag}")


@pytest.fixture
def topics() -> Topics:
    return new_topics()


def _create_database() -> str:
    name = f"vigil_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def _drop_database(name: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database on the machine's server, dropped afterwards."""
    name = _create_database()
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        _drop_database(name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'vigil.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Every store test runs on both databases."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'vigil.db'}"
        return
    name = _create_database()
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        _drop_database(name)


def make_settings(
    *,
    tmp_path: Path,
    db_url: str | None = None,
    bootstrap: str | None = None,
    topics: Topics | None = None,
    **overrides: object,
) -> Settings:
    """Settings for a test: its own data dir, database, topics and a random HTTP port."""
    kafka: dict[str, object] = {"bootstrap_servers": bootstrap, "session_timeout_s": 6.0, "partitions": 3}
    if topics is not None:
        kafka |= {
            "input_topic": topics.input,
            "suggestions_topic": topics.suggestions,
            "dlq_topic": topics.dlq,
            "group_id": topics.group,
        }
    values: dict[str, object] = {
        "data_dir": tmp_path / "data",
        "database": {"url": db_url},
        "http": {"host": "127.0.0.1", "port": 0},
        "kafka": kafka,
        "health_interval_s": 0.2,
        "graceful_timeout_s": 5.0,
    }
    values |= overrides
    return Settings(_env_file=None, **values)  # type: ignore[call-arg, arg-type]


def case_store(settings: Settings, *, clock: Clock | None = None) -> CaseStore:
    """The case store the daemon builds from ``settings`` (not connected yet)."""
    return CaseStore.from_settings(
        settings.database,
        data_dir=settings.data_dir,
        clock=clock or SystemClock(),
        default_tenant=settings.default_tenant,
        future_skew_s=settings.ingest.future_skew_s,
    )


def views_of(store: CaseStore) -> CaseViews:
    """The read models on the case store's database, as the daemon builds them."""
    return CaseViews(store.engine, timeout_s=store.timeout_s)


@pytest.fixture
async def store(db_url: str, tmp_path: Path) -> AsyncIterator[CaseStore]:
    """A migrated case store on each database."""
    async with migrated_store(db_url, tmp_path) as case_store:
        yield case_store


@pytest.fixture
def views(store: CaseStore) -> CaseViews:
    """What the panel and the API read from ``store``."""
    return views_of(store)


@contextlib.asynccontextmanager
async def migrated_store(db_url: str, tmp_path: Path) -> AsyncIterator[CaseStore]:
    """A case store on ``db_url``, migrated, closed on exit."""
    built = case_store(make_settings(tmp_path=tmp_path, db_url=db_url))
    await built.migrate()
    try:
        yield built
    finally:
        await built.close()


class RememberingEmbedder:
    """The real model, remembering what it embedded: many tests import the same help centre."""

    def __init__(self, model: Embedder) -> None:
        self._model = model
        self._seen: dict[str, Vectors] = {}
        self.name = model.name
        self.dimensions = model.dimensions

    def load(self) -> None:
        self._model.load()

    def embed(self, texts: Sequence[str]) -> Vectors:
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if missing:
            for text, vector in zip(missing, self._model.embed(missing), strict=True):
                self._seen[text] = vector
        return np.stack([self._seen[t] for t in texts]) if texts else self._model.embed(texts)


@pytest.fixture(scope="session")
def embedder() -> RememberingEmbedder:
    """The real embedding model on the default path (ONNX Runtime), loaded once for the session; its export is
    this machine's cached one (made by the first session that needs it), as the daemons' in tests is."""
    model = OnnxEmbedder()
    model.load()
    return RememberingEmbedder(model)


async def open_knowledge(store: CaseStore, path: Path, embedder: Embedder) -> KnowledgeStore:
    """A knowledge store on the test's database, with Chroma on disk at ``path``."""
    knowledge = KnowledgeStore(engine=store.engine, embedder=embedder, clock=SystemClock(), chroma_path=path)
    await knowledge.open()
    return knowledge


def help_centre() -> list[Entry]:
    """The bundled Brightwave help centre."""
    root = Path(__file__).parent.parent / "knowledge"
    return [e for p in discover([root / "articles", root / "faqs"]) for e in read(p)]


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture(scope="module")
async def anthropic_server() -> AsyncIterator[FakeAnthropic]:
    """A fake Messages API server for the tests of one module (tests/fake_anthropic.py)."""
    async with FakeAnthropic.serving() as fake:
        yield fake


@pytest.fixture
def fake_llm(anthropic_server: FakeAnthropic) -> FakeAnthropic:
    """The module's fake Messages API server, with no handler and nothing received yet."""
    anthropic_server.reset()
    return anthropic_server


async def create_topics(bootstrap: str, topics: Topics, partitions: int = 3) -> None:
    settings = make_settings(tmp_path=Path("/nonexistent"), bootstrap=bootstrap, topics=topics)
    await ensure_topics(settings.kafka, (topics.input, topics.suggestions, topics.dlq), partitions=partitions)


async def wait_for(predicate, timeout_s: float = 20.0, interval_s: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` (sync or async) until it returns something truthy, or fail after ``timeout_s``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        await asyncio.sleep(interval_s)
