"""Micro-batching: questions from concurrent conversations are embedded together, in one call to the model.

A batch of 16 short questions costs the model little more than one question does, so under load a process answers
many more questions per second if it embeds them together. A question waits at most ``wait_s`` (a few milliseconds)
for others to join it; a batch leaves early when it reaches ``max_batch``. The model runs on one worker thread of
its own, off the event loop: while it encodes a batch, the next one gathers, and leaves as soon as the worker is free
(its questions have waited that long already), so a busy process makes large batches and an idle one small ones.

Each caller awaits its own future: an error of the model reaches every caller of that batch, and a caller that is
cancelled (a conversation that moved on) leaves the batch without disturbing the others.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from vigil.knowledge.embedding import Embedder, Vectors


@dataclass(frozen=True, slots=True)
class _Waiting:
    text: str
    future: asyncio.Future[Vectors]


class MicroBatcher:
    """Embeds one text per call, gathering concurrent calls into batches for ``embedder``."""

    def __init__(self, embedder: Embedder, *, wait_s: float = 0.003, max_batch: int = 32) -> None:
        self._embedder = embedder
        self._wait_s = wait_s
        self._max_batch = max_batch
        self._waiting: list[_Waiting] = []
        self._timer: asyncio.TimerHandle | None = None
        self._busy = False
        self._tasks: set[asyncio.Task[None]] = set()
        # One thread (started on the first batch): batches run one after another, and the next gathers meanwhile.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vigil-embed")

    async def embed(self, text: str) -> Vectors:
        """The vector of ``text`` (one row of the batch it joined)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Vectors] = loop.create_future()
        self._waiting.append(_Waiting(text, future))
        if len(self._waiting) >= self._max_batch and not self._busy:
            self._flush()
        elif self._timer is None and not self._busy:
            self._timer = loop.call_later(self._wait_s, self._flush)
        return await future

    def _flush(self) -> None:
        """Send what is waiting (up to ``max_batch``) to the worker, unless it is busy: then the batch leaves when it
        is free."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._busy:
            return
        batch, self._waiting = self._waiting[: self._max_batch], self._waiting[self._max_batch :]
        batch = [w for w in batch if not w.future.done()]  # cancelled callers leave the batch
        if not batch:
            self._next()
            return
        self._busy = True
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[_Waiting]) -> None:
        try:
            loop = asyncio.get_running_loop()
            vectors = await loop.run_in_executor(self._worker, self._embedder.embed, [w.text for w in batch])
        except asyncio.CancelledError:  # the loop is closing: so are the callers
            for waiting in batch:
                waiting.future.cancel()
            raise
        except Exception as exc:  # the model's error is every caller's
            for waiting in batch:
                if not waiting.future.done():
                    waiting.future.set_exception(exc)
        else:
            for row, waiting in enumerate(batch):
                if not waiting.future.done():
                    waiting.future.set_result(vectors[row].copy())
        finally:
            self._busy = False
            self._next()

    def _next(self) -> None:
        """After a batch: those who gathered meanwhile leave at once."""
        self._waiting = [w for w in self._waiting if not w.future.done()]
        if self._waiting:
            self._flush()
