"""One named proxy: a listener, the toxics of each direction and the connections it is carrying."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import structlog

from chaos.toxiproxy.addresses import join_host_port, resolve_listen, split_host_port
from chaos.toxiproxy.connection import ProxyConnection
from chaos.toxiproxy.errors import TOXIC_ALREADY_EXISTS, TOXIC_NOT_FOUND, internal_error
from chaos.toxiproxy.toxics import Direction, ToxicEntry

log = structlog.get_logger("toxiproxy")


class Proxy:
    """Listens on `listen` and joins each client to a new connection to `upstream`.

    Mutating methods are not safe to interleave; the collection serialises them.
    """

    def __init__(self, name: str, listen: str, upstream: str, rng: random.Random) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self._rng = rng
        self._server: asyncio.Server | None = None
        self._connections: set[ProxyConnection] = set()
        self._toxics: dict[Direction, list[ToxicEntry]] = {direction: [] for direction in Direction}

    # --- listening ---------------------------------------------------------

    async def start(self) -> None:
        """Listen; `listen` becomes the bound address (so a restart binds the same port)."""
        if self.enabled:
            return
        try:
            host, port = resolve_listen(self.listen)
            self._server = await asyncio.start_server(self._accept, host, port)
        except (OSError, ValueError) as exc:
            raise internal_error(f"listen tcp {self.listen}: {_reason(exc)}") from exc
        bound = self._server.sockets[0].getsockname()
        self.listen = join_host_port(bound[0], bound[1])
        self.enabled = True
        log.info("proxy started", proxy=self.name, listen=self.listen, upstream=self.upstream)

    async def stop(self) -> None:
        """Stop listening and close every connection through the proxy."""
        if not self.enabled:
            return
        self.enabled = False
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for connection in list(self._connections):
            connection.close()
        self._connections.clear()
        if server is not None:
            await server.wait_closed()
        log.info("proxy stopped", proxy=self.name)

    async def update(self, listen: str, upstream: str, enabled: bool) -> None:
        """Apply a new listen/upstream (restarting if either differs) and the wanted enabled state."""
        if self.differs(listen, upstream):
            await self.stop()
            self.listen, self.upstream = listen, upstream
        if enabled and not self.enabled:
            await self.start()
        elif not enabled:
            await self.stop()

    def differs(self, listen: str, upstream: str) -> bool:
        """Whether `listen` (resolved) or `upstream` is not what this proxy has now."""
        try:
            host, port = resolve_listen(listen)
        except ValueError as exc:
            raise internal_error(str(exc)) from exc
        except OSError as exc:
            raise internal_error(f"address {listen}: {_reason(exc)}") from exc
        return join_host_port(host, port) != self.listen or upstream != self.upstream

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        client = client_writer.get_extra_info("peername")
        try:
            host, port = split_host_port(self.upstream)
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except (OSError, ValueError) as exc:
            log.warning("upstream unreachable", proxy=self.name, upstream=self.upstream, error=_reason(exc))
            client_writer.transport.abort()
            return
        if not self.enabled:
            # the proxy was disabled while the upstream was being dialled
            upstream_writer.transport.abort()
            client_writer.transport.abort()
            return
        connection = ProxyConnection(
            (client_reader, client_writer), (upstream_reader, upstream_writer), self._rng, self._forget
        )
        self._connections.add(connection)
        connection.start({direction: list(entries) for direction, entries in self._toxics.items()})
        log.debug("client connected", proxy=self.name, client=client)

    def _forget(self, connection: ProxyConnection) -> None:
        self._connections.discard(connection)

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    # --- toxics --------------------------------------------------------------

    def toxics(self) -> list[ToxicEntry]:
        """Upstream toxics first, then downstream, each in the order they were added (Toxiproxy's order)."""
        return [entry for direction in Direction for entry in self._toxics[direction]]

    def get_toxic(self, name: str) -> ToxicEntry:
        for entry in self.toxics():
            if entry.name == name:
                return entry
        raise TOXIC_NOT_FOUND

    def has_toxic(self, name: str) -> bool:
        return any(entry.name == name for entry in self.toxics())

    def add_toxic(self, entry: ToxicEntry) -> None:
        if self.has_toxic(entry.name):
            raise TOXIC_ALREADY_EXISTS
        self._toxics[entry.stream].append(entry)
        for connection in self._connections:
            connection.links[entry.stream].add_toxic(entry)

    async def update_toxic(self, entry: ToxicEntry) -> None:
        chain = self._toxics[entry.stream]
        chain[[existing.name for existing in chain].index(entry.name)] = entry
        await asyncio.gather(
            *(connection.links[entry.stream].update_toxic(entry) for connection in list(self._connections))
        )

    async def remove_toxic(self, name: str) -> None:
        entry = self.get_toxic(name)
        self._toxics[entry.stream].remove(entry)
        await asyncio.gather(
            *(connection.links[entry.stream].remove_toxic(name) for connection in list(self._connections))
        )

    async def remove_all_toxics(self) -> None:
        for entry in self.toxics():
            await self.remove_toxic(entry.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [entry.to_json() for entry in self.toxics()],
        }


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc)
