"""The ONNX export of the sentence model: made once from the shipped weights with torch, then cached on disk.

Only the transformer is exported (token ids in, one hidden state per token out); the tokenizer, the pooling and the
normalisation run outside the graph (``vigil.knowledge.onnx_embedding``), as the model's sentence-transformers
config describes them. Exporting needs torch, transformers and onnx and takes seconds; it happens at the first start
on a machine, and every later start (a daemon, a one-off ``vigil kb search``) loads the cached file without torch.
The export runs in a child process (``python -m vigil.knowledge.onnx_export``): torch, once imported, stays in the
process that imported it, and a daemon that exported in its own process kept about 580 MiB more resident for good
(796 MiB against 215 MiB for the embedder alone, measured), which is where a first `make run` on a fresh machine
reached 1 GB.

The cache is keyed by the model folder's identity (its config, and the size and modification time of its weights) and
by ``FORMAT``, so new weights or a changed export make a new file instead of reusing a stale one. Two processes that
start at once may both export: each writes a temporary file in the cache folder and renames it into place, which is
atomic, so a reader sees either no file or a whole one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from vigil.core.errors import StartupError

# Bump when the exported graph changes (inputs, outputs, opset): older exports are then left unused.
FORMAT = 1
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT = "last_hidden_state"
_WEIGHTS = ("model.safetensors", "pytorch_model.bin")


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/vigil/onnx`` (``~/.cache/vigil/onnx``): one export per machine and user, shared by every
    data dir (in the container image, home is the data dir)."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "vigil" / "onnx"


def cache_key(model_path: Path) -> str:
    """What identifies an export of ``model_path``: cheap to compute (no hashing of the weights), so a one-off command
    pays nothing for it."""
    digest = hashlib.sha256(f"format={FORMAT};opset={OPSET}".encode())
    config = model_path / "config.json"
    if not config.is_file():
        raise StartupError(f"no model config at {config}")
    digest.update(config.read_bytes())
    weights = _weights(model_path)
    stat = weights.stat()
    digest.update(f"{weights.name};{stat.st_size};{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def cached_export(model_path: Path, cache_dir: Path) -> Path:
    """The ONNX file for ``model_path`` in ``cache_dir``, exported now if it is not there yet.

    Raises:
        StartupError: the model folder has no weights, or the cache folder cannot be written.
    """
    target = cache_dir / f"{model_path.name}-{cache_key(model_path)}.onnx"
    if not target.is_file():
        export(model_path, target)
    return target


def export(model_path: Path, target: Path) -> None:
    """Export the transformer of ``model_path`` to ``target``, through a temporary file renamed into place."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise StartupError(
            f"cannot write the ONNX export to {target.parent} ({exc}): set VIGIL_KNOWLEDGE__ONNX_CACHE"
        ) from exc
    os.close(handle)
    try:
        _export_in_child(model_path, Path(temporary))
        # mkstemp's 0600 would keep the export from the machine's other users. (Reading the umask means setting it,
        # for the whole process, while other threads may be creating files: a fixed mode is the safe one.)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


EXPORT_TIMEOUT_S = 600.0
"""An export takes seconds (about 20 on two busy cores); one that takes this long is stuck."""


def _export_in_child(model_path: Path, out: Path) -> None:
    """``_export_with_torch`` in a process of its own, so that torch is never loaded in this one.

    Raises:
        StartupError: the child failed (its last line of error output says why) or did not finish in time.
    """
    command = [sys.executable, "-m", "vigil.knowledge.onnx_export", str(model_path), str(out)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StartupError(f"cannot export {model_path} to ONNX: {exc}") from exc
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        raise StartupError(
            f"cannot export {model_path} to ONNX (exit {done.returncode}): {said[-1] if said else 'no output'}"
        )


def _export_with_torch(model_path: Path, out: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never look a model up on a hub
    import torch  # noqa: PLC0415  (heavy: only the export needs it)
    import transformers  # noqa: PLC0415

    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    # Eager attention traces to plain ONNX operators; the fused kernels of the other implementations may not.
    model = transformers.AutoModel.from_pretrained(str(model_path), attn_implementation="eager")
    model.eval()

    class _HiddenStates(torch.nn.Module):
        """The transformer with named inputs and one output, as the exporter traces it."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor) -> Any:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    ids = torch.ones((2, 8), dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0  # a padded row, so the trace treats the mask as data, not as all ones
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, OUTPUT)}
    with warnings.catch_warnings(), torch.no_grad():
        # The TorchScript exporter (dynamo=False) needs only the onnx package, where the dynamo one also needs
        # onnxscript; it warns that it is deprecated, and about tracing Python values: neither matters for BERT.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _HiddenStates(),
            (ids, mask, torch.zeros_like(ids)),
            str(out),
            dynamo=False,
            input_names=list(INPUTS),
            output_names=[OUTPUT],
            dynamic_axes=axes,
            opset_version=OPSET,
        )


def _weights(model_path: Path) -> Path:
    for name in _WEIGHTS:
        if (model_path / name).is_file():
            return model_path / name
    raise StartupError(f"no model weights in {model_path} (looked for {', '.join(_WEIGHTS)})")


if __name__ == "__main__":  # the child process of ``_export_in_child``: MODEL_PATH OUT
    _export_with_torch(Path(sys.argv[1]), Path(sys.argv[2]))
