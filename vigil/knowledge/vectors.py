"""Vector search in Chroma: embedded on disk by default, a Chroma server for several replicas.

vigil always computes the embeddings itself (``embedding.py``) and hands Chroma plain vectors, so no embedding
function is registered with Chroma and nothing is ever downloaded. Chroma's client is synchronous; callers in the
event loop go through ``asyncio.to_thread``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from vigil.core.errors import StartupError
from vigil.knowledge.embedding import Vectors

_BATCH = 1000


@dataclass(frozen=True, slots=True)
class VectorHit:
    """An item and its cosine similarity to the query (1 is identical)."""

    id: str
    similarity: float
    metadata: Mapping[str, Any]


def connect(*, path: Path, url: str | None) -> Any:
    """A Chroma client: a server when ``url`` is set, else an embedded store under ``path``."""
    import chromadb  # noqa: PLC0415  (heavy: imported only when the knowledge store opens)
    from chromadb.config import Settings as ChromaSettings  # noqa: PLC0415

    settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if url:
        parts = urlparse(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StartupError(f"not a Chroma server URL: {url!r}")
        return chromadb.HttpClient(
            host=parts.hostname,
            port=parts.port or (443 if parts.scheme == "https" else 80),
            ssl=parts.scheme == "https",
            settings=settings,
        )
    path.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(path), settings=settings)


class VectorCollection:
    """One Chroma collection of normalised vectors, compared by cosine."""

    def __init__(self, client: Any, name: str) -> None:
        self._collection = client.get_or_create_collection(
            name, embedding_function=None, metadata={"hnsw:space": "cosine"}
        )

    def upsert(self, ids: Sequence[str], vectors: Vectors, metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Add or replace items, in batches."""
        for start in range(0, len(ids), _BATCH):
            end = start + _BATCH
            self._collection.upsert(
                ids=list(ids[start:end]),
                embeddings=vectors[start:end],
                metadatas=[dict(m) for m in metadatas[start:end]],
            )

    def delete(self, ids: Sequence[str]) -> None:
        """Remove items (unknown ids are ignored)."""
        for start in range(0, len(ids), _BATCH):
            self._collection.delete(ids=list(ids[start : start + _BATCH]))

    def ids(self) -> set[str]:
        """Every id in the collection."""
        return set(self._collection.get(include=[])["ids"])

    def metadatas(self) -> dict[str, Mapping[str, Any]]:
        """Every id in the collection, with its metadata."""
        found = self._collection.get(include=["metadatas"])
        return {item: metadata or {} for item, metadata in zip(found["ids"], found["metadatas"], strict=True)}

    def get(self, ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        """The items of ``ids`` that exist, with their metadata."""
        if not ids:
            return {}
        found = self._collection.get(ids=list(ids), include=["metadatas"])
        return {item: metadata or {} for item, metadata in zip(found["ids"], found["metadatas"], strict=True)}

    def count(self) -> int:
        return int(self._collection.count())

    def query(self, vector: Vectors, k: int, where: Mapping[str, Any] | None = None) -> list[VectorHit]:
        """The ``k`` nearest items to one query vector."""
        total = self.count()
        if total == 0:
            return []
        found = self._collection.query(
            query_embeddings=vector.reshape(1, -1),
            n_results=min(k, total),
            where=dict(where) if where else None,
            include=["distances", "metadatas"],
        )
        return [
            VectorHit(item, 1.0 - float(distance), metadata or {})
            for item, distance, metadata in zip(
                found["ids"][0], found["distances"][0], found["metadatas"][0], strict=True
            )
        ]
