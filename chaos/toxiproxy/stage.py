"""One toxic's place in one direction of one connection (Toxiproxy's "stub").

Stages are chained by queues: the reader feeds the first stage's input, each
stage puts what it lets through on its `output`, the last one feeds the
writer. Queues are unbounded so a put never waits; that makes rewiring the
chain (adding or removing a toxic on a live connection) a plain attribute
assignment between two awaits, which cannot lose or reorder a chunk. Memory
is bounded by the link instead: its reader stops reading while too many bytes
are in flight.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Protocol


@dataclass(slots=True)
class Chunk:
    """Bytes read from the source, with the loop time they were read (latency counts from it)."""

    data: bytes
    timestamp: float


# `None` in a queue is the end of the stream: whoever receives it closes downstream.
Item = Chunk | None
ItemQueue = asyncio.Queue[Item]


class Behaviour(Protocol):
    """What a stage runs: a toxic's effect, or a plain pass-through."""

    async def pipe(self, stage: Stage) -> None: ...


class LinkHooks(Protocol):
    """What a stage tells the link it belongs to."""

    def bytes_dropped(self, count: int) -> None: ...

    def reset_connection(self) -> None: ...


class Stage:
    """Runs one behaviour between `input` and `output`; can be interrupted without losing what it holds."""

    def __init__(self, output: ItemQueue, hooks: LinkHooks, rng: random.Random, state: object) -> None:
        self.input: ItemQueue = asyncio.Queue()
        self.output = output
        self.rng = rng
        # per-connection memory of a toxic that survives updates (limit_data's byte count)
        self.state = state
        self.closed = False
        self._hooks = hooks
        self._held: list[Item] = []
        self._task: asyncio.Task[None] | None = None

    # --- used by the link -------------------------------------------------

    def start(self, behaviour: Behaviour) -> None:
        self._task = asyncio.create_task(self._run(behaviour))

    async def interrupt(self) -> None:
        """Stop the running behaviour; what it was holding goes on to `output`, in order."""
        task = self._task
        self._task = None
        if task is None or task.done():
            return
        task.cancel()
        await asyncio.wait([task])

    def cancel(self) -> None:
        """Stop for good (the connection is gone); nothing is flushed anywhere that matters."""
        if self._task is not None:
            self._task.cancel()
            self._task = None

    # --- used by behaviours -------------------------------------------------

    async def receive(self, timeout: float | None = None) -> Item:
        """The next chunk, or None at the end of the stream; TimeoutError if `timeout` seconds pass first."""
        if timeout is None or not self.input.empty():
            return await self.input.get()
        getter = asyncio.ensure_future(self.input.get())
        try:
            done, _ = await asyncio.wait([getter], timeout=max(timeout, 0.0))
        finally:
            # a getter cancelled before it ran leaves its item in the queue
            if not getter.done():
                getter.cancel()
        if not done:
            raise TimeoutError
        return getter.result()

    def forward(self, chunk: Chunk) -> None:
        self.output.put_nowait(chunk)

    def hold(self, *items: Item) -> None:
        """Mark `items` as in this stage's hands: an interruption passes them on instead of losing them."""
        self._held = list(items)

    def release(self) -> None:
        """Pass the held items on, in order (None closes downstream)."""
        items, self._held = self._held, []
        for item in items:
            if item is None:
                self.close()
            else:
                self.forward(item)

    def drop(self, chunk: Chunk) -> None:
        """Throw `chunk` away on purpose (timeout, limit_data), so the link stops counting it as in flight."""
        self._hooks.bytes_dropped(len(chunk.data))

    def close(self) -> None:
        """End the stream here: everything downstream sees the end and the destination is closed."""
        if not self.closed:
            self.closed = True
            self.output.put_nowait(None)

    def reset(self) -> None:
        """Abort the whole connection with a TCP RST on both sides."""
        self.closed = True
        self._hooks.reset_connection()

    async def _run(self, behaviour: Behaviour) -> None:
        try:
            await behaviour.pipe(self)
        except asyncio.CancelledError:
            self.release()
            raise
