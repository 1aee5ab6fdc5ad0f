"""Micro-batching: concurrent questions share one call to the model; a lone one waits no longer than the window."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import RememberingEmbedder
from vigil.core.errors import StartupError
from vigil.knowledge.batching import MicroBatcher
from vigil.knowledge.embedding import Embedder, Vectors, bundled_model_path
from vigil.knowledge.onnx_embedding import OnnxEmbedder

QUESTIONS = [
    "how do I reset my password",
    "Internet's completely down",
    "Hub has a solid amber light",
    "can i keep my number if i switch",
    "when is my bill taken",
    "need a new sim",
]


class Counting:
    """The real model, counting its calls and what each one embedded; ``gate`` holds a call until it is set."""

    def __init__(self, model: Embedder) -> None:
        self._model = model
        self.name = model.name
        self.dimensions = model.dimensions
        self.batches: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()

    def load(self) -> None:
        self._model.load()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.batches.append(list(texts))
        self.started.set()
        self.gate.wait(timeout=10)
        return self._model.embed(texts)

    async def until_batches(self, count: int) -> None:
        """Wait until ``count`` batches have reached the model (started, maybe held at the gate)."""
        async with asyncio.timeout(5):
            while len(self.batches) < count:
                await asyncio.sleep(0.005)


@pytest.fixture
def counting(embedder: RememberingEmbedder) -> Counting:
    return Counting(embedder)


async def test_concurrent_questions_are_embedded_in_one_batch(counting: Counting, embedder: RememberingEmbedder):
    batcher = MicroBatcher(counting, wait_s=0.05, max_batch=32)
    vectors = await asyncio.gather(*(batcher.embed(q) for q in QUESTIONS))
    assert counting.batches == [QUESTIONS]
    for question, vector in zip(QUESTIONS, vectors, strict=True):
        assert vector.shape == (384,)
        assert np.array_equal(vector, embedder.embed([question])[0])


async def test_questions_that_arrive_within_the_window_join_the_batch(counting: Counting):
    batcher = MicroBatcher(counting, wait_s=0.2, max_batch=32)
    first = asyncio.ensure_future(batcher.embed("how do I reset my password"))
    await asyncio.sleep(0.02)
    second = asyncio.ensure_future(batcher.embed("when is my bill taken"))
    await asyncio.gather(first, second)
    assert counting.batches == [["how do I reset my password", "when is my bill taken"]]


async def test_a_lone_question_leaves_when_the_window_closes(counting: Counting):
    batcher = MicroBatcher(counting, wait_s=0.01, max_batch=32)
    # It does not wait for the batch to fill: were it to, this would time out.
    vector = await asyncio.wait_for(batcher.embed("how do I reset my password"), timeout=5)
    assert vector.shape == (384,)
    assert counting.batches == [["how do I reset my password"]]


async def test_a_full_batch_leaves_at_once_and_the_rest_follow_in_batches_no_larger(counting: Counting):
    batcher = MicroBatcher(counting, wait_s=60, max_batch=4)  # a window no test would wait out
    texts = [f"question number {n}" for n in range(10)]
    vectors = await asyncio.wait_for(asyncio.gather(*(batcher.embed(t) for t in texts)), timeout=10)
    assert [len(b) for b in counting.batches] == [4, 4, 2]
    assert [t for b in counting.batches for t in b] == texts
    assert len(vectors) == 10


async def test_questions_that_arrive_while_a_batch_is_encoded_leave_together_after_it(counting: Counting):
    batcher = MicroBatcher(counting, wait_s=0.001, max_batch=32)
    counting.gate.clear()
    first = asyncio.ensure_future(batcher.embed("how do I reset my password"))
    await asyncio.to_thread(counting.started.wait, 5)  # the model is busy with the first question
    later = [asyncio.ensure_future(batcher.embed(q)) for q in QUESTIONS[1:]]
    await asyncio.sleep(0.05)  # many windows go by: they wait for the model, not in batches of their own
    counting.gate.set()
    await asyncio.wait_for(asyncio.gather(first, *later), timeout=10)
    assert counting.batches == [["how do I reset my password"], QUESTIONS[1:]]


async def test_an_error_of_the_model_reaches_every_caller_of_the_batch(tmp_path: Path):
    batcher = MicroBatcher(OnnxEmbedder(tmp_path / "no-model", cache_dir=tmp_path / "cache"), wait_s=0.01)
    results = await asyncio.gather(*(batcher.embed(q) for q in QUESTIONS[:3]), return_exceptions=True)
    assert [type(r) for r in results] == [StartupError] * 3
    assert all("no embedding model" in str(r) for r in results)


async def test_the_batcher_serves_again_after_a_failed_batch(tmp_path: Path, embedder: RememberingEmbedder):
    folder = tmp_path / "model"  # named as the shipped folder is, so its cached export is the one loaded
    batcher = MicroBatcher(OnnxEmbedder(folder), wait_s=0.01)
    with pytest.raises(StartupError):
        await batcher.embed("how do I reset my password")
    folder.symlink_to(bundled_model_path())  # the model folder is back
    vector = await asyncio.wait_for(batcher.embed("how do I reset my password"), timeout=30)
    assert np.allclose(vector, embedder.embed(["how do I reset my password"])[0], atol=1e-6)


async def test_a_cancelled_question_leaves_the_batch_and_the_others_get_their_answers(counting: Counting):
    batcher = MicroBatcher(counting, wait_s=0.05, max_batch=32)
    tasks = [asyncio.ensure_future(batcher.embed(q)) for q in QUESTIONS[:3]]
    await asyncio.sleep(0)  # all three are waiting for the window
    tasks[1].cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(done[1], asyncio.CancelledError)
    assert counting.batches == [[QUESTIONS[0], QUESTIONS[2]]]
    assert all(isinstance(v, np.ndarray) for v in (done[0], done[2]))


async def test_a_question_cancelled_while_its_batch_is_encoded_does_not_disturb_the_others(counting: Counting):
    batcher = MicroBatcher(counting, wait_s=0.01, max_batch=32)
    counting.gate.clear()
    tasks = [asyncio.ensure_future(batcher.embed(q)) for q in QUESTIONS[:3]]
    await asyncio.to_thread(counting.started.wait, 5)
    tasks[0].cancel()
    counting.gate.set()
    done = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=10)
    assert isinstance(done[0], asyncio.CancelledError)
    assert all(isinstance(v, np.ndarray) and v.shape == (384,) for v in done[1:])
    assert counting.batches == [QUESTIONS[:3]]
    # And the next question is served as usual.
    assert (await asyncio.wait_for(batcher.embed("ok"), timeout=5)).shape == (384,)


async def test_two_workers_embed_two_batches_at_once(counting: Counting, embedder: RememberingEmbedder):
    batcher = MicroBatcher(counting, wait_s=0.001, max_batch=32, workers=2)
    counting.gate.clear()  # the model holds every batch until the gate opens
    first = asyncio.ensure_future(batcher.embed(QUESTIONS[0]))
    await counting.until_batches(1)
    later = [asyncio.ensure_future(batcher.embed(q)) for q in QUESTIONS[1:]]
    await counting.until_batches(2)  # with one worker, this batch would wait for the first (and this time out)
    assert counting.batches == [QUESTIONS[:1], QUESTIONS[1:]]
    counting.gate.set()
    vectors = await asyncio.wait_for(asyncio.gather(first, *later), timeout=10)
    for question, vector in zip(QUESTIONS, vectors, strict=True):
        assert np.array_equal(vector, embedder.embed([question])[0])


async def test_no_more_batches_run_at_once_than_there_are_workers(counting: Counting):
    batcher = MicroBatcher(counting, wait_s=0.001, max_batch=2, workers=2)
    counting.gate.clear()
    tasks = [asyncio.ensure_future(batcher.embed(q)) for q in QUESTIONS]  # three batches' worth
    await counting.until_batches(2)
    await asyncio.sleep(0.05)  # many windows: the third batch waits for a worker, not for its window
    assert len(counting.batches) == 2
    counting.gate.set()
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
    assert [len(b) for b in counting.batches] == [2, 2, 2]
    assert sorted(t for b in counting.batches for t in b) == sorted(QUESTIONS)


def test_a_batcher_needs_a_worker(counting: Counting):
    with pytest.raises(ValueError):
        MicroBatcher(counting, workers=0)
