"""The tuned models in the data dir: what a run records, which model a process serves, what is kept."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import make_settings
from vigil.knowledge import tuned
from vigil.knowledge.embedding import SHIPPED, embedder_for
from vigil.knowledge.tuned import Manifest


def manifest(version: str, *, accepted: bool) -> Manifest:
    return Manifest(
        version=version,
        accepted=accepted,
        reason="MRR 0.700 -> 0.800" if accepted else "hit@1 fell",
        base=SHIPPED,
        base_hash="abc",
        created_at="2026-12-06T10:00:00+00:00",
        seconds=300.0,
        counts={"examples": 600, "held_back": 120},
        shipped={"hit_at_1": 0.6, "mrr": 0.7, "probes": 120},
        tuned={"hit_at_1": 0.7, "mrr": 0.8, "probes": 120},
    )


def made(data_dir: Path, version: str) -> Path:
    """A model folder as a training run leaves it (enough of one for the pointer and the embedder's choice)."""
    folder = tuned.model_folder(data_dir, version)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def test_an_accepted_model_becomes_current_and_its_numbers_are_recorded(tmp_path: Path):
    made(tmp_path, "m-tuned-1")
    tuned.record(tmp_path, manifest("m-tuned-1", accepted=True))
    assert tuned.current(tmp_path) == manifest("m-tuned-1", accepted=True)
    assert tuned.last_run(tmp_path) == manifest("m-tuned-1", accepted=True)
    raw = json.loads((tuned.models_dir(tmp_path) / "m-tuned-1.json").read_text())
    assert raw["shipped"]["mrr"] == 0.7 and raw["tuned"]["mrr"] == 0.8 and raw["counts"]["held_back"] == 120


def test_a_rejected_model_is_removed_and_the_current_one_stays(tmp_path: Path):
    made(tmp_path, "m-tuned-1")
    tuned.record(tmp_path, manifest("m-tuned-1", accepted=True))
    rejected = made(tmp_path, "m-tuned-2")
    tuned.record(tmp_path, manifest("m-tuned-2", accepted=False))
    assert not rejected.exists()
    assert tuned.current(tmp_path) == manifest("m-tuned-1", accepted=True)
    last = tuned.last_run(tmp_path)
    assert last is not None and last.version == "m-tuned-2" and not last.accepted and last.reason == "hit@1 fell"


def test_the_current_model_and_the_one_before_are_kept_older_ones_removed(tmp_path: Path):
    exports = tuned.onnx_dir(tmp_path)
    exports.mkdir(parents=True)
    for n in (1, 2, 3):
        made(tmp_path, f"m-tuned-{n}")
        (exports / f"m-tuned-{n}-0123.onnx").write_text("")
        tuned.record(tmp_path, manifest(f"m-tuned-{n}", accepted=True))
    assert sorted(p.name for p in tuned.models_dir(tmp_path).iterdir() if p.is_dir()) == [
        "m-tuned-2",
        "m-tuned-3",
        "onnx",
    ]
    assert sorted(p.name for p in exports.iterdir()) == ["m-tuned-2-0123.onnx", "m-tuned-3-0123.onnx"]


def test_a_pointer_to_a_missing_folder_or_unreadable_serves_the_shipped_model(tmp_path: Path):
    assert tuned.current(tmp_path) is None  # nothing tuned yet
    made(tmp_path, "m-tuned-1")
    tuned.record(tmp_path, manifest("m-tuned-1", accepted=True))
    tuned.discard(tuned.model_folder(tmp_path, "m-tuned-1"))
    assert tuned.current(tmp_path) is None
    (tuned.models_dir(tmp_path) / tuned.CURRENT).write_text("{not json")
    assert tuned.current(tmp_path) is None


def test_the_embedder_serves_the_tuned_model_unless_tuning_is_off_or_a_model_path_is_set(tmp_path: Path):
    settings = make_settings(tmp_path=tmp_path).knowledge
    assert embedder_for(settings, tmp_path).name == SHIPPED
    made(tmp_path, "m-tuned-1")
    tuned.record(tmp_path, manifest("m-tuned-1", accepted=True))
    assert embedder_for(settings, tmp_path).name == "m-tuned-1"
    assert embedder_for(settings.model_copy(update={"tuned": False}), tmp_path).name == SHIPPED
    own = tmp_path / "own-model"
    own.mkdir()
    assert embedder_for(settings.model_copy(update={"model_path": own}), tmp_path).name == "own-model"
    assert embedder_for(settings).name == SHIPPED  # no data dir: nothing tuned to look for
