"""Micro-batching: what concurrent conversations ask of the model and of the vector index goes in one call.

A batch of 16 short questions costs the model little more than one question does, and Chroma answers 16 query
vectors in one call for little more than one (its per-call overhead, ~3 ms, is most of a small index's query), so
under load a process answers many more questions per second if it batches them. An item waits at most ``wait_s`` (a
few milliseconds) for others to join it; a batch leaves early when it reaches ``max_batch``. Each batcher runs up to
``workers`` batches at a time, each on a worker thread, off the event loop: while they run, the next one gathers, and
leaves as soon as a worker is free (its items have waited that long already), so a busy process makes large batches
and an idle one small ones.

The model's threads release the GIL while they compute, so two workers embed on two cores at once
(``MicroBatcher``, ``VIGIL_KNOWLEDGE__EMBEDDING_WORKERS``). One is the default: on a 2-core machine the event loop's
share of each question already keeps the second core busy, and two workers made smaller batches for no more
questions a second (docs/benchmarks.md, "Questions on two cores").

Each caller awaits its own future: an error of the batch reaches every caller in it, and a caller that is cancelled
(a conversation that moved on) leaves the batch without disturbing the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

from vigil.knowledge.embedding import Embedder, Vectors

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass(frozen=True, slots=True)
class _Waiting(Generic[Item, Result]):
    item: Item
    future: asyncio.Future[Result]


class Batcher(Generic[Item, Result]):
    """Runs ``run`` (one result per item, in order) on batches of the items that concurrent callers submit."""

    def __init__(
        self,
        run: Callable[[list[Item]], Sequence[Result]],
        *,
        wait_s: float = 0.003,
        max_batch: int = 32,
        executor: Executor | None = None,
        workers: int = 1,
        name: str = "vigil-batch",
    ) -> None:
        """``workers``: how many batches run at once (``run`` must then be safe to call from as many threads);
        ``executor`` runs them (default: ``workers`` threads of this batcher's own, started as batches need them)."""
        if workers < 1:
            raise ValueError("a batcher needs at least one worker")
        self._run_batch = run
        self._wait_s = wait_s
        self._max_batch = max_batch
        self._workers = workers
        self._waiting: list[_Waiting[Item, Result]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._running = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._executor = executor or ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)

    @property
    def _busy(self) -> bool:
        """Whether every worker is running a batch (what gathers now leaves when one is done)."""
        return self._running >= self._workers

    async def submit(self, item: Item) -> Result:
        """``item``'s result (one row of the batch it joined)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Result] = loop.create_future()
        self._waiting.append(_Waiting(item, future))
        if len(self._waiting) >= self._max_batch and not self._busy:
            self._flush()
        elif self._timer is None and not self._busy:
            self._timer = loop.call_later(self._wait_s, self._flush)
        return await future

    def _flush(self) -> None:
        """Send what is waiting, in batches of up to ``max_batch``, to the free workers; with none free, the rest
        leaves when one is."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiting and not self._busy:
            batch, self._waiting = self._waiting[: self._max_batch], self._waiting[self._max_batch :]
            batch = [w for w in batch if not w.future.done()]  # cancelled callers leave the batch
            if batch:
                self._running += 1
                task = asyncio.get_running_loop().create_task(self._run(batch))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[_Waiting[Item, Result]]) -> None:
        try:
            loop = asyncio.get_running_loop()
            results = await loop.run_in_executor(self._executor, self._run_batch, [w.item for w in batch])
        except asyncio.CancelledError:  # the loop is closing: so are the callers
            for waiting in batch:
                waiting.future.cancel()
            raise
        except Exception as exc:  # the batch's error is every caller's
            for waiting in batch:
                if not waiting.future.done():
                    waiting.future.set_exception(exc)
        else:
            for result, waiting in zip(results, batch, strict=True):
                if not waiting.future.done():
                    waiting.future.set_result(result)
        finally:
            self._running -= 1
            self._next()

    def _next(self) -> None:
        """After a batch: those who gathered meanwhile leave at once (those still to come wait their window)."""
        if self._waiting:
            self._flush()


class MicroBatcher:
    """Embeds one text per call, gathering concurrent calls into batches for ``embedder``, ``workers`` batches at
    once (each on a thread of its own: ``embedder.embed`` must be safe to call from several threads, as both of
    vigil's embedders are)."""

    def __init__(self, embedder: Embedder, *, wait_s: float = 0.003, max_batch: int = 32, workers: int = 1) -> None:
        self._embedder = embedder
        self._batcher: Batcher[str, Vectors] = Batcher(
            self._rows, wait_s=wait_s, max_batch=max_batch, workers=workers, name="vigil-embed"
        )

    async def embed(self, text: str) -> Vectors:
        """The vector of ``text`` (one row of the batch it joined)."""
        return await self._batcher.submit(text)

    def _rows(self, texts: list[str]) -> list[Vectors]:
        vectors = self._embedder.embed(texts)
        return [vectors[row].copy() for row in range(len(texts))]  # a row each, not views that keep the batch alive
