"""A throwaway knowledge store for evaluations: SQLite and Chroma in a temp dir, the real model."""

from __future__ import annotations

import contextlib
import gzip
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from vigil.clock import SystemClock
from vigil.documents import Entry, read
from vigil.knowledge import KnowledgeStore, open_knowledge_store
from vigil.settings import Settings
from vigil.store import CaseStore

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
BANKING = SHARED / "tau2" / "banking_knowledge"


@contextlib.asynccontextmanager
async def knowledge_store() -> AsyncIterator[KnowledgeStore]:
    """An empty, open knowledge store that disappears afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="vigil-eval-"))
    settings = Settings(_env_file=None, data_dir=folder)  # type: ignore[call-arg]
    store = CaseStore.from_settings(settings, clock=SystemClock())
    try:
        await store.migrate()
        knowledge = open_knowledge_store(settings, store, SystemClock())
        await knowledge.open()
        yield knowledge
    finally:
        await store.close()
        shutil.rmtree(folder, ignore_errors=True)


def banking_documents() -> list[Entry]:
    """tau2-bench's banking knowledge base (698 documents), read with vigil's own JSONL reader."""
    folder = Path(tempfile.mkdtemp(prefix="vigil-bank-"))
    try:
        plain = folder / "documents.jsonl"
        with gzip.open(BANKING / "documents.jsonl.gz", "rb") as source, plain.open("wb") as target:
            shutil.copyfileobj(source, target)
        return read(plain)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
