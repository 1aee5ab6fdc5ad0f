"""The ONNX Runtime embedder: the torch path's vectors, from batches padded to their longest text, without torch."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest

from vigil.core.errors import StartupError
from vigil.knowledge.embedding import SentenceTransformerEmbedder, bundled_model_path
from vigil.knowledge.onnx_embedding import OnnxEmbedder, _max_tokens, _mean_pooled_dimensions

ARTICLES = Path(__file__).parent.parent.parent / "knowledge" / "articles"

QUESTIONS = [
    "how do I reset my password",
    "Internet's completely down",
    "Hub has a solid amber light",
    "You've taken my payment TWICE this month, what is going on??",
    "5G not working",
    "3-5 days is a joke, I need it sooner",
    "need a new sim",
    "is the invoice sent by email or post",
    "my wifi keeps dropping every evening around 8",
    "wen do u take the money",
    "can i keep my number if i switch to another provider",
    "Bonjour, je voudrais annuler mon abonnement s'il vous plaît",
    "¿Cómo cambio mi plan?",
    "éèàç ñ ü ß — “quotes” and 🙂 emoji",
    "ok thanks",
    "?",
    "",
    "   leading and trailing spaces   ",
    "ALL CAPS QUESTION ABOUT ROAMING CHARGES IN SPAIN",
    "The router was fine yesterday. Today the light is red. I rebooted twice. Still red. What now?",
    "a" * 300,
    "word " * 200,  # 200 word pieces and [CLS], [SEP]: past the tokenizer file's 128, under the model's 256
]


def long_texts() -> list[str]:
    """Help articles: hundreds of words each, far past the 256 word pieces both paths truncate at."""
    return [path.read_text() for path in sorted(ARTICLES.glob("*.md"))[:4]]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [*QUESTIONS, *long_texts()]


@pytest.fixture(scope="module")
def torch_vectors(texts: list[str]) -> np.ndarray:
    """The reference: sentence-transformers on torch, as ``VIGIL_KNOWLEDGE__EMBEDDER=torch`` runs it."""
    model = SentenceTransformerEmbedder()
    model.load()
    return model.embed(texts)


@pytest.fixture(scope="module")
def onnx_path() -> OnnxEmbedder:
    model = OnnxEmbedder()
    model.load()
    return model


def largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape
    return float(np.abs(a - b).max())


def test_the_vectors_are_the_torch_paths_within_1e_5(
    texts: list[str], torch_vectors: np.ndarray, onnx_path: OnnxEmbedder
):
    assert len(texts) >= 25
    expected = torch_vectors
    mixed = onnx_path.embed(texts)  # one call: short and long texts together, batched by length
    one_by_one = np.stack([onnx_path.embed([text])[0] for text in texts])
    assert mixed.dtype == np.float32 and mixed.shape == (len(texts), 384)
    assert largest_difference(mixed, expected) <= 1e-5
    assert largest_difference(one_by_one, expected) <= 1e-5
    assert np.allclose(np.linalg.norm(mixed, axis=1), 1.0, atol=1e-5)


def test_threads_embedding_at_once_get_what_one_thread_gets(texts: list[str], torch_vectors: np.ndarray):
    model = OnnxEmbedder()  # not loaded: the first calls race to load it
    start = threading.Barrier(4)

    def embed(rows: list[int]) -> np.ndarray:
        start.wait(timeout=10)
        return model.embed([texts[row] for row in rows])

    shares = [list(range(n, len(texts), 4)) for n in range(4)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(embed, shares))
    for rows, vectors in zip(shares, results, strict=True):
        assert largest_difference(vectors, torch_vectors[rows]) <= 1e-5


def test_batches_larger_than_the_batch_size_keep_their_order(texts: list[str], torch_vectors: np.ndarray):
    small_batches = OnnxEmbedder(batch_size=4)
    assert largest_difference(small_batches.embed(texts), torch_vectors) <= 1e-5


def test_long_texts_are_cut_at_the_models_256_word_pieces(onnx_path: OnnxEmbedder):
    article = long_texts()[0]
    assert onnx_path.max_tokens == 256
    with_more = article + "\n\nAnd one more paragraph about something else entirely: roaming in Spain."
    assert largest_difference(onnx_path.embed([article]), onnx_path.embed([with_more])) == 0.0


@pytest.fixture
def shapes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (rows, word pieces) of each batch that goes through the model."""
    seen: list[tuple[int, int]] = []
    real_run = onnxruntime.InferenceSession.run

    def recording(self: Any, outputs: Sequence[str], feeds: dict[str, np.ndarray], *args: Any) -> Any:
        seen.append(feeds["input_ids"].shape)
        return real_run(self, outputs, feeds, *args)

    monkeypatch.setattr(onnxruntime.InferenceSession, "run", recording)
    return seen


def test_a_batch_is_padded_to_its_longest_text_and_lengths_far_apart_are_encoded_apart(
    onnx_path: OnnxEmbedder, shapes: list[tuple[int, int]]
):
    widths = shapes
    onnx_path.embed(["how do I reset my password"])  # [CLS] how do i reset my password [SEP]
    onnx_path.embed(["when is my bill taken", "Hub has a solid amber light", "how do I reset my password"])  # 7, 8, 8
    # Lengths far apart are encoded apart: a short question is not padded to an article's 256 word pieces.
    onnx_path.embed(["ok", long_texts()[0]])
    assert widths == [(1, 8), (3, 8), (1, 256), (1, 3)]


def test_long_texts_go_through_the_model_a_few_at_a_time_and_short_ones_many_at_a_time(
    onnx_path: OnnxEmbedder, shapes: list[tuple[int, int]]
):
    # Attention holds rows x width^2 numbers, and ONNX Runtime keeps the most it ever needed: 64 passages of 256
    # word pieces at once would keep hundreds of MiB for the life of the process.
    articles = long_texts() * 5  # 20 texts of 256 word pieces
    vectors = onnx_path.embed(articles)
    assert all(rows * width <= 2048 for rows, width in shapes)
    assert shapes[0] == (8, 256) and sum(rows for rows, _ in shapes) == 20
    assert largest_difference(vectors, np.stack([onnx_path.embed([a])[0] for a in articles])) <= 1e-5
    shapes.clear()
    onnx_path.embed(["how do I reset my password"] * 64)
    assert shapes == [(64, 8)]


def test_on_the_onnx_path_a_process_never_imports_torch(onnx_path: OnnxEmbedder, tmp_path: Path):
    # The export exists (the fixture made or found it): a fresh process loads it and embeds without torch.
    script = (
        "import sys\n"
        "from vigil.knowledge.onnx_embedding import OnnxEmbedder\n"
        "vectors = OnnxEmbedder().embed(['how do I reset my password', 'ok'])\n"
        "assert vectors.shape == (2, 384), vectors.shape\n"
        "print(sorted({'torch', 'transformers', 'sentence_transformers'} & set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_model_that_is_not_mean_pooled_is_refused(tmp_path: Path):
    shipped = bundled_model_path()
    model = tmp_path / "cls-pooled"
    shutil.copytree(shipped, model, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    (model / "1_Pooling" / "config.json").write_text(
        '{"word_embedding_dimension": 384, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}'
    )
    with pytest.raises(StartupError, match="mean pooling only"):
        OnnxEmbedder(model, cache_dir=tmp_path / "cache").load()
    assert not (tmp_path / "cache").exists()  # refused before any export


def test_a_model_saved_by_sentence_transformers_6_is_read_as_its_config_says(tmp_path: Path):
    # A tuned model is saved by sentence-transformers 6: one ``pooling_mode``, the length in the tokenizer's config.
    shipped = bundled_model_path()
    model = tmp_path / "saved-by-6"
    shutil.copytree(
        shipped, model, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "sentence_bert_config.json")
    )
    (model / "1_Pooling" / "config.json").write_text('{"embedding_dimension": 384, "pooling_mode": "cls"}')
    with pytest.raises(StartupError, match=r"mean pooling only.*pooling_mode_cls_tokens"):
        OnnxEmbedder(model, cache_dir=tmp_path / "cache").load()
    (model / "1_Pooling" / "config.json").write_text('{"embedding_dimension": 384, "pooling_mode": "mean"}')
    (model / "tokenizer_config.json").write_text('{"model_max_length": 200}')
    assert _mean_pooled_dimensions(model) == 384 and _max_tokens(model) == 200


def test_a_missing_model_folder_is_a_startup_error(tmp_path: Path):
    with pytest.raises(StartupError, match="no embedding model"):
        OnnxEmbedder(tmp_path / "nothing", cache_dir=tmp_path / "cache").embed(["hello"])
