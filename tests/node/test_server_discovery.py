"""A client learns the other servers of a cluster as they join it (INFO connect_urls), as nats-server's
clients do: the same scenario against three nats-server 2.15.1 servers routed to each other and against a
3-node jetraft cluster, each started one server at a time with a client already on the first.

nats-py's own ClusterDiscoveryTest asks this of a cluster the harness builds from `--routes`; here both
sides are built from their own configuration, and what the client saw is compared."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import nats
import pytest

from local.cluster import LocalCluster, plan_free_nodes
from local.ports import HOST, free_port_base
from tests.node.reference_server import NATS_SERVER, stop_servers

pytestmark = pytest.mark.asyncio

JOIN_TIMEOUT = 30.0  # seconds for a started server to serve, and for the client to hear of it


@dataclass(frozen=True)
class Seen:
    discovered_after_first: list[int]  # client ports of the discovered servers, once the second had joined
    discovered_after_second: list[int]
    callbacks: int  # discovered_server_cb calls
    servers: int  # the client's server pool


async def _serving(port: int, timeout: float = JOIN_TIMEOUT) -> None:
    """Until the client port at `port` sends its INFO (a cluster member serves its clients alone too)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        with contextlib.suppress(OSError):
            reader, writer = await asyncio.open_connection(HOST, port)
            try:
                if await asyncio.wait_for(reader.read(5), 5) == b"INFO ":
                    return
            finally:
                writer.close()
        if loop.time() > deadline:
            raise AssertionError(f"nothing served on {HOST}:{port} within {timeout}s")
        await asyncio.sleep(0.05)


async def _joining(ports: list[int], start: Callable[[int], Awaitable[None]]) -> Seen:
    """A client on the first server while the second and third are started: what it learns."""
    heard = asyncio.Event()
    callbacks = 0

    async def discovered() -> None:
        nonlocal callbacks
        callbacks += 1
        heard.set()

    await start(0)
    nc = await nats.connect(
        f"nats://{HOST}:{ports[0]}", discovered_server_cb=discovered, allow_reconnect=False
    )
    try:

        def discovered_ports() -> list[int]:
            return sorted(uri.port for uri in nc.discovered_servers if uri.port is not None)

        seen: list[list[int]] = []
        for index in (1, 2):
            await start(index)
            while ports[index] not in discovered_ports():
                heard.clear()
                await asyncio.wait_for(heard.wait(), JOIN_TIMEOUT)
            seen.append(discovered_ports())
        return Seen(seen[0], seen[1], callbacks, len(nc.servers))
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def _nats_servers(tmp_path: Path) -> AsyncIterator[tuple[list[int], Callable[[int], Awaitable[None]]]]:
    base = free_port_base(6)
    client_ports, cluster_ports = list(range(base, base + 3)), list(range(base + 3, base + 6))
    routes = ", ".join(f"nats://{HOST}:{port}" for port in cluster_ports)
    procs: list[subprocess.Popen[bytes]] = []

    async def start(index: int) -> None:
        config = tmp_path / f"s{index}.conf"
        config.write_text(
            f"listen: {HOST}:{client_ports[index]}\nserver_name: s{index}\n"
            f"cluster {{ name: C, listen: {HOST}:{cluster_ports[index]}, routes: [{routes}] }}\n"
        )
        with open(tmp_path / f"s{index}.log", "ab") as log:
            procs.append(
                subprocess.Popen(
                    [str(NATS_SERVER), "-c", str(config)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        await _serving(client_ports[index])

    try:
        yield client_ports, start
    finally:
        await stop_servers(procs)


@contextlib.asynccontextmanager
async def _jetraft_nodes(tmp_path: Path) -> AsyncIterator[tuple[list[int], Callable[[int], Awaitable[None]]]]:
    specs = plan_free_nodes(3, 0)
    cluster = LocalCluster(specs, tmp_path / "data")

    async def start(index: int) -> None:
        cluster.start_node(specs[index].name)
        await _serving(specs[index].client_port)

    try:
        yield [spec.client_port for spec in specs], start
    finally:
        cluster.stop()


async def test_a_client_learns_each_server_as_it_joins_as_on_nats_server(tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    (tmp_path / "ours").mkdir()
    async with _nats_servers(tmp_path / "ref") as (ports, start):
        theirs = await _joining(ports, start)
        reference = (ports[1:2], ports[1:3])
    async with _jetraft_nodes(tmp_path / "ours") as (ports, start):
        ours = await _joining(ports, start)
        expected = (ports[1:2], ports[1:3])

    # each side's client knows the servers started after it connected, and only those, by their client ports
    assert (theirs.discovered_after_first, theirs.discovered_after_second) == reference
    assert (ours.discovered_after_first, ours.discovered_after_second) == expected
    assert ours.servers == theirs.servers == 3
    assert ours.callbacks == theirs.callbacks
