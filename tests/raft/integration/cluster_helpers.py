"""In-process clusters of RaftHosts over real gRPC on 127.0.0.1, for the driver tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from raft.driver import GroupOptions, RaftHost
from raft.rocks_log_storage import RocksLogEngine
from raft.transport import add_raft_servicer, grpc_channel_options, grpc_server_options
from raft.types import Entry, EntryType, Snapshot

TICK = 0.02


class ListMachine:
    """Records every applied command; the result of a command is its index."""

    def __init__(self) -> None:
        self.values: list[tuple[int, bytes]] = []
        self._applied = 0
        self.restored_from: list[int] = []

    def apply(self, entries: Sequence[Entry]) -> list[Any]:
        results: list[Any] = []
        for entry in entries:
            if entry.type is EntryType.NORMAL and entry.data:
                self.values.append((entry.index, entry.data))
                results.append(entry.index)
            else:
                results.append(None)
        self._applied = entries[-1].index
        return results

    def snapshot(self) -> bytes:
        return b"\n".join(b"%d:%s" % (index, data) for index, data in self.values)

    def restore(self, snapshot: Snapshot) -> None:
        self.values = []
        for line in snapshot.data.split(b"\n") if snapshot.data else []:
            index, _, data = line.partition(b":")
            self.values.append((int(index), data))
        self._applied = snapshot.index
        self.restored_from.append(snapshot.index)

    @property
    def applied_index(self) -> int:
        return self._applied


@dataclass
class HostNode:
    name: str
    host: RaftHost
    server: grpc.aio.Server
    port: int
    engine: RocksLogEngine | None
    machines: dict[str, ListMachine] = field(default_factory=dict)
    channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)


async def start_host(name: str, data_dir: Path | None) -> HostNode:
    engine = RocksLogEngine(data_dir / name) if data_dir is not None else None
    host = RaftHost(name, engine, tick_interval=TICK)
    server = grpc.aio.server(options=grpc_server_options())
    add_raft_servicer(server, host.transport)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await host.start()
    return HostNode(name, host, server, port, engine)


def connect(nodes: Sequence[HostNode]) -> None:
    """Every node dials every other node it does not dial yet."""
    for node in nodes:
        for peer in nodes:
            if peer is node or peer.name in node.channels:
                continue
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{peer.port}", options=grpc_channel_options())
            node.channels[peer.name] = channel
            node.host.transport.add_peer(peer.name, channel)


async def stop_host(node: HostNode) -> None:
    await node.host.stop()
    await node.server.stop(None)
    for channel in node.channels.values():
        await channel.close()
    if node.engine is not None:
        node.engine.close()


@contextlib.asynccontextmanager
async def running_hosts(names: Sequence[str], data_dir: Path | None) -> AsyncIterator[list[HostNode]]:
    """A host per name, connected to one another over gRPC, stopped on the way out."""
    nodes = [await start_host(name, data_dir) for name in names]
    try:
        connect(nodes)
        yield nodes
    finally:
        for node in nodes:
            await stop_host(node)


def add_group(
    nodes: Sequence[HostNode], group: str, voters: Sequence[str], options: GroupOptions | None = None
) -> None:
    for node in nodes:
        machine = ListMachine()
        node.machines[group] = machine
        node.host.add_group(group, machine, voters=voters, options=options or GroupOptions())


async def wait_for_leader(nodes: Sequence[HostNode], group: str, timeout: float = 10.0) -> HostNode:
    """Until one of `nodes` leads `group` and the others know it."""

    async def agreed() -> HostNode:
        while True:
            leaders = [n for n in nodes if n.host.is_leader(group)]
            if len(leaders) == 1 and all(n.host.leader_of(group) == leaders[0].name for n in nodes):
                return leaders[0]
            changes = [asyncio.ensure_future(n.host.wait_leadership_change(group)) for n in nodes]
            try:
                await asyncio.wait(changes, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for change in changes:
                    change.cancel()

    return await asyncio.wait_for(agreed(), timeout)


async def wait_applied(nodes: Sequence[HostNode], group: str, index: int, timeout: float = 10.0) -> None:
    await asyncio.gather(*(n.host.wait_applied(group, index, timeout) for n in nodes))
