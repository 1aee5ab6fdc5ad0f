"""A throwaway knowledge store for evaluations: SQLite and Chroma in a temp dir, the real model."""

from __future__ import annotations

import contextlib
import gzip
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from vigil.app.settings import Settings
from vigil.knowledge.documents import Entry, read
from vigil.knowledge.store import KnowledgeStore, standalone

# ../shared/data beside the repository; VIGIL_SHARED_DATA names it for a checkout elsewhere (a git worktree).
SHARED = Path(os.environ.get("VIGIL_SHARED_DATA") or Path(__file__).resolve().parent.parent.parent / "shared" / "data")
BANKING = SHARED / "tau2" / "banking_knowledge"


@contextlib.asynccontextmanager
async def knowledge_store() -> AsyncIterator[KnowledgeStore]:
    """An empty, open knowledge store that disappears afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="vigil-eval-"))
    try:
        settings = Settings(_env_file=None, data_dir=folder)  # type: ignore[call-arg]
        async with standalone(settings.knowledge, settings.database, data_dir=settings.data_dir) as knowledge:
            yield knowledge
    finally:
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
