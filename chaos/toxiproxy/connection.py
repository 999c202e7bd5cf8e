"""A client connection accepted by a proxy, joined to its own upstream connection by two links."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
from collections.abc import Callable

from chaos.toxiproxy.link import Link
from chaos.toxiproxy.toxics import Direction, ToxicEntry

StreamPair = tuple[asyncio.StreamReader, asyncio.StreamWriter]

# SO_LINGER on, 0 seconds: close() then sends a RST instead of a FIN
_LINGER_RESET = struct.pack("ii", 1, 0)


class ProxyConnection:
    """Client ⇄ proxy ⇄ upstream: `upstream` link carries client bytes, `downstream` the server's."""

    def __init__(
        self,
        client: StreamPair,
        upstream: StreamPair,
        rng: random.Random,
        on_closed: Callable[[ProxyConnection], None],
    ) -> None:
        self._writers = (client[1], upstream[1])
        self._on_closed = on_closed
        self.links: dict[Direction, Link] = {
            Direction.UPSTREAM: Link(client[0], upstream[1], rng, self.reset),
            Direction.DOWNSTREAM: Link(upstream[0], client[1], rng, self.reset),
        }
        self._watcher: asyncio.Task[None] | None = None

    def start(self, toxics: dict[Direction, list[ToxicEntry]]) -> None:
        for direction, link in self.links.items():
            link.start(toxics[direction])
        self._watcher = asyncio.create_task(self._watch())

    def close(self) -> None:
        """Close both sockets now, dropping whatever the toxics still hold (a disabled proxy does this)."""
        for link in self.links.values():
            link.stop()
        for writer in self._writers:
            writer.transport.abort()

    def reset(self) -> None:
        """Close both sockets with a TCP RST (reset_peer)."""
        for writer in self._writers:
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
        self.close()

    async def _watch(self) -> None:
        await asyncio.gather(*(link.finished.wait() for link in self.links.values()))
        self._on_closed(self)
