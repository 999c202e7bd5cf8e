"""One direction of one proxied connection: reader → one stage per toxic → writer.

The link owns the chain of stages and rewires it when a toxic is added,
updated or removed on a live connection, so that nothing in flight is lost
or reordered (only toxics that cut drop bytes). The reader stops reading
while more than `HIGH_WATER` bytes are in flight, which pushes back on the
sender through TCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable

from chaos.toxiproxy.stage import Chunk, ItemQueue, Stage
from chaos.toxiproxy.toxics import NoopToxic, Toxic, ToxicEntry

READ_SIZE = 32 * 1024
HIGH_WATER = 4 * 1024 * 1024
LOW_WATER = 1 * 1024 * 1024

_PASS_THROUGH = NoopToxic()


class Link:
    """Copies `source` to `dest` through the toxics of one direction."""

    def __init__(
        self,
        source: asyncio.StreamReader,
        dest: asyncio.StreamWriter,
        rng: random.Random,
        on_reset: Callable[[], None],
    ) -> None:
        self._source = source
        self._dest = dest
        self._rng = rng
        self._on_reset = on_reset
        self._sink: ItemQueue = asyncio.Queue()
        # where the reader puts what it reads: the first stage's input, or the sink
        self.output: ItemQueue = self._sink
        self._stages: list[tuple[ToxicEntry, Stage]] = []
        self._in_flight = 0
        self._room = asyncio.Event()
        self._room.set()
        self._tasks: list[asyncio.Task[None]] = []
        self.finished = asyncio.Event()

    def start(self, entries: list[ToxicEntry]) -> None:
        for entry in entries:
            self._append_stage(entry)
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._write())]

    def stop(self) -> None:
        """Stop every task of this link now (the connection is being torn down)."""
        for task in self._tasks:
            task.cancel()
        for _, stage in self._stages:
            stage.cancel()
        self.finished.set()

    # --- toxics on a live link -------------------------------------------------

    def add_toxic(self, entry: ToxicEntry) -> None:
        """New toxics go last: data already past the others is not held back by it."""
        if not self.finished.is_set():
            self._append_stage(entry)

    async def update_toxic(self, entry: ToxicEntry) -> None:
        """Restart the toxic's stage with new attributes (and a new toxicity draw), keeping its state."""
        index = self._index_of(entry.name)
        if index is None or self.finished.is_set():
            return
        _, stage = self._stages[index]
        await stage.interrupt()
        self._stages[index] = (entry, stage)
        if not stage.closed and not self.finished.is_set():
            stage.start(self._behaviour(entry))

    async def remove_toxic(self, name: str) -> None:
        index = self._index_of(name)
        if index is None or self.finished.is_set():
            return
        entry, stage = self._stages[index]
        await stage.interrupt()
        if self.finished.is_set():
            return
        del self._stages[index]
        if entry.toxic.closes_on_removal:
            # Toxiproxy's timeout closes the connections it was on when it is removed
            stage.close()
            return
        if stage.closed:
            return
        # No await from here on: nothing can be put on stage.input while it is emptied and bypassed.
        while not stage.input.empty():
            stage.output.put_nowait(stage.input.get_nowait())
        self._set_output_of(index - 1, stage.output)

    # --- internals ---------------------------------------------------------

    def _append_stage(self, entry: ToxicEntry) -> None:
        stage = Stage(self._sink, self, self._rng, entry.toxic.new_state())
        self._set_output_of(len(self._stages) - 1, stage.input)
        self._stages.append((entry, stage))
        stage.start(self._behaviour(entry))

    def _behaviour(self, entry: ToxicEntry) -> Toxic:
        # toxicity is drawn per connection each time the toxic starts on it, as Toxiproxy does
        return entry.toxic if self._rng.random() < entry.toxicity else _PASS_THROUGH

    def _set_output_of(self, index: int, queue: ItemQueue) -> None:
        """Point the stage at `index` (-1 is the reader) at `queue`."""
        if index < 0:
            self.output = queue
        else:
            self._stages[index][1].output = queue

    def _index_of(self, name: str) -> int | None:
        for index, (entry, _) in enumerate(self._stages):
            if entry.name == name:
                return index
        return None

    # LinkHooks, for the stages
    def bytes_dropped(self, count: int) -> None:
        self._account(-count)

    def reset_connection(self) -> None:
        self._on_reset()

    def _account(self, delta: int) -> None:
        self._in_flight += delta
        if self._in_flight >= HIGH_WATER:
            self._room.clear()
        elif self._in_flight <= LOW_WATER:
            self._room.set()

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                await self._room.wait()
                data = await self._source.read(READ_SIZE)
                if not data:
                    break
                self._account(len(data))
                self.output.put_nowait(Chunk(data, loop.time()))
        except (ConnectionError, OSError):
            pass
        self.output.put_nowait(None)

    async def _write(self) -> None:
        try:
            while (chunk := await self._sink.get()) is not None:
                if chunk.data:
                    self._dest.write(chunk.data)
                    await self._dest.drain()
                    self._account(-len(chunk.data))
        except (ConnectionError, OSError):
            pass
        finally:
            # Toxiproxy closes the destination outright at the end of a direction (no half-close)
            with contextlib.suppress(Exception):
                self._dest.close()
            for _, stage in self._stages:
                stage.cancel()
            reader = self._tasks[0] if self._tasks else None
            if reader is not None and reader is not asyncio.current_task():
                reader.cancel()
            self.finished.set()
