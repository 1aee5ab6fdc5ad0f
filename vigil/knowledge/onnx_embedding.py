"""Sentence embeddings on ONNX Runtime: the same all-MiniLM-L6-v2 weights as the torch path, without torch.

The transformer runs from its ONNX export (``vigil.knowledge.onnx_export``, made once and cached); around it this
module does what the model's sentence-transformers config says: word pieces from ``tokenizer.json``, truncated at
``max_seq_length`` (``sentence_bert_config.json``), mean pooling over the attention mask (``1_Pooling``) and L2
normalisation (``2_Normalize``, which vigil applies to every model). A batch is padded to its longest text, never to a
fixed length: a question of ten word pieces costs ten, not 256 (the tokenizer file pads to 128 unless told not to).

Loading imports onnxruntime and tokenizers only, so a one-off command starts in a fraction of the torch path's time.

``embed`` may be called from several threads at once (``MicroBatcher``'s workers): an ONNX Runtime session may be
run concurrently, with one intra-op thread each run computes on its caller's thread and releases the GIL, and the
tokenizer is read-only once loaded. So two threads embed on two cores with the weights in memory once; a session per
thread would cost ~110 MiB more each for no more speed (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from vigil.core.errors import StartupError
from vigil.knowledge.embedding import SHIPPED, Vectors, bundled_model_path
from vigil.knowledge.onnx_export import OUTPUT, cached_export, default_cache_dir

if TYPE_CHECKING:
    from tokenizers import Tokenizer

_DEFAULT_MAX_TOKENS = 256
_TOKENS_PER_RUN = 2048
"""At most this many word pieces (rows x the longest) go through the model at once. Attention holds rows x width^2
numbers per head and layer, and ONNX Runtime keeps the largest it has needed: 64 help-centre passages of 256 word
pieces at once took the process from 237 to 593 MiB and were slower than runs of 8 (docs/benchmarks.md). Questions
are short, so 64 of them still go together."""


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (or another mean-pooled BERT-style sentence model folder) on ONNX Runtime, on the CPU."""

    def __init__(
        self, model_path: Path | None = None, *, cache_dir: Path | None = None, threads: int = 1, batch_size: int = 64
    ) -> None:
        self._path = model_path
        self._cache_dir = cache_dir
        self._threads = threads
        self._batch_size = batch_size
        self._session: Any = None
        self._tokenizer: Tokenizer | None = None
        self._inputs: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self.name = SHIPPED if model_path is None else model_path.name
        self.dimensions = 384
        self.max_tokens = _DEFAULT_MAX_TOKENS

    def load(self) -> None:
        """Export the model if this machine has no export of it yet (slow, needs torch; once), then load the export.

        Raises:
            StartupError: no model folder, a pooling this embedder does not do, or an export that cannot be written.
        """
        with self._lock:
            if self._session is not None:
                return
            path = self._path or bundled_model_path()
            if not path.is_dir():
                raise StartupError(f"no embedding model at {path}")
            self.dimensions = _mean_pooled_dimensions(path)
            self.max_tokens = _max_tokens(path)
            exported = cached_export(path, self._cache_dir or default_cache_dir())
            self._tokenizer = _tokenizer(path, self.max_tokens)
            session = _session(exported, self._threads)
            self._inputs = tuple(i.name for i in session.get_inputs())
            self._session = session  # last: a thread that sees it loaded finds the rest ready (embed checks it)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if self._session is None:
            self.load()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        assert self._tokenizer is not None
        encodings = self._tokenizer.encode_batch(list(texts))
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for rows in _similar_lengths([len(e.ids) for e in encodings], self._batch_size, _TOKENS_PER_RUN):
            out[rows] = self._encode([encodings[i] for i in rows])
        return out

    def _encode(self, encodings: list[Any]) -> Vectors:
        width = max(len(e.ids) for e in encodings)  # the longest of this batch, at most max_tokens
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self._session.run([OUTPUT], {name: feeds[name] for name in self._inputs})
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return np.asarray(pooled / norms, dtype=np.float32)


def _similar_lengths(lengths: list[int], most: int, tokens: int = _TOKENS_PER_RUN) -> list[list[int]]:
    """The rows, longest first, cut into runs of at most ``most`` rows and ``tokens`` word pieces (rows x the
    longest), whose shortest is at least 3/4 of their longest.

    A run is padded to its longest row, and padding costs as much as text: a question of 12 word pieces batched with
    one of 100 would cost 100. Questions vary that much (3 to 100 or more), so a batch of them is encoded as a few
    runs of similar lengths, each wasting at most a quarter (sentence-transformers only sorts, in runs of 64).
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    runs: list[list[int]] = []
    for i in order:
        run = runs[-1] if runs else []
        longest = lengths[run[0]] if run else 0
        if run and len(run) < most and (len(run) + 1) * longest <= tokens and lengths[i] * 4 >= longest * 3:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _mean_pooled_dimensions(path: Path) -> int:
    """The sentence dimensions, after checking that the folder's pooling is the mean of its tokens."""
    config = path / "1_Pooling" / "config.json"
    if not config.is_file():
        _missing(config)
    pooling = json.loads(config.read_text())
    # sentence-transformers before 6 writes a flag per mode; 6 and later one ``pooling_mode`` (a tuned model's).
    named = pooling.get("pooling_mode")
    if named is not None:
        modes = {f"pooling_mode_{m}_tokens" for m in ([named] if isinstance(named, str) else named)}
    else:
        modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    if modes != {"pooling_mode_mean_tokens"}:
        raise StartupError(
            f"{path}: the ONNX embedder does mean pooling only, the model asks for {sorted(modes)}; "
            "set VIGIL_KNOWLEDGE__EMBEDDER=torch"
        )
    return int(pooling.get("word_embedding_dimension") or pooling.get("embedding_dimension") or 384)


def _max_tokens(path: Path) -> int:
    """Where sentence-transformers truncates: ``max_seq_length``, in word pieces including [CLS] and [SEP] (in the
    tokenizer's config as ``model_max_length`` for a model saved by sentence-transformers 6 and later)."""
    for file, key in (("sentence_bert_config.json", "max_seq_length"), ("tokenizer_config.json", "model_max_length")):
        config = path / file
        if config.is_file() and isinstance(found := json.loads(config.read_text()).get(key), int) and found < 8192:
            return found
    return _DEFAULT_MAX_TOKENS


def _tokenizer(path: Path, max_tokens: int) -> Tokenizer:
    # One thread per batch, as the model runs; and no warning from the tokenizer's pool when a process forks.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer  # noqa: PLC0415  (imported on load: commands without a model skip it)

    file = path / "tokenizer.json"
    if not file.is_file():
        _missing(file)
    tokenizer = Tokenizer.from_file(str(file))
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()  # each batch is padded to its longest text by _encode
    return tokenizer


def _session(exported: Path, threads: int) -> Any:
    import onnxruntime  # noqa: PLC0415  (imported on load)

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: the optimiser's notes are not the operator's business
    return onnxruntime.InferenceSession(str(exported), options, providers=["CPUExecutionProvider"])


def _missing(file: Path) -> NoReturn:
    raise StartupError(f"no {file.name} in {file.parent}")
