"""The ONNX export: made once from the shipped weights, cached, safe when two processes start at once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vigil.core.errors import StartupError
from vigil.knowledge.embedding import bundled_model_path
from vigil.knowledge.onnx_embedding import OnnxEmbedder
from vigil.knowledge.onnx_export import cache_key, cached_export, default_cache_dir

# A process that loads the embedder on a cache folder (exporting if it has to) and prints a vector's first values.
_LOAD = """
import sys
from pathlib import Path
from vigil.knowledge.onnx_embedding import OnnxEmbedder
vector = OnnxEmbedder(cache_dir=Path(sys.argv[1])).embed(["can I keep my number"])[0]
print(" ".join(f"{v:.7f}" for v in vector[:8]))
print("torch" in sys.modules)  # the export ran in a child process: torch never loaded in this one
"""


@pytest.mark.timeout(300)  # two exports on two cores shared with other work
def test_two_processes_starting_at_once_share_one_whole_export_that_later_starts_reuse_and_neither_loads_torch(
    tmp_path: Path,
):
    cache = tmp_path / "cache"
    started = [
        subprocess.Popen(
            [sys.executable, "-c", _LOAD, str(cache)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=280) for process in started]
    assert [p.returncode for p in started] == [0, 0], [err for _, err in outputs]
    assert outputs[0][0] == outputs[1][0]
    assert [out.splitlines()[1] for out, _ in outputs] == ["False", "False"], "torch was loaded to export"
    # One file, under its final name: no temporary file is left behind by either process.
    (exported,) = cache.iterdir()
    assert exported.name == f"model-{cache_key(bundled_model_path())}.onnx"
    assert exported.stat().st_mode & 0o777 == 0o644  # readable by the machine's other users, written by its owner
    made = exported.stat().st_mtime_ns
    later = OnnxEmbedder(cache_dir=cache)
    later.load()
    assert list(cache.iterdir()) == [exported]
    assert exported.stat().st_mtime_ns == made  # loaded, not exported again
    vector = later.embed(["can I keep my number"])[0]
    assert outputs[0][0].splitlines()[0].split() == [f"{v:.7f}" for v in vector[:8]]


def test_new_weights_get_a_new_export(tmp_path: Path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "bert"}')
    (model / "model.safetensors").write_bytes(b"weights")
    before = cache_key(model)
    (model / "model.safetensors").write_bytes(b"other weights")
    assert cache_key(model) != before


def test_a_model_folder_without_weights_cannot_be_exported(tmp_path: Path):
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(StartupError, match="no model weights"):
        cached_export(tmp_path, tmp_path / "cache")


def test_a_cache_folder_that_cannot_be_written_names_the_setting(tmp_path: Path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(StartupError, match="VIGIL_KNOWLEDGE__ONNX_CACHE"):
        cached_export(bundled_model_path(), blocked / "cache")


def test_the_default_cache_is_the_users_cache_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "vigil" / "onnx"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "vigil" / "onnx"
