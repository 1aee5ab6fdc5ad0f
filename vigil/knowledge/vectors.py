"""Vector search in Chroma: embedded on disk by default, a Chroma server for several replicas.

vigil always computes the embeddings itself (``embedding.py``) and hands Chroma plain vectors, so no embedding
function is registered with Chroma and nothing is ever downloaded. Chroma's client is synchronous; callers in the
event loop go through ``asyncio.to_thread``.

This is the one module that talks to Chroma: its errors come out as ``KnowledgeUnavailable`` when Chroma cannot be
reached (a server down or answering 5xx, its folder gone or read-only) and as ``KnowledgeError`` otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx

from vigil.core.errors import KnowledgeError, KnowledgeUnavailable, StartupError
from vigil.knowledge.embedding import Vectors

_BATCH = 1000


@dataclass(frozen=True, slots=True)
class VectorHit:
    """An item and its cosine similarity to the query (1 is identical)."""

    id: str
    similarity: float


# Chroma's own errors that mean "not now": its storage failing under it (a server answering 500), or being throttled.
_UNAVAILABLE_CHROMA_ERRORS = ("InternalError", "RateLimitError")


def is_unavailable(exc: BaseException) -> bool:
    """Whether a Chroma error means "not reachable now" (retry) rather than a refusal of the request."""
    if isinstance(exc, KnowledgeUnavailable | httpx.TransportError | OSError | TimeoutError):
        return True
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code >= 500 or exc.response.status_code == 429
    if type(exc).__name__ in _UNAVAILABLE_CHROMA_ERRORS:
        return True
    # The HTTP client's own words when the server is not there at all.
    return isinstance(exc, ValueError) and "Could not connect" in str(exc)


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Chroma's errors inside the block come out as vigil's, ``from`` the cause."""
    try:
        yield
    except KnowledgeError:
        raise
    except Exception as exc:
        kind = KnowledgeUnavailable if is_unavailable(exc) else KnowledgeError
        raise kind(f"Chroma failed {what}: {type(exc).__name__}: {exc}") from exc


def connect(*, path: Path, url: str | None) -> Any:
    """A Chroma client: a server when ``url`` is set, else an embedded store under ``path``.

    Raises:
        StartupError: ``url`` is not a URL of a Chroma server.
        KnowledgeUnavailable: Chroma cannot be reached (retry).
    """
    import chromadb  # noqa: PLC0415  (heavy: imported only when the knowledge store opens)
    from chromadb.config import Settings as ChromaSettings  # noqa: PLC0415

    settings = ChromaSettings(anonymized_telemetry=False, allow_reset=False)
    if url:
        parts = urlparse(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StartupError(f"not a Chroma server URL: {url!r}")
        with translated("connecting"):
            return chromadb.HttpClient(
                host=parts.hostname,
                port=parts.port or (443 if parts.scheme == "https" else 80),
                ssl=parts.scheme == "https",
                settings=settings,
            )
    with translated("opening its folder"):
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path), settings=settings)


def collection_names(client: Any) -> list[str]:
    """The names of every collection the client's Chroma holds."""
    with translated("listing collections"):
        return [getattr(c, "name", c) for c in client.list_collections()]


def drop_collection(client: Any, name: str) -> None:
    """Remove a collection and its vectors (one already gone is no error)."""
    with translated(f"removing the collection {name}"):
        if name in collection_names(client):
            client.delete_collection(name)


class VectorCollection:
    """One Chroma collection of normalised vectors, compared by cosine; every method raises ``KnowledgeError`` (or
    ``KnowledgeUnavailable``) for Chroma's errors."""

    def __init__(self, client: Any, name: str) -> None:
        self.name = name
        with translated(f"opening the collection {name}"):
            self._collection = client.get_or_create_collection(
                name, embedding_function=None, metadata={"hnsw:space": "cosine"}
            )

    def upsert(self, ids: Sequence[str], vectors: Vectors, metadatas: Sequence[Mapping[str, Any]]) -> None:
        """Add or replace items, in batches."""
        with translated("storing vectors"):
            for start in range(0, len(ids), _BATCH):
                end = start + _BATCH
                self._collection.upsert(
                    ids=list(ids[start:end]),
                    embeddings=vectors[start:end],
                    metadatas=[dict(m) for m in metadatas[start:end]],
                )

    def delete(self, ids: Sequence[str]) -> None:
        """Remove items (unknown ids are ignored)."""
        with translated("removing vectors"):
            for start in range(0, len(ids), _BATCH):
                self._collection.delete(ids=list(ids[start : start + _BATCH]))

    def ids(self) -> set[str]:
        """Every id in the collection."""
        with translated("listing vectors"):
            return set(self._collection.get(include=[])["ids"])

    def metadatas(self) -> dict[str, Mapping[str, Any]]:
        """Every id in the collection, with its metadata."""
        with translated("listing vectors"):
            found = self._collection.get(include=["metadatas"])
        return {item: metadata or {} for item, metadata in zip(found["ids"], found["metadatas"], strict=True)}

    def get(self, ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        """The items of ``ids`` that exist, with their metadata."""
        if not ids:
            return {}
        with translated("reading vectors"):
            found = self._collection.get(ids=list(ids), include=["metadatas"])
        return {item: metadata or {} for item, metadata in zip(found["ids"], found["metadatas"], strict=True)}

    def count(self) -> int:
        """How many items the collection holds."""
        with translated("counting vectors"):
            return int(self._collection.count())

    def query(self, vectors: Vectors, k: int, where: Mapping[str, Any] | None = None) -> list[list[VectorHit]]:
        """The ``k`` nearest items to each of ``vectors`` (one row per query), in one call to Chroma: its cost is
        mostly per call, so a batch of queries costs little more than one. The hits carry no metadata (fetching it
        costs as much as the search; the caller knows what its ids are). A collection holding fewer than ``k``
        gives what it holds (Chroma does not refuse a larger ``n_results``, so no count is asked for first)."""
        with translated("searching"):
            found = self._collection.query(
                query_embeddings=vectors,
                n_results=k,
                where=dict(where) if where else None,
                include=["distances"],
            )
        return [
            [VectorHit(item, 1.0 - float(distance)) for item, distance in zip(ids, distances, strict=True)]
            for ids, distances in zip(found["ids"], found["distances"], strict=True)
        ]
