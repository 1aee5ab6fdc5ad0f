"""The tuned models in the data dir, and which model a process serves.

::

    <data dir>/models/
        <version>/       a tuned model's sentence-transformers folder; its name is the embedder's name, so two
                         models' vectors never share a Chroma collection (``store.py``) or a mined case's row
        <version>.json   its manifest: the gate's numbers, the training counts, the time taken, the base's hash
        onnx/            the ONNX exports of those folders, made by the tuning run (no torch at start-up)
        current.json     the manifest of the model to serve, replaced atomically and only after the model is whole
        last-run.json    the latest run's manifest, its model kept or not

A process serves ``VIGIL_KNOWLEDGE__MODEL_PATH`` when it is set; else, unless ``VIGIL_KNOWLEDGE__TUNED`` is off, the
model ``current.json`` names; else the shipped one. Every replica and restart reads the pointer at start-up and the
knowledge refresh reads it again (a few hundred bytes), so a model made by one process is served by all that share
the data dir's ``models`` folder. The previous model is kept beside the current one; older ones are removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CURRENT = "current.json"
LAST_RUN = "last-run.json"
_KEEP = 2  # the current model and the one before it


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a tuning run made and how its model fared at the gate."""

    version: str
    accepted: bool
    reason: str
    base: str
    """The model it was tuned from (a folder name) and the hash of that folder's weights."""
    base_hash: str
    created_at: str
    seconds: float
    """The whole run: embedding with the shipped model, training, export and judging."""
    counts: dict[str, int] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    shipped: dict[str, float] = field(default_factory=dict)
    """The shipped model's hit@1, MRR and probe count on the held-back questions, as served (the store's whole
    search: what the gate decides by); ``tuned`` the tuned one's."""
    tuned: dict[str, float] = field(default_factory=dict)
    alone: dict[str, dict[str, float]] = field(default_factory=dict)
    """The same of each model by itself (``shipped``, ``tuned``): every entry ranked by its best passage's cosine."""

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Manifest:
        return cls(**{k: v for k, v in raw.items() if k in cls.__dataclass_fields__})


def models_dir(data_dir: Path) -> Path:
    return data_dir / "models"


def onnx_dir(data_dir: Path) -> Path:
    """Where the tuned models' ONNX exports are (the ONNX embedder's cache for them)."""
    return models_dir(data_dir) / "onnx"


def model_folder(data_dir: Path, version: str) -> Path:
    return models_dir(data_dir) / version


def new_version(base: str, now: datetime) -> str:
    """A new model's name: its base and when it was made (also the suffix of its Chroma collections)."""
    return f"{base}-tuned-{now:%Y%m%d-%H%M%S}"


def current(data_dir: Path) -> Manifest | None:
    """The model the pointer names, if its folder is there; None otherwise (serve the shipped model)."""
    found = _read(models_dir(data_dir) / CURRENT)
    if found is None:
        return None
    if not (model_folder(data_dir, found.version) / "config.json").is_file():
        log.warning("the tuned model %s is missing from %s; serving the shipped one", found.version, data_dir)
        return None
    return found


def last_run(data_dir: Path) -> Manifest | None:
    """The latest tuning run's manifest, or None before the first."""
    return _read(models_dir(data_dir) / LAST_RUN)


def _read(path: Path) -> Manifest | None:
    try:
        return Manifest.parse(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError) as exc:
        log.warning("cannot read %s (%s); ignoring it", path, exc)
        return None


def record(data_dir: Path, manifest: Manifest) -> None:
    """Write a run's manifest beside its model and as the last run; when the gate accepted it, point ``current``
    at it (last: a reader sees the old model or the whole new one) and remove all but the newest two models; when
    not, remove its folder."""
    folder = models_dir(data_dir)
    if manifest.accepted:
        _write(folder / f"{manifest.version}.json", manifest)
        _write(folder / CURRENT, manifest)
        _prune(data_dir, keep=manifest.version)
    else:
        _remove(data_dir, manifest.version)
    _write(folder / LAST_RUN, manifest)


def _write(path: Path, manifest: Manifest) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(asdict(manifest), out, indent=2)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def _prune(data_dir: Path, *, keep: str) -> None:
    """Remove the tuned models older than the newest ``_KEEP`` (``keep`` among them), with their exports."""
    folder = models_dir(data_dir)
    versions = sorted(p.stem for p in folder.glob("*.json") if p.name not in (CURRENT, LAST_RUN))
    old = [v for v in versions if v != keep][: max(0, len(versions) - _KEEP)]
    for version in old:
        _remove(data_dir, version)


def _remove(data_dir: Path, version: str) -> None:
    """A model's folder, manifest and exports."""
    discard(model_folder(data_dir, version))
    (models_dir(data_dir) / f"{version}.json").unlink(missing_ok=True)
    for export in onnx_dir(data_dir).glob(f"{version}-*.onnx"):
        export.unlink(missing_ok=True)


def discard(folder: Path) -> None:
    """Remove a model folder (a rejected or superseded model), ignoring one already gone."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(folder)


def weights_hash(model: Path) -> str:
    """The SHA-256 of a model folder's weights (the manifest's ``base_hash``: which model was tuned)."""
    digest = hashlib.sha256()
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (model / name).is_file():
            with (model / name).open("rb") as weights:
                for block in iter(lambda: weights.read(1 << 20), b""):
                    digest.update(block)
            return digest.hexdigest()[:16]
    return ""
