"""The knowledge store: entries and passages in SQL, their vectors in Chroma, a BM25 index in memory.

One interface, used the same way by ``vigil kb import``, the miner and the answer skill. Entries carry their kind,
provenance, status and confidence. SQL is the record; Chroma and the lexical index are derived from it and are
repaired from it at start-up (``refresh``), so a crash between the two never leaves a passage unsearchable.

An entry may belong to one tenant; one without (the default) is for every tenant. A search for a tenant's
conversation sees the global entries and that tenant's, never another tenant's: Chroma filters on the ``tenant``
metadata of each vector, the lexical index masks out the passages of other tenants, and the fusion checks again.

Errors come out as vigil's at this boundary: the database's, classified by SQLSTATE as the case store does, and
Chroma's (``vectors.py``) as ``KnowledgeUnavailable`` when either cannot be reached (callers retry) and
``KnowledgeError`` otherwise. Reads on the answer path (search, FAQ match, an entry, the version) are bounded by
``timeout_s``; imports and repairs, which may be large, are not.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from vigil.core.clock import Clock, SystemClock
from vigil.core.errors import EntryConflict, KnowledgeError, KnowledgeUnavailable, StartupError
from vigil.db.engine import guarded, migrate, open_engine, upsert
from vigil.db.settings import DatabaseSettings
from vigil.knowledge import ranking, reranking
from vigil.knowledge.batching import Batcher, MicroBatcher
from vigil.knowledge.documents import Entry, EntryKind, Passage, discover, read
from vigil.knowledge.embedding import SHIPPED, Embedder, Vectors, embedder_for
from vigil.knowledge.fusion import CROSS_VALIDATED, Rankings, Recipe, entry_scores, passage_scores, sentences
from vigil.knowledge.lexical import LexicalIndex
from vigil.knowledge.ranking import Candidate, rerank, rrf_share
from vigil.knowledge.reranking import SHORTLIST, Reranker
from vigil.knowledge.settings import KnowledgeSettings, RankingName
from vigil.knowledge.tables import ENTRY, PASSAGE, SUPERSEDED_BY
from vigil.knowledge.vectors import VectorCollection, VectorHit, collection_names, connect, drop_collection
from vigil.knowledge.verdicts import MOVE, VerdictMemory

log = logging.getLogger(__name__)

T = TypeVar("T")
CANDIDATES = 50
HYBRID = Recipe()
"""Dense and BM25 of the whole query, RRF k 5, dense weight 0.7, an entry where its best passage is."""
RECIPES: dict[RankingName, tuple[Recipe, Recipe]] = {
    "hybrid": (HYBRID, HYBRID),
    "cross_validated": (CROSS_VALIDATED, CROSS_VALIDATED),
    "adaptive": (HYBRID, CROSS_VALIDATED),
}
"""The passage fusions ``VIGIL_KNOWLEDGE__RANKING`` names (``vigil.knowledge.fusion``; docs/evaluation.md): the
recipe for a short message and the one for a message of ``LONG`` sentences or more."""
LONG = 3
"""How many sentences make a message long: a chat question is one or two; a situation, or a pasted conversation,
is several, and the request may be in any of them (``fusion.sentences``)."""
SERVED_CONFIDENCE = 0.4
"""An entry is searched when it is active and trusted at least this much: a mined entry whose cases mostly ended
badly (the miner's confidence, vigil/mining/miner.py) is kept for review, not served."""
_SERVED = sa.and_(ENTRY.c.status == "active", ENTRY.c.confidence >= SERVED_CONFIDENCE)
# A vector's ``tenant`` metadata for a global entry (Chroma metadata cannot be None; no tenant id is empty).
GLOBAL = ""


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import changed."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0


@dataclass(frozen=True, slots=True)
class Hit:
    """A knowledge entry found for a query, with the passage that matched best."""

    entry_id: str
    kind: str
    title: str
    url: str | None
    passage_id: str
    passage: str
    score: float
    """The ranking's score (``ranking.py``: fused ranks relative to the first, moved by the agreement; higher is
    better)."""
    dense: float
    """Cosine similarity of the best passage (0 if only the lexical side found it)."""
    lexical: float
    """BM25 score of the best passage (0 if only the dense side found it)."""
    question: float = 0.0
    """For an FAQ, cosine similarity of its nearest question or alternate (0 if not among the nearest)."""
    agreement: float = 0.0
    """How far the words that tell the first candidates apart side with this entry (``ranking.agreement``)."""
    verdict: float = 0.0
    """How the tenant's analysts judged answers from this entry to questions like this one, in -1 (dismissed) .. 1
    (accepted); 0 when none did (``verdicts.term``). The score is already moved by it."""
    dense_rank: int | None = None
    """Where the entry is among the entries ranked by the dense similarity of their best passage alone (0: first;
    None: not among the dense side's candidates)."""
    lexical_rank: int | None = None
    """Where the entry is among the entries ranked by the BM25 score of their best passage alone."""


@dataclass(frozen=True, slots=True)
class FaqMatch:
    """The FAQ whose question (or an alternate) is nearest to the customer's, and by how much."""

    entry_id: str
    question: str
    answer: str
    similarity: float
    margin: float
    """Similarity minus that of the best other FAQ: a near tie means the match is doubtful."""


MINED = "miner"
"""The ``origin`` of every entry the miner writes (``vigil.mining``): what tells mined knowledge from imported."""
EDITED = "edit"
"""The ``origin`` of an FAQ proposed from an analyst's edit of an answer (``vigil.mining.edits``)."""
REPLIED = "reply"
"""The ``origin`` of an FAQ proposed from an analyst's reply to a question vigil did not answer
(``vigil.mining.replies``)."""
LEARNED = frozenset({MINED, EDITED, REPLIED})
"""The origins of knowledge learnt from the analysts' own work: mined from their resolved cases, or proposed from
what they wrote and approved by a lead. Everything else was imported."""
EntryStatus = Literal["active", "pending_review", "retired"]
"""Only ``active`` entries are searched; ``pending_review`` ones wait for a lead (``vigil kb approve``)."""
STATUSES: tuple[EntryStatus, ...] = ("active", "pending_review", "retired")


@dataclass(frozen=True, slots=True)
class Governance:
    """What a writer other than a file import (the miner) says of an entry besides its content: whether it is
    served, how far it is trusted, and where it came from."""

    status: EntryStatus = "active"
    confidence: float = 1.0
    provenance: Mapping[str, Any] = field(default_factory=dict)
    expires_at: datetime | None = None
    """After it the entry is no longer served (None: never)."""


@dataclass(frozen=True, slots=True)
class Version:
    """How much knowledge SQL holds and when it last changed: a change means another process wrote to it."""

    entries: int = 0
    updated_at: str = ""


@dataclass(frozen=True, slots=True)
class _StoredEntry:
    """What an import compares an entry with: its stored digest, the file it came from, and its tenant."""

    digest: str
    origin: str
    tenant: str | None


@dataclass(frozen=True, slots=True)
class _IndexedEntry:
    """An active entry as searches show it."""

    kind: str
    title: str
    url: str | None
    body: str
    tenant: str | None
    """The one tenant that may see it; None for every tenant."""
    questions: tuple[str, ...] = ()
    """An FAQ's question and alternates."""
    expires_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class _IndexedPassage:
    """A passage as searches show it."""

    entry_id: str
    text: str


@dataclass(frozen=True, slots=True)
class _VectorIds:
    """The ids of the vectors SQL records for some entries, in each collection."""

    passages: list[str]
    questions: list[str]


@dataclass(frozen=True, slots=True)
class _Owner:
    """Whose a vector is: the entry it belongs to, and the ``tenant`` tag and the entry's ``digest`` it must carry
    in Chroma."""

    entry_id: str
    tag: str
    digest: str


@dataclass(frozen=True, slots=True)
class _Collections:
    """The two Chroma collections: passages (searched) and FAQ questions (matched)."""

    passages: VectorCollection
    questions: VectorCollection


@dataclass(eq=False)
class _Model:
    """The embedding model serving searches, with the collections of its vectors and its recent query vectors:
    what ``use_model`` replaces in one assignment, so that a query is embedded and searched by one model."""

    embedder: Embedder
    queries: MicroBatcher
    verdicts: VerdictMemory
    """The analysts' verdicts with their questions' vectors, of this model (a query is compared with them)."""
    collections: _Collections | None = None
    recent: OrderedDict[str, Vectors] = field(default_factory=OrderedDict)

    def made(self, vector: Vectors) -> bool:
        """Whether ``vector`` is one this model embedded lately (``embed`` hands out the very arrays it keeps)."""
        return any(kept is vector for kept in self.recent.values())


def model_collections(prefix: str, model: str) -> tuple[str, str]:
    """The names of a model's passage and question collections: the shipped model's are the names vigil always
    used; another model's (a tuned one, a ``model_path``) have a suffix of their own, so no collection ever holds
    two models' vectors."""
    if model == SHIPPED:
        return f"{prefix}-passages", f"{prefix}-questions"
    suffix = hashlib.sha256(model.encode()).hexdigest()[:12]
    return f"{prefix}-passages-{suffix}", f"{prefix}-questions-{suffix}"


@dataclass
class _Snapshot:
    """What searches read: rebuilt whole on refresh, swapped in one assignment."""

    lexical: LexicalIndex = field(default_factory=lambda: LexicalIndex([], []))
    passages: dict[str, _IndexedPassage] = field(default_factory=dict)
    entries: dict[str, _IndexedEntry] = field(default_factory=dict)
    passage_tenants: list[str | None] = field(default_factory=list)  # per passage, in the lexical index's order
    question_entries: dict[str, str] = field(default_factory=dict)
    """The entry of each FAQ question's vector, by the vector's id."""
    first_passages: dict[str, str] = field(default_factory=dict)  # by entry: where an FAQ found by a question ranks
    sections: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each served entry's passage ids, in order: the parts of an article the answer skill picks its snippet from."""
    titles: LexicalIndex = field(default_factory=lambda: LexicalIndex([], []))  # entry titles, by entry id
    title_tenants: list[str | None] = field(default_factory=list)  # per entry, in the title index's order
    version: Version = field(default_factory=Version)
    owners: frozenset[str | None] = frozenset()
    """The tenants whose entries have vectors (None: global entries), whatever the entries' status."""
    expiring: bool = False
    """Some entry has an expiry: searches check it (the indexes are not rebuilt when a time passes)."""
    _masks: dict[str | None, np.ndarray] = field(default_factory=dict)
    _title_masks: dict[str | None, np.ndarray] = field(default_factory=dict)

    def where(self, tenant: str | None, kinds: Sequence[EntryKind] | None = None) -> dict[str, Any] | None:
        """Chroma's filter for a search by ``tenant``, or None when it would keep every vector anyway (the store
        holds only global entries and the tenant's own): Chroma filters by scanning, ~60 ms a query at 30,000
        passages, where the nearest neighbours alone take ~1.5 ms."""
        if not kinds and self.owners <= {None, tenant}:
            return None
        return _where(tenant, kinds)

    def visible(self, entry_id: str, tenant: str | None) -> bool:
        """Whether a search for ``tenant`` (None: global entries only) may see the entry."""
        entry = self.entries.get(entry_id)
        owner = entry.tenant if entry is not None else None
        return owner is None or owner == tenant

    def mask(self, tenant: str | None) -> np.ndarray:
        """1 for each passage a search for ``tenant`` may see, 0 for the others (made once per snapshot)."""
        if tenant not in self._masks:
            self._masks[tenant] = _visible_to(tenant, self.passage_tenants)
        return self._masks[tenant]

    def title_mask(self, tenant: str | None) -> np.ndarray:
        """``mask`` for the title index: 1 for each entry a search for ``tenant`` may see."""
        if tenant not in self._title_masks:
            self._title_masks[tenant] = _visible_to(tenant, self.title_tenants)
        return self._title_masks[tenant]


def _visible_to(tenant: str | None, owners: Sequence[str | None]) -> np.ndarray:
    return np.array([1.0 if owner is None or owner == tenant else 0.0 for owner in owners], dtype=np.float32)


_RECENT_VECTORS = 512  # about the messages in flight at once (VIGIL_INGEST__MAX_IN_FLIGHT)


def _unexpired(now: datetime) -> sa.ColumnElement[bool]:
    return sa.or_(ENTRY.c.expires_at.is_(None), ENTRY.c.expires_at > now)


def _expired(entry: _IndexedEntry, now: datetime) -> bool:
    return entry.expires_at is not None and entry.expires_at <= now


def _tenant_tag(tenant: str | None) -> str:
    return GLOBAL if tenant is None else tenant


def _where(tenant: str | None, kinds: Sequence[EntryKind] | None = None) -> dict[str, Any]:
    """The Chroma filter for a search for ``tenant``: global vectors and the tenant's own."""
    scope: dict[str, Any] = {"tenant": {"$in": [GLOBAL] if tenant is None else [GLOBAL, tenant]}}
    return {"$and": [scope, {"kind": {"$in": list(kinds)}}]} if kinds else scope


def _stored_question_ids(row: Any) -> list[str]:
    """The question vectors stored for an entry row: as recorded, or as numbered before they were recorded."""
    if row.question_vectors is not None:
        return list(row.question_vectors)
    return [_question_id(row.id, n) for n in range(len(row.questions))]


class KnowledgeStore:
    """Knowledge entries: import, search, FAQ matching, statistics and export."""

    def __init__(
        self,
        *,
        engine: AsyncEngine,
        embedder: Embedder,
        clock: Clock,
        chroma_path: Path,
        chroma_url: str | None = None,
        prefix: str = "vigil",
        timeout_s: float = 5.0,
        batch_wait_s: float = 0.003,
        batch_max: int = 32,
        embedding_workers: int = 1,
        ranking: RankingName = "adaptive",
        reranker: Reranker | None = None,
    ) -> None:
        self._engine = engine
        self._ranking: RankingName = ranking
        self._short, self._long = RECIPES[ranking]
        self._reranker = reranker
        self._batch_wait_s = batch_wait_s
        self._batch_max = batch_max
        self._embedding_workers = embedding_workers
        # Vector searches are batched too, per collection and filter; they leave as soon as Chroma is free (no
        # window: what gathers while it answers a batch is the next batch).
        self._nearest_batchers: dict[tuple[str, str, int], Batcher[Vectors, list[VectorHit]]] = {}
        self._vector_threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vigil-vectors")
        self._clock = clock
        self._chroma_path = chroma_path
        self._chroma_url = chroma_url
        self._prefix = prefix
        self._timeout_s = timeout_s
        self._client: Any = None
        self._snapshot = _Snapshot()
        self._lock = asyncio.Lock()
        self._model = self._serving(embedder)

    async def open(self) -> None:
        """Connect to Chroma, load the embedding model, and build the in-memory indexes from SQL.

        Raises:
            StartupError: the model cannot be loaded, or the Chroma URL is not one.
            KnowledgeUnavailable: Chroma or the database cannot be reached (retry).
            KnowledgeError: Chroma or the database refused a request.
        """
        self._client = await asyncio.to_thread(connect, path=self._chroma_path, url=self._chroma_url)
        self._nearest_batchers.clear()
        model = self._model
        if self._chroma_url is None:  # embedded: this process's alone, so other models' collections are stale
            await self._drop_collections(keep=model_collections(self._prefix, model.embedder.name))
        model.collections = await self._collections_for(model.embedder)
        await asyncio.to_thread(model.embedder.load)
        await self.refresh()

    def _serving(self, embedder: Embedder) -> _Model:
        async def embed_many(texts: Sequence[str]) -> Vectors:
            return await asyncio.to_thread(embedder.embed, list(texts))

        return _Model(
            embedder,
            MicroBatcher(
                embedder, wait_s=self._batch_wait_s, max_batch=self._batch_max, workers=self._embedding_workers
            ),
            VerdictMemory(
                connect=lambda begin: self._database(begin=begin),
                embed_many=embed_many,
                embedder=embedder.name,
                clock=self._clock,
            ),
        )

    async def _collections_for(self, embedder: Embedder) -> _Collections:
        passages, questions = model_collections(self._prefix, embedder.name)
        return _Collections(
            passages=await asyncio.to_thread(VectorCollection, self._client, passages),
            questions=await asyncio.to_thread(VectorCollection, self._client, questions),
        )

    async def _drop_collections(self, *, keep: Sequence[str] = ()) -> None:
        """Drop this store's collections (its prefix's) other than ``keep``."""
        for name in await asyncio.to_thread(collection_names, self._client):
            if name not in keep and name.startswith((f"{self._prefix}-passages", f"{self._prefix}-questions")):
                await asyncio.to_thread(drop_collection, self._client, name)

    async def use_model(self, embedder: Embedder) -> bool:
        """Serve ``embedder`` from now on (a tuned model, or the shipped one again); False when it already serves.

        The store goes on searching with the old model while the new one's collections are filled from SQL (every
        served entry's passages and questions, embedded anew), then switches both in one step: a query is always
        embedded by the model whose vectors it is compared with. Writes wait meanwhile (they hold the store's lock).
        Embedded Chroma's collections of the new model are made afresh (an old set would miss what changed since it
        was last served); a Chroma server's are completed, not remade (another replica may be serving them).

        Raises:
            StartupError: the model cannot be loaded, or the store is not open.
            KnowledgeUnavailable: Chroma or the database cannot be reached (retry).
        """
        if embedder.name == self._model.embedder.name:
            return False
        self._open()
        await asyncio.to_thread(embedder.load)
        new = self._serving(embedder)
        async with self._lock:
            if self._chroma_url is None:
                await self._drop_collections(keep=model_collections(self._prefix, self._model.embedder.name))
            new.collections = await self._collections_for(embedder)
            await self._repair(new)
            await new.verdicts.refresh()
            old, self._model = self._model, new
        log.info("knowledge searches now embed with %s (was %s)", embedder.name, old.embedder.name)
        return True

    async def close(self) -> None:
        """Let go of Chroma: embedded, its files are closed, so the folder may be deleted and opened afresh by this
        process (Chroma keeps one client per folder and process until the last one closes)."""
        client, self._client, self._model.collections = self._client, None, None
        self._nearest_batchers.clear()
        if client is not None:
            await asyncio.to_thread(client.close)

    def _open(self, model: _Model | None = None) -> _Collections:
        collections = (model or self._model).collections
        if collections is None:
            raise StartupError("the knowledge store is not open (call open() first)")
        return collections

    async def check(self) -> None:
        """Check that the knowledge database and Chroma answer, within the timeout (the ``knowledge`` check of
        ``/readyz``). Before ``open`` there is nothing to check: the daemon's phase says it is loading.

        Raises:
            KnowledgeUnavailable: either cannot be reached, or embedded Chroma's folder is gone.
        """
        collections = self._model.collections
        if collections is None:
            return
        if self._chroma_url is None and not self._chroma_path.is_dir():
            raise KnowledgeUnavailable(f"Chroma's folder {self._chroma_path} is gone")
        await self._version()
        for collection in (collections.passages, collections.questions):
            await self._bounded(collection.count)

    def _database(
        self, *, begin: bool = False, bounded: bool = False
    ) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        """A connection (in a transaction with ``begin``, within the timeout with ``bounded``); database errors come
        out as ``KnowledgeUnavailable`` or ``KnowledgeError``."""
        return guarded(
            self._engine,
            timeout_s=self._timeout_s if bounded else None,
            begin=begin,
            unavailable=KnowledgeUnavailable,
            refused=KnowledgeError,
            what="the knowledge database",
        )

    async def _nearest(
        self, collection: VectorCollection, vector: Vectors, k: int, where: Mapping[str, Any] | None
    ) -> list[VectorHit]:
        """The ``k`` nearest vectors of ``collection`` to ``vector`` within ``where``, searched together with the
        concurrent searches of the same collection and filter, waited for at most the timeout."""
        key = (collection.name, json.dumps(where, sort_keys=True), k)
        batcher = self._nearest_batchers.get(key)
        if batcher is None:

            def search(vectors: list[Vectors]) -> list[list[VectorHit]]:
                return collection.query(np.stack(vectors), k, where)

            batcher = self._nearest_batchers[key] = Batcher(
                search, wait_s=0.0, max_batch=max(self._batch_max, 1), executor=self._vector_threads
            )
        try:
            async with asyncio.timeout(self._timeout_s):
                return await batcher.submit(vector)
        except TimeoutError as exc:
            raise KnowledgeUnavailable(f"Chroma did not answer within {self._timeout_s} s") from exc

    async def _bounded(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` on Chroma in a thread, waited for at most the timeout."""
        try:
            async with asyncio.timeout(self._timeout_s):
                return await asyncio.to_thread(call, *args)
        except TimeoutError as exc:
            raise KnowledgeUnavailable(f"Chroma did not answer within {self._timeout_s} s") from exc

    async def import_files(self, paths: Sequence[Path], *, prune: bool = False) -> ImportReport:
        """Read every knowledge file under ``paths`` (all of them before changing anything) and upsert them.

        With ``prune``, entries that came from these files but are no longer in them are removed.

        Raises:
            KnowledgeFileError: a file cannot be read; nothing is imported.
        """
        files = discover(paths)
        entries = [entry for path in files for entry in read(path)]
        return await self.upsert(entries, prune_origins=[str(f) for f in files] if prune else ())

    async def upsert(
        self,
        entries: Sequence[Entry],
        *,
        prune_origins: Iterable[str] = (),
        governance: Mapping[str, Governance] | None = None,
        also: Callable[[AsyncConnection], Awaitable[None]] | None = None,
        embedded: Mapping[str, Vectors] | None = None,
    ) -> ImportReport:
        """Add new entries, update changed ones (by content digest), and remove entries whose origin is one of
        ``prune_origins`` but that are not in ``entries`` (a source file that no longer holds them).

        Args:
            governance: by entry id, the status, confidence and provenance to store (written even when the content
                is unchanged); an entry not named keeps what it has (a new one: active, 1.0, its origin).
            also: more writes to make in the same SQL transaction as the entries' (the miner's record of what it
                mined): all of them happen, or none.
            embedded: vectors the caller already has, by the text they are of (this store's model): those texts
                are not embedded again.
        """
        by_id = {e.id: e for e in entries}
        if len(by_id) != len(entries):
            seen: set[str] = set()
            twice = next(e.id for e in entries if e.id in seen or seen.add(e.id))  # type: ignore[func-returns-value]
            raise ValueError(f"entry id {twice!r} appears twice")
        governed = dict(governance or {})
        async with self._lock:
            stored = await self._digests()
            _refuse_takeovers(entries, stored)
            changed = [e for e in entries if e.id not in stored or stored[e.id].digest != e.digest]
            origins = set(prune_origins)
            gone = [i for i, held in stored.items() if held.origin in origins and i not in by_id]
            await self._index_vectors(
                changed, stale=[i for i in gone] + [e.id for e in changed if e.id in stored], embedded=embedded
            )
            await self._write_rows(changed, gone, governed, also)
            await self._rebuild()
        added = sum(1 for e in changed if e.id not in stored)
        return ImportReport(
            added=added, updated=len(changed) - added, unchanged=len(entries) - len(changed), removed=len(gone)
        )

    async def govern(self, entry_id: str, *, status: EntryStatus) -> bool:
        """Set an entry's status (a lead approves or retires it); False when there is no such entry. Other
        processes see it at their next refresh (the change moves the store's version)."""
        async with self._lock:
            async with self._database(begin=True) as conn:
                provenance = await conn.scalar(sa.select(ENTRY.c.provenance).where(ENTRY.c.id == entry_id))
                result = await conn.execute(
                    sa.update(ENTRY)
                    .where(ENTRY.c.id == entry_id)
                    .values(
                        status=status,
                        # A person's decision, not the miner's grouping, governs it from now on.
                        provenance={k: v for k, v in (provenance or {}).items() if k != SUPERSEDED_BY},
                        updated_at=self._clock.now(),
                    )
                )
            if not result.rowcount:
                return False
            if self._model.collections is not None:  # an open store serves searches: it sees the change at once
                await self._rebuild()
        return True

    async def governed(
        self,
        *,
        status: EntryStatus | None = None,
        kinds: Sequence[EntryKind] = (),
        ids: Sequence[str] = (),
        origin: str | None = None,
        tenants: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Entries with their status, confidence and provenance, newest change first: what a lead reviews.

        Args:
            status, kinds, ids, origin: only the entries of this status, these kinds, these ids, this origin.
            tenants: only the entries these tenants see (theirs and the global ones); None for every entry.
            limit: at most this many (the newest changes).
        """
        query = sa.select(
            ENTRY.c.id,
            ENTRY.c.kind,
            ENTRY.c.title,
            ENTRY.c.body,
            ENTRY.c.origin,
            ENTRY.c.url,
            ENTRY.c.tenant,
            ENTRY.c.status,
            ENTRY.c.confidence,
            ENTRY.c.provenance,
            ENTRY.c.questions,
            ENTRY.c.expires_at,
            ENTRY.c.created_at,
            ENTRY.c.updated_at,
        ).where(visible_to(tenants))
        if status is not None:
            query = query.where(ENTRY.c.status == status)
        if kinds:
            query = query.where(ENTRY.c.kind.in_(list(kinds)))
        if ids:
            query = query.where(ENTRY.c.id.in_(list(ids)))
        if origin is not None:
            query = query.where(ENTRY.c.origin == origin)
        query = query.order_by(ENTRY.c.updated_at.desc(), ENTRY.c.id).limit(limit)
        async with self._database() as conn:
            rows = (await conn.execute(query)).all()
        return [dict(row._mapping) for row in rows]

    async def embed_many(self, texts: Sequence[str], *, parallel: int = 1) -> Vectors:
        """Vectors for many texts at once, off the event loop (the miner's problems and resolutions), in
        ``parallel`` calls to the model at once (each on a core of its own: 1.8 times as fast on two cores as one
        call, where a second thread inside one call spins more than it gains; docs/benchmarks.md)."""
        if parallel <= 1 or len(texts) < 2 * parallel:
            return await asyncio.to_thread(self._model.embedder.embed, list(texts))
        shares = [list(texts[n::parallel]) for n in range(parallel)]
        embedder = self._model.embedder
        parts = await asyncio.gather(*(asyncio.to_thread(embedder.embed, share) for share in shares))
        out = np.empty((len(texts), parts[0].shape[1]), dtype=np.float32)
        for n, part in enumerate(parts):
            out[n::parallel] = part
        return out

    async def remove(self, entry_ids: Sequence[str]) -> int:
        """Remove entries by id; returns how many existed."""
        async with self._lock:
            stored = await self._digests()
            gone = [i for i in entry_ids if i in stored]
            await self._index_vectors([], stale=gone)
            await self._write_rows([], gone)
            await self._rebuild()
        return len(gone)

    async def served(self) -> list[Entry]:
        """Every entry searches serve now (active, trusted, unexpired), with its passages: what tuning learns from."""
        async with self._database() as conn:
            ids = (await conn.execute(sa.select(ENTRY.c.id).where(_SERVED, _unexpired(self._clock.now())))).scalars()
            wanted = sorted(ids)
        return await self._entries(wanted) if wanted else []

    async def _digests(self) -> dict[str, _StoredEntry]:
        """Each stored entry's digest, origin and tenant, by id."""
        async with self._database() as conn:
            rows = await conn.execute(sa.select(ENTRY.c.id, ENTRY.c.digest, ENTRY.c.origin, ENTRY.c.tenant))
            return {row.id: _StoredEntry(row.digest, row.origin, row.tenant) for row in rows}

    async def _index_vectors(
        self,
        changed: Sequence[Entry],
        *,
        stale: Sequence[str],
        embedded: Mapping[str, Vectors] | None = None,
        model: _Model | None = None,
    ) -> None:
        """Embed the changed entries' passages and FAQ questions; drop the vectors of stale entries first (exactly
        the ones SQL records for them, however many alternates they had). ``model``: the serving one by default."""
        model = model or self._model
        collections = self._open(model)
        if stale:
            async with self._database() as conn:
                old = await _vector_ids(conn, stale)
            await asyncio.to_thread(collections.passages.delete, old.passages)
            await asyncio.to_thread(collections.questions.delete, old.questions)
        passages = [(e, p) for e in changed for p in e.passages]
        if passages:
            vectors = await self._vectors([p.text for _, p in passages], embedded or {}, model.embedder)
            await asyncio.to_thread(
                collections.passages.upsert,
                [p.id for _, p in passages],
                vectors,
                [
                    {"entry_id": e.id, "kind": e.kind, "tenant": _tenant_tag(e.tenant), "digest": e.digest}
                    for e, _ in passages
                ],
            )
        questions = [(e, n, q) for e in changed for n, q in enumerate(e.questions)]
        if questions:
            vectors = await self._vectors([q for _, _, q in questions], embedded or {}, model.embedder)
            await asyncio.to_thread(
                collections.questions.upsert,
                [_question_id(e.id, n) for e, n, _ in questions],
                vectors,
                [{"entry_id": e.id, "tenant": _tenant_tag(e.tenant), "digest": e.digest} for e, _, _ in questions],
            )

    async def _vectors(self, texts: list[str], known: Mapping[str, Vectors], embedder: Embedder) -> Vectors:
        """The vectors of ``texts``: those in ``known`` as they are, the rest embedded (in one call)."""
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        found = dict(zip(missing, await asyncio.to_thread(embedder.embed, missing), strict=True)) if missing else {}
        return np.stack([np.asarray(known[t] if t in known else found[t], dtype=np.float32) for t in texts])

    async def _write_rows(
        self,
        changed: Sequence[Entry],
        gone: Sequence[str],
        governance: Mapping[str, Governance] | None = None,
        also: Callable[[AsyncConnection], Awaitable[None]] | None = None,
    ) -> None:
        now = self._clock.now()
        ids = [e.id for e in changed] + list(gone)
        governance = governance or {}
        async with self._database(begin=True) as conn:
            await self._write_entries(conn, changed, gone, ids, now)
            for entry_id, said in governance.items():
                await conn.execute(
                    sa.update(ENTRY)
                    .where(ENTRY.c.id == entry_id)
                    .values(
                        status=said.status,
                        confidence=said.confidence,
                        provenance=dict(said.provenance),
                        expires_at=said.expires_at,
                        updated_at=now,
                    )
                )
            if also is not None:
                await also(conn)

    async def _write_entries(
        self, conn: AsyncConnection, changed: Sequence[Entry], gone: Sequence[str], ids: list[str], now: Any
    ) -> None:
        """The entries' rows and passages: the changed ones written, the gone ones deleted."""
        if ids:
            await conn.execute(sa.delete(PASSAGE).where(PASSAGE.c.entry_id.in_(ids)))
        if gone:
            await conn.execute(sa.delete(ENTRY).where(ENTRY.c.id.in_(list(gone))))
        if changed:
            stmt = upsert(conn, ENTRY)
            stmt = stmt.on_conflict_do_update(
                index_elements=[ENTRY.c.id],
                set_={
                    c: stmt.excluded[c]
                    for c in (
                        "kind",
                        "title",
                        "body",
                        "origin",
                        "tags",
                        "url",
                        "product",
                        "questions",
                        "question_vectors",
                        "tenant",
                        "expires_at",
                        "digest",
                        "updated_at",
                    )
                },
            )
            await conn.execute(stmt, [_entry_row(e, now) for e in changed])
            rows = [_passage_row(e.id, n, p) for e in changed for n, p in enumerate(e.passages)]
            if rows:
                await conn.execute(sa.insert(PASSAGE), rows)

    async def refresh(self) -> None:
        """Rebuild the in-memory indexes from SQL, and repair vectors that are missing or left over."""
        async with self._lock:
            await self._repair()
            await self._rebuild()
            await self._model.verdicts.refresh()

    async def refresh_if_changed(self) -> bool:
        """Refresh when another process changed the knowledge, and learn the analysts' verdicts received since the
        last time (cheap to call every few seconds)."""
        if await self._version() == self._snapshot.version:
            async with self._lock:
                return await self._model.verdicts.refresh()
        await self.refresh()
        return True

    async def _version(self) -> Version:
        async with self._database(bounded=True) as conn:
            row = (await conn.execute(sa.select(sa.func.count(), sa.func.max(ENTRY.c.updated_at)))).one()
        return Version(int(row[0]), str(row[1] or ""))

    async def _repair(self, model: _Model | None = None) -> None:
        """Make both vector collections (``model``'s: the serving one's by default) hold exactly what SQL records:
        strays removed; entries with a vector missing, tagged with another tenant (or none, as before tenants), or
        made from other content (its digest; a vector from before digests were recorded passes), embedded again.

        The digest matters where two models' collections are both written (a Chroma server, replicas switching):
        an entry changed by a process on one model is re-embedded in the other's at its next refresh."""
        model = model or self._model
        collections = self._open(model)
        async with self._database() as conn:
            passage_rows = (
                await conn.execute(
                    sa.select(PASSAGE.c.id, PASSAGE.c.entry_id, ENTRY.c.tenant, ENTRY.c.digest).join(
                        ENTRY, ENTRY.c.id == PASSAGE.c.entry_id
                    )
                )
            ).all()
            entry_rows = (
                await conn.execute(
                    sa.select(ENTRY.c.id, ENTRY.c.questions, ENTRY.c.question_vectors, ENTRY.c.tenant, ENTRY.c.digest)
                )
            ).all()
        passages = {row.id: _Owner(row.entry_id, _tenant_tag(row.tenant), row.digest) for row in passage_rows}
        questions = {
            q: _Owner(row.id, _tenant_tag(row.tenant), row.digest)
            for row in entry_rows
            for q in _stored_question_ids(row)
        }
        missing: set[str] = set()
        for collection, wanted in ((collections.passages, passages), (collections.questions, questions)):
            present = await asyncio.to_thread(collection.metadatas)
            extra = sorted(present.keys() - wanted.keys())
            if extra:
                log.warning("removing %d knowledge vectors that no entry holds", len(extra))
                await asyncio.to_thread(collection.delete, extra)
            missing |= {
                owner.entry_id
                for item, owner in wanted.items()
                if item not in present
                or present[item].get("tenant") != owner.tag
                or present[item].get("digest", owner.digest) != owner.digest
            }
        if missing:
            log.warning("re-embedding %d knowledge entries whose vectors were missing or out of date", len(missing))
            entries = await self._entries(sorted(missing))
            await self._index_vectors(entries, stale=[], model=model)

    async def _entries(self, entry_ids: Sequence[str], *, bounded: bool = False) -> list[Entry]:
        async with self._database(bounded=bounded) as conn:
            heads = (await conn.execute(sa.select(ENTRY).where(ENTRY.c.id.in_(list(entry_ids))))).all()
            parts = (
                await conn.execute(
                    sa.select(PASSAGE)
                    .where(PASSAGE.c.entry_id.in_(list(entry_ids)))
                    .order_by(PASSAGE.c.entry_id, PASSAGE.c.position)
                )
            ).all()
        by_entry: dict[str, list[Passage]] = defaultdict(list)
        for p in parts:
            by_entry[p.entry_id].append(Passage(id=p.id, heading=p.heading, text=p.text))
        return [_entry(h, tuple(by_entry[h.id])) for h in heads]

    async def _rebuild(self) -> None:
        async with self._database() as conn:
            rows = (
                await conn.execute(
                    sa.select(PASSAGE.c.id, PASSAGE.c.entry_id, PASSAGE.c.text, ENTRY.c.tenant)
                    .join(ENTRY, ENTRY.c.id == PASSAGE.c.entry_id)
                    .where(_SERVED, _unexpired(self._clock.now()))
                    .order_by(PASSAGE.c.id)
                )
            ).all()
            heads = (
                await conn.execute(
                    sa.select(
                        ENTRY.c.id,
                        ENTRY.c.kind,
                        ENTRY.c.title,
                        ENTRY.c.url,
                        ENTRY.c.body,
                        ENTRY.c.tenant,
                        ENTRY.c.questions,
                        ENTRY.c.question_vectors,
                        ENTRY.c.expires_at,
                    ).where(_SERVED, _unexpired(self._clock.now()))
                )
            ).all()
            owners = frozenset((await conn.execute(sa.select(ENTRY.c.tenant).distinct())).scalars())
        version = await self._version()
        lexical = await asyncio.to_thread(LexicalIndex, [r.id for r in rows], [r.text for r in rows])
        # The titles' own BM25 index only for a recipe that weighs titles: the default one never reads it.
        titled = [h for h in heads if max(self._short.title_weight, self._long.title_weight) > 0]
        titles = await asyncio.to_thread(LexicalIndex, [h.id for h in titled], [h.title for h in titled])
        self._snapshot = _Snapshot(
            lexical=lexical,
            passages={r.id: _IndexedPassage(r.entry_id, r.text) for r in rows},
            entries={
                h.id: _IndexedEntry(h.kind, h.title, h.url, h.body, h.tenant, tuple(h.questions or ()), h.expires_at)
                for h in heads
            },
            passage_tenants=[r.tenant for r in rows],
            question_entries={q: h.id for h in heads for q in _stored_question_ids(h)},
            first_passages=_first_passages(rows),
            sections=_sections(rows),
            titles=titles,
            title_tenants=[h.tenant for h in titled],
            version=version,
            owners=owners,
            expiring=any(h.expires_at is not None for h in heads),
        )

    @property
    def ranking(self) -> RankingName:
        """How search fuses passages (``VIGIL_KNOWLEDGE__RANKING``): the answer skill's confidence model is fitted
        for each."""
        return self._ranking

    def _recipe_for(self, query: str) -> Recipe:
        """The fusion for ``query``: the long-message recipe from ``LONG`` sentences on (only counted when the two
        differ)."""
        if self._long is self._short or len(sentences(query)) < LONG:
            return self._short
        return self._long

    @property
    def reranked(self) -> bool:
        """Whether the learned re-ranker orders the fusion's first candidates (``VIGIL_KNOWLEDGE__RERANKER``)."""
        return self._reranker is not None

    @property
    def engine(self) -> AsyncEngine:
        """The database the entries are in (the miner writes its records in the same transactions)."""
        return self._engine

    @property
    def embedder_name(self) -> str:
        """The embedding model's name: vectors of two models are not comparable."""
        return self._model.embedder.name

    async def embed(self, text: str) -> Vectors:
        """The query vector for ``text`` (embed once, then search and match with it), embedded together with the
        questions of concurrent conversations (``vigil.knowledge.batching``). The last few texts' vectors are kept:
        the answers' gate embeds a message the question rules reject, and the answer skill then searches with it."""
        return await self._embed(self._model, text)

    async def _embed(self, model: _Model, text: str) -> Vectors:
        vector = model.recent.get(text)
        if vector is None:
            vector = await model.queries.embed(text)
            model.recent[text] = vector
            if len(model.recent) > _RECENT_VECTORS:
                model.recent.popitem(last=False)
        else:
            model.recent.move_to_end(text)
        return vector

    async def search(
        self,
        query: str,
        k: int = 5,
        *,
        kinds: Sequence[EntryKind] | None = None,
        vector: Vectors | None = None,
        tenant: str | None = None,
    ) -> list[Hit]:
        """The ``k`` best entries for ``query``, one hit per entry, as ``ranking.py`` ranks them: passages by dense
        similarity and by BM25 and FAQs by their nearest question, fused; an FAQ asked nearly word for word first; then
        the first few compared word by word. The answer skill answers from the first hit, so what `vigil kb search`
        lists first is what it answers from.

        Only global entries and those of ``tenant`` are searched (None: global entries only).
        """
        snapshot, model = self._snapshot, self._model
        recipe = self._recipe_for(query)
        vector = await self._query_vector(model, query, vector)
        collections = self._open(model)
        # Both collections at once (each search joins its collection's batch), and BM25 meanwhile.
        nearest = [
            asyncio.ensure_future(
                self._nearest(collections.passages, vector, CANDIDATES, snapshot.where(tenant, kinds))
            )
        ]
        if not kinds or "faq" in kinds:
            nearest.append(
                asyncio.ensure_future(self._nearest(collections.questions, vector, CANDIDATES, snapshot.where(tenant)))
            )
        try:
            lexical = snapshot.lexical.search(query, CANDIDATES, only=snapshot.mask(tenant))
            found = await asyncio.gather(*nearest)
        finally:
            for search in nearest:
                search.cancel()  # nothing, once done; one left running if the other or BM25 failed
        dense, questions = found[0], (found[1] if len(found) > 1 else [])
        whole = Rankings([h.id for h in dense], [h.passage_id for h in lexical])
        parts = await self._sentence_rankings(model, snapshot, query, whole, kinds, tenant, recipe)
        titles: list[str] = []
        if recipe.title_weight > 0:
            titles = [h.passage_id for h in snapshot.titles.search(query, CANDIDATES, only=snapshot.title_mask(tenant))]
        scores = _Scores(
            passages=passage_scores(whole, parts, recipe),
            dense={h.id: h.similarity for h in dense},
            bm25={h.passage_id: h.score for h in lexical},
        )
        # With verdicts to weigh, the shortlist whole: one the analysts dismissed may fall below the fifth.
        judged = model.verdicts.holds(tenant)
        shown = max(k, ranking.RERANK) if judged else k
        if self._reranker is not None:
            shown = max(shown, SHORTLIST)
        hits = _fuse(snapshot, query, scores, questions, shown, kinds, tenant, recipe=recipe, titles=titles)
        if self._reranker is not None:
            hits = [replace(hits[i], score=p) for i, p in self._reranker.order(query, hits)]
        if judged:
            hits = _judged(hits, model.verdicts.terms(tenant, query, vector, [h.entry_id for h in hits]))
        if snapshot.expiring:  # an entry that expired since the indexes were built is not served
            now = self._clock.now()
            hits = [h for h in hits if not _expired(snapshot.entries[h.entry_id], now)]
        return hits[:k]

    async def _query_vector(self, model: _Model, query: str, vector: Vectors | None) -> Vectors:
        """``vector`` if ``model`` made it, else the query embedded by ``model``: a vector handed in from before a
        switch of models is not compared with the new model's vectors."""
        if vector is not None and model.made(vector):
            return vector
        return await self._embed(model, query)

    async def _sentence_rankings(
        self,
        model: _Model,
        snapshot: _Snapshot,
        query: str,
        whole: Rankings,
        kinds: Sequence[EntryKind] | None,
        tenant: str | None,
        recipe: Recipe,
    ) -> list[Rankings]:
        """Each sentence's dense and BM25 rankings, when the recipe weighs sentences (none otherwise). A query that
        is one sentence is its own: its rankings are the whole query's, not searched again."""
        if recipe.sentence_weight <= 0:
            return []
        split = sentences(query)
        if len(split) == 1 and split[0] == " ".join(query.split()):
            return [whole]
        vectors = await asyncio.gather(*(self._embed(model, sentence) for sentence in split))
        passages = self._open(model).passages
        found = await asyncio.gather(
            *(self._nearest(passages, v, CANDIDATES, snapshot.where(tenant, kinds)) for v in vectors)
        )
        mask = snapshot.mask(tenant)
        return [
            Rankings(
                [h.id for h in hits], [h.passage_id for h in snapshot.lexical.search(sentence, CANDIDATES, only=mask)]
            )
            for sentence, hits in zip(split, found, strict=True)
        ]

    async def match_faq(
        self, query: str, *, vector: Vectors | None = None, tenant: str | None = None
    ) -> FaqMatch | None:
        """The FAQ nearest to ``query`` by its questions and alternates, or None when there are no FAQs; only
        global FAQs and those of ``tenant`` are compared (None: global ones only).

        A look-up by question vectors alone, not a ranking: what to answer from is ``search``'s first hit, which
        weighs these same question vectors with the passages and the words."""
        snapshot, model = self._snapshot, self._model
        vector = await self._query_vector(model, query, vector)
        near = await self._nearest(self._open(model).questions, vector, 12, snapshot.where(tenant))
        best: dict[str, VectorHit] = {}
        for hit in near:
            entry_id = snapshot.question_entries.get(hit.id, "")
            if not (entry_id in snapshot.entries and snapshot.visible(entry_id, tenant)):
                continue
            if entry_id not in best or hit.similarity > best[entry_id].similarity:
                best[entry_id] = hit
        if not best:
            return None
        ranked = sorted(best.items(), key=lambda item: -item[1].similarity)
        entry_id, top = ranked[0]
        runner_up = ranked[1][1].similarity if len(ranked) > 1 else 0.0
        faq = snapshot.entries[entry_id]
        return FaqMatch(
            entry_id=entry_id,
            question=faq.title,
            answer=faq.body,
            similarity=top.similarity,
            margin=top.similarity - runner_up,
        )

    def passages(self, entry_id: str) -> list[tuple[str, str]]:
        """The served entry's passages as searches see them, (id, text) in order, from memory: what the answer skill
        reads for every answer, so it never waits for the database (``entry`` reads it). Empty for an entry that is
        not served (removed, retired, or not yet refreshed)."""
        snapshot = self._snapshot
        return [(p, snapshot.passages[p].text) for p in snapshot.sections.get(entry_id, ()) if p in snapshot.passages]

    async def entry(self, entry_id: str) -> Entry | None:
        """One entry with its passages (what a suggestion's source links to), or None."""
        found = await self._entries([entry_id], bounded=True)
        return found[0] if found else None

    async def stats(self, tenants: Sequence[str] | None = None) -> dict[str, int]:
        """How many entries of each kind, and passages in all: every entry, or (with ``tenants``) the ones those
        tenants see, global entries included."""
        scope = visible_to(tenants)
        async with self._database() as conn:
            kinds = (
                await conn.execute(sa.select(ENTRY.c.kind, sa.func.count()).where(scope).group_by(ENTRY.c.kind))
            ).all()
            passages = await conn.scalar(
                sa.select(sa.func.count())
                .select_from(PASSAGE.join(ENTRY, ENTRY.c.id == PASSAGE.c.entry_id))
                .where(scope)
            )
        return {**{kind: int(count) for kind, count in kinds}, "passages": int(passages or 0)}

    async def export(self) -> list[dict[str, Any]]:
        """Every entry, as plain JSON-ready dicts, in id order."""
        async with self._database() as conn:
            rows = (await conn.execute(sa.select(ENTRY).order_by(ENTRY.c.id))).all()
        return [{k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in row._mapping.items()} for row in rows]


def visible_to(tenants: Sequence[str] | None) -> sa.ColumnElement[bool]:
    """The SQL condition for the entries ``tenants`` see: global ones and their own (None: every entry)."""
    if tenants is None:
        return sa.true()
    return sa.or_(ENTRY.c.tenant.is_(None), ENTRY.c.tenant.in_(list(tenants)))


async def _vector_ids(conn: AsyncConnection, entry_ids: Sequence[str]) -> _VectorIds:
    """The passage and question vector ids SQL records for these entries."""
    passages = await conn.execute(sa.select(PASSAGE.c.id).where(PASSAGE.c.entry_id.in_(list(entry_ids))))
    heads = await conn.execute(
        sa.select(ENTRY.c.id, ENTRY.c.questions, ENTRY.c.question_vectors).where(ENTRY.c.id.in_(list(entry_ids)))
    )
    return _VectorIds(
        passages=[row.id for row in passages], questions=[q for row in heads for q in _stored_question_ids(row)]
    )


def _question_id(entry_id: str, number: int) -> str:
    return f"{entry_id}?{number}"


@dataclass(frozen=True, slots=True)
class _Scores:
    """A query's passages: fused (``fusion.passage_scores``), and the whole query's cosine and BM25 of each."""

    passages: dict[str, float]
    dense: dict[str, float]
    bm25: dict[str, float]


def _fuse(
    snapshot: _Snapshot,
    query: str,
    scores: _Scores,
    questions: Sequence[VectorHit],
    k: int,
    kinds: Sequence[EntryKind] | None,
    tenant: str | None,
    *,
    recipe: Recipe,
    titles: Sequence[str],
) -> list[Hit]:
    """The fused passages folded into entries with the title ranking (``fusion.entry_scores``) and the FAQs'
    nearest questions (``ranking.rrf_share``), an FAQ asked nearly word for word put first
    (``ranking.question_first``), the first ``RERANK`` entries compared word by word (``ranking.rerank``), and the
    ``k`` best as hits, each with its best passage."""

    def entry_of(passage_id: str) -> str | None:
        passage = snapshot.passages.get(passage_id)  # None: removed since the vector index was queried
        return passage.entry_id if passage is not None else None

    best: dict[str, str] = {}  # entry -> its best passage
    order: dict[str, int] = {}  # entry -> where its best passage ranks: ties between entries go to the better one
    for passage_id, _ in sorted(scores.passages.items(), key=lambda item: -item[1]):
        entry_id = entry_of(passage_id)
        if entry_id is not None and entry_id not in best:
            best[entry_id] = passage_id
            order[entry_id] = len(order)
    fused = dict(entry_scores(scores.passages, entry_of, recipe, titles=titles))
    nearest: dict[str, float] = {}  # FAQ -> similarity of its nearest question, nearest first
    for hit in questions:
        entry_id = snapshot.question_entries.get(hit.id, "")
        if entry_id not in nearest:
            nearest[entry_id] = hit.similarity
    for rank, entry_id in enumerate(nearest):
        fused[entry_id] = fused.get(entry_id, 0.0) + rrf_share(rank, ranking.QUESTION_WEIGHT)
    candidates: list[Candidate] = []
    for entry_id, score in fused.items():
        entry = snapshot.entries.get(entry_id)
        chosen = best.get(entry_id) or snapshot.first_passages.get(entry_id)
        if entry is None or chosen is None or (kinds and entry.kind not in kinds):
            continue
        if not snapshot.visible(entry_id, tenant):
            continue
        best[entry_id] = chosen
        order.setdefault(entry_id, len(order))  # an FAQ found by its questions alone, in their order
        text = "\n".join((entry.title, *entry.questions[1:], snapshot.passages[chosen].text))
        candidates.append(Candidate(entry_id, score, text))
    dense_rank, lexical_rank = _ranks(scores.dense, entry_of), _ranks(scores.bm25, entry_of)
    first = ranking.question_first({e: s for e, s in nearest.items() if e in snapshot.entries})
    shortlist = sorted(candidates, key=lambda c: (c.entry_id != first, -c.fused, order[c.entry_id]))
    shortlist = shortlist[: max(k, ranking.RERANK)]
    hits: list[Hit] = []
    for ranked in rerank(query, shortlist, first=first)[:k]:
        entry = snapshot.entries[ranked.entry_id]
        passage_id = best[ranked.entry_id]
        hits.append(
            Hit(
                entry_id=ranked.entry_id,
                kind=entry.kind,
                title=entry.title,
                url=entry.url,
                passage_id=passage_id,
                passage=snapshot.passages[passage_id].text,
                score=ranked.score,
                dense=scores.dense.get(passage_id, 0.0),
                lexical=scores.bm25.get(passage_id, 0.0),
                question=nearest.get(ranked.entry_id, 0.0),
                agreement=ranked.agreement,
                dense_rank=dense_rank.get(ranked.entry_id),
                lexical_rank=lexical_rank.get(ranked.entry_id),
            )
        )
    return hits


def _ranks(scores: Mapping[str, float], entry_of: Callable[[str], str | None]) -> dict[str, int]:
    """Each entry's place when entries are ranked by the best of their passages' ``scores`` alone."""
    ranks: dict[str, int] = {}
    for passage_id, _ in sorted(scores.items(), key=lambda item: -item[1]):
        entry_id = entry_of(passage_id)
        if entry_id is not None and entry_id not in ranks:
            ranks[entry_id] = len(ranks)
    return ranks


def _judged(hits: Sequence[Hit], terms: Mapping[str, float]) -> list[Hit]:
    """``hits`` with each one's verdict term (``verdicts.term``) on it and its score moved by ``MOVE`` times it, in
    the order of the moved scores (unmoved hits keep their order)."""
    if not terms:
        return list(hits)
    moved = [
        replace(h, score=h.score + MOVE * terms[h.entry_id], verdict=terms[h.entry_id]) if h.entry_id in terms else h
        for h in hits
    ]
    return sorted(moved, key=lambda h: -h.score)


def _sections(rows: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Each entry's passage ids, in id order, from the passage rows."""
    found: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        found[row.entry_id].append(row.id)
    return {entry_id: tuple(sorted(ids)) for entry_id, ids in found.items()}


def _first_passages(rows: Sequence[Any]) -> dict[str, str]:
    """Each entry's first passage (by id), from the passage rows."""
    first: dict[str, str] = {}
    for row in rows:
        if row.entry_id not in first or row.id < first[row.entry_id]:
            first[row.entry_id] = row.id
    return first


def _entry_row(e: Entry, now: Any) -> dict[str, Any]:
    return {
        "id": e.id,
        "kind": e.kind,
        "title": e.title,
        "body": e.body,
        "origin": e.origin,
        "tags": list(e.tags),
        "url": e.url,
        "product": e.product,
        "questions": list(e.questions),
        "question_vectors": [_question_id(e.id, n) for n in range(len(e.questions))],
        "tenant": e.tenant,
        "expires_at": e.expires_at,
        "digest": e.digest,
        "status": "active",
        "confidence": 1.0,
        "provenance": {"origin": e.origin},
        "created_at": now,
        "updated_at": now,
    }


def _passage_row(entry_id: str, position: int, p: Passage) -> dict[str, Any]:
    return {"id": p.id, "entry_id": entry_id, "position": position, "heading": p.heading, "text": p.text}


def _entry(row: Any, passages: tuple[Passage, ...]) -> Entry:
    return Entry(
        id=row.id,
        kind=row.kind,
        title=row.title,
        body=row.body,
        origin=row.origin,
        tags=tuple(row.tags),
        url=row.url,
        product=row.product,
        questions=tuple(row.questions),
        passages=passages,
        tenant=row.tenant,
    )


def chroma_folder(data_dir: Path) -> Path:
    """Where embedded Chroma keeps its files under the data dir."""
    return data_dir / "chroma"


def open_knowledge_store(
    knowledge: KnowledgeSettings,
    engine: AsyncEngine,
    *,
    data_dir: Path,
    clock: Clock,
    timeout_s: float,
    embedder: Embedder | None = None,
) -> KnowledgeStore:
    """The knowledge store the knowledge section describes, on ``engine`` (the case store's database), with embedded
    Chroma under ``data_dir`` unless a server is set (not connected until ``open``), each read bounded by
    ``timeout_s`` (the database section's); ``embedder`` replaces the model the section names (a model already
    loaded, in tests)."""
    return KnowledgeStore(
        engine=engine,
        embedder=embedder or embedder_for(knowledge, data_dir),
        clock=clock,
        chroma_path=chroma_folder(data_dir),
        chroma_url=knowledge.chroma_url,
        timeout_s=timeout_s,
        batch_wait_s=knowledge.batch_wait_s,
        batch_max=knowledge.batch_max,
        embedding_workers=knowledge.embedding_workers,
        ranking=knowledge.ranking,
        reranker=reranking.MODEL if knowledge.reranker == "learned" else None,
    )


@contextlib.asynccontextmanager
async def standalone(
    knowledge: KnowledgeSettings, database: DatabaseSettings, *, data_dir: Path, searchable: bool = True
) -> AsyncIterator[KnowledgeStore]:
    """A knowledge store with its own database connection, for a one-off command or an evaluation. Without
    ``searchable`` only what SQL answers works (``stats``, ``export``), and no model is loaded.

    Embedded Chroma belongs to one process: with a daemon running on the same data dir, give both a Chroma server
    (``VIGIL_KNOWLEDGE__CHROMA_URL``).
    """
    engine = open_engine(database, data_dir=data_dir)
    store: KnowledgeStore | None = None
    try:
        await migrate(engine)
        store = open_knowledge_store(
            knowledge, engine, data_dir=data_dir, clock=SystemClock(), timeout_s=database.timeout_s
        )
        if searchable:
            await store.open()
        yield store
    finally:
        if store is not None:
            await store.close()
        await engine.dispose()


def _refuse_takeovers(entries: Sequence[Entry], stored: dict[str, _StoredEntry]) -> None:
    """Refuse an entry whose id another file already gave to another tenant's entry: importing it would silently
    take that tenant's entry away (or hand it to everyone). Moving an entry within its own file is fine."""
    for entry in entries:
        if entry.id not in stored:
            continue
        held = stored[entry.id]
        if held.origin != entry.origin and held.tenant != entry.tenant:
            raise EntryConflict(
                f"{entry.origin}: entry id {entry.id!r} ({_whose(entry.tenant)}) is already {held.origin}'s entry for "
                f"{_whose(held.tenant)}; entry ids are shared by every tenant, so give it another"
            )


def _whose(tenant: str | None) -> str:
    return f"tenant {tenant!r}" if tenant is not None else "every tenant"
