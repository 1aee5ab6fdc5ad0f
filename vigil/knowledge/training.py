"""Fine-tuning the sentence model with sentence-transformers and torch, in a child process of its own.

The daemon never imports torch: a tuning run starts a fresh interpreter (``spawn``) that loads the shipped model,
trains it with MultipleNegativesRankingLoss on ``tuning.examples`` rows (the question, its passage, and a near miss
as a hard negative; every other row's passage in the batch is a negative too), saves the model folder and exports it
to ONNX with ``onnx_export`` as the shipped model is, then exits, and its memory (torch's ~1 GiB) goes with it. The
parent waits in a thread, so the event loop keeps serving; a cancelled wait kills the child.

A batch never holds two rows of one entry: they would share a positive, and each would be taught away from the
other's, which is its own. Training is seeded (one thread: the same rows give the same model) and bounded by time:
when ``budget_s`` runs out mid-epoch the model is saved as it is (the gate then judges it like any other).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from vigil.core.errors import KnowledgeError
from vigil.knowledge.onnx_export import cached_export
from vigil.knowledge.tuning import Example

_REPORT = "training.json"


@dataclass(frozen=True, slots=True)
class Recipe:
    """How to train: the optimiser's and the loop's settings, and the CPU threads to train on."""

    epochs: int = 1
    batch_size: int = 32
    learning_rate: float = 2e-5
    warmup: float = 0.1
    """The share of the steps over which the learning rate rises from zero."""
    budget_s: float = 1800.0
    seed: int = 26
    threads: int = 2
    max_tokens: int = 128
    """Word pieces of each text trained on (the model still reads 256 at run time). Attention costs the square of
    it: at 256 a step of 32 rows took ~6 GiB and twice the time; what tells entries apart is at their start."""


@dataclass(frozen=True, slots=True)
class Trained:
    """What a training run did: steps and epochs done, the loss of its first and last steps, and its seconds."""

    steps: int
    epochs: float
    first_loss: float
    last_loss: float
    seconds: float
    out_of_time: bool


def batches(examples: Sequence[Example], size: int, rng: random.Random) -> list[list[int]]:
    """One epoch's batches of row numbers, shuffled, none holding two rows of one entry (a batch closes early when
    only rows of entries it already holds remain)."""
    by_entry: dict[str, list[int]] = defaultdict(list)
    for row, example in enumerate(examples):
        by_entry[example.entry_id].append(row)
    queues = list(by_entry.values())
    for queue in queues:
        rng.shuffle(queue)
    out: list[list[int]] = []
    while any(queues):
        live = [q for q in queues if q]
        rng.shuffle(live)
        # The entries with most rows left go first, so the last batches are not all one entry's leftovers.
        live.sort(key=len, reverse=True)
        for start in range(0, len(live), size):
            out.append([q.pop() for q in live[start : start + size]])
    rng.shuffle(out)
    return out


async def fine_tune(base: Path, examples: Sequence[Example], out: Path, onnx_dir: Path, recipe: Recipe) -> Trained:
    """Train ``base`` on ``examples`` into the model folder ``out`` and export it to ``onnx_dir``, in a child process.

    Raises:
        KnowledgeError: the child failed (its error is in the log) or was killed.
    """
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    rows = [asdict(e) for e in examples]
    context = multiprocessing.get_context("spawn")
    child = context.Process(
        target=_train_in_child, args=(str(base), rows, str(out), str(onnx_dir), asdict(recipe)), daemon=True
    )
    child.start()
    try:
        await asyncio.to_thread(child.join)
    finally:
        if child.is_alive():  # the wait was cancelled: so is the training
            child.kill()
            await asyncio.to_thread(child.join)
    report = out / _REPORT
    if child.exitcode != 0 or not report.is_file():
        raise KnowledgeError(f"tuning the model failed (exit code {child.exitcode}); see the log")
    return Trained(**json.loads(report.read_text()))


def _train_in_child(base: str, rows: list[dict[str, str]], out: str, onnx_dir: str, recipe: dict[str, Any]) -> None:
    trained = train(Path(base), [Example(**row) for row in rows], Path(out), Recipe(**recipe))
    cached_export(Path(out), Path(onnx_dir))
    (Path(out) / _REPORT).write_text(json.dumps(asdict(trained)))


def train(base: Path, examples: Sequence[Example], out: Path, recipe: Recipe) -> Trained:
    """Train in this process (torch is imported here); the model folder is saved to ``out``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never look a model up on a hub
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch  # noqa: PLC0415  (tuning only: never imported by the daemon)
    import transformers  # noqa: PLC0415
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415
    from sentence_transformers.sentence_transformer.losses import (  # noqa: PLC0415
        MultipleNegativesRankingLoss,
    )

    transformers.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    started = time.monotonic()
    model = SentenceTransformer(str(base), device="cpu")
    run_time_tokens = model.max_seq_length
    model.max_seq_length = min(recipe.max_tokens, run_time_tokens or recipe.max_tokens)
    loss = MultipleNegativesRankingLoss(model)
    plan = [batches(examples, recipe.batch_size, rng) for _ in range(recipe.epochs)]
    total = sum(len(epoch) for epoch in plan)
    optimiser = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate)
    warmup = max(1, int(total * recipe.warmup))
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: _rate(step, warmup, total))
    model.train()
    losses: list[float] = []
    out_of_time = False
    for epoch in plan:
        for batch in epoch:
            if time.monotonic() - started > recipe.budget_s:
                out_of_time = True
                break
            columns = [[getattr(examples[r], name) for r in batch] for name in ("anchor", "positive", "negative")]
            value = loss([model.preprocess(column) for column in columns], None)
            value.backward()
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            losses.append(float(value.detach()))
        if out_of_time:
            break
    model.eval()
    model.max_seq_length = run_time_tokens  # what the saved config tells the embedders
    model.save(str(out))
    return Trained(
        steps=len(losses),
        epochs=round(len(losses) / max(1, total) * recipe.epochs, 2),
        first_loss=losses[0] if losses else 0.0,
        last_loss=losses[-1] if losses else 0.0,
        seconds=round(time.monotonic() - started, 1),
        out_of_time=out_of_time,
    )


def _rate(step: int, warmup: int, total: int) -> float:
    """The learning rate's share at ``step``: rising to 1 over ``warmup`` steps, then falling to 0 at ``total``."""
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))
