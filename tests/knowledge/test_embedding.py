"""Choosing the embedding backend: ONNX Runtime by default, sentence-transformers and torch on request."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import make_settings
from vigil.knowledge.embedding import SentenceTransformerEmbedder, embedder_for
from vigil.knowledge.onnx_embedding import OnnxEmbedder


def test_the_default_backend_is_onnx_runtime(tmp_path: Path):
    assert isinstance(embedder_for(make_settings(tmp_path=tmp_path).knowledge), OnnxEmbedder)


def test_torch_is_chosen_with_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VIGIL_KNOWLEDGE__EMBEDDER", "torch")
    assert isinstance(embedder_for(make_settings(tmp_path=tmp_path).knowledge), SentenceTransformerEmbedder)


def test_an_unknown_backend_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("VIGIL_KNOWLEDGE__EMBEDDER", "tensorflow")
    with pytest.raises(ValueError, match="onnx"):
        make_settings(tmp_path=tmp_path)
