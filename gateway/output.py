"""Client output written at the end of the work that produced it.

A client connection buffers what it is sent and registers here once. The
buffers are written when the batch of work that filled them ends (a client's
read, a frame from a peer node), so a message that crossed a route reaches
its subscriber before the loop turns to anything else, such as setting up the
route's next read. Output produced elsewhere (internal services' replies,
timers) is written on the loop's next turn. Either way everything buffered
meanwhile goes out in one write per connection.
"""

from __future__ import annotations

import asyncio
from typing import Protocol


class BufferedOutput(Protocol):
    def flush_output(self) -> None: ...


class OutputFlusher:
    def __init__(self) -> None:
        self._waiting: list[BufferedOutput] = []
        self._turn_scheduled = False

    def add(self, connection: BufferedOutput) -> None:
        """`connection` has output buffered; the caller adds it once until it is flushed."""
        self._waiting.append(connection)
        if not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._on_turn)

    def flush(self) -> None:
        if not self._waiting:
            return
        waiting, self._waiting = self._waiting, []
        for connection in waiting:
            connection.flush_output()

    def _on_turn(self) -> None:
        self._turn_scheduled = False
        self.flush()
