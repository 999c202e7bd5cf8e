"""Start gateway-only nodes, or reference nats-servers, as child processes on 127.0.0.1.

For the integration tests and `bench/gateway_bench.py`: both need a cluster of
real processes, started on free ports, awaited until they are really ready
(our nodes announce it on stdout; nats-server says so in its log), and
stopped by PID whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local.ports import HOST, free_port_base

NATS_SERVER = Path(sys.executable).parent / "nats-server"
READY_TIMEOUT = 20.0


def _distinct_ports(names: Sequence[str], cluster: bool) -> tuple[dict[str, int], dict[str, int]]:
    """Client ports and (for a cluster) route ports, all distinct: one block, since separate probes
    may hand out the same free port twice."""
    base = free_port_base(2 * len(names))
    ports = {name: base + i for i, name in enumerate(names)}
    cluster_ports = {name: base + len(names) + i for i, name in enumerate(names)} if cluster else {}
    return ports, cluster_ports


@dataclass
class NodeProcess:
    name: str
    port: int
    cluster_port: int
    proc: asyncio.subprocess.Process
    lines: list[Any] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"nats://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """SIGKILL, no goodbye: what a crash looks like to the rest of the cluster."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)

    async def stop(self, timeout: float = 5.0) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.kill()
                await self.proc.wait()


def gateway_command(
    name: str,
    port: int,
    cluster_port: int | None,
    peers: dict[str, int],
    extra_args: Sequence[str] = (),
) -> list[str]:
    cmd = [sys.executable, "-m", "gateway.standalone", "--name", name, "--port", str(port)]
    if cluster_port is not None:
        cmd += ["--cluster-port", str(cluster_port)]
    for peer, peer_port in peers.items():
        cmd += ["--peer", f"{peer}={HOST}:{peer_port}"]
    return cmd + list(extra_args)


async def _next_event(node: NodeProcess) -> dict[str, Any]:
    assert node.proc.stdout is not None
    while True:
        raw = await node.proc.stdout.readline()
        if not raw:
            raise RuntimeError(f"node {node.name} exited (code {await node.proc.wait()}) before it was ready")
        with contextlib.suppress(ValueError):
            event = json.loads(raw)
            node.lines.append(event)
            return event


async def wait_for_peers(node: NodeProcess, peers: Sequence[str], timeout: float = READY_TIMEOUT) -> None:
    """Until `node` reports its routes to all of `peers` are up."""
    if not peers:
        return

    async def watch() -> None:
        wanted = set(peers)
        while True:
            event = await _next_event(node)
            if event.get("event") == "peers" and wanted <= set(event["peers"]):
                return

    await asyncio.wait_for(watch(), timeout)


async def start_gateway_node(
    name: str,
    port: int,
    cluster_port: int | None = None,
    peers: dict[str, int] | None = None,
    extra_args: Sequence[str] = (),
    log_path: Path | None = None,
) -> NodeProcess:
    """Start one gateway node and wait for its ready line (not for its peers)."""
    stderr = open(log_path, "ab") if log_path is not None else asyncio.subprocess.DEVNULL  # noqa: SIM115
    try:
        proc = await asyncio.create_subprocess_exec(
            *gateway_command(name, port, cluster_port, peers or {}, extra_args),
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    finally:
        if log_path is not None:
            stderr.close()  # type: ignore[union-attr]
    node = NodeProcess(name, port, cluster_port or 0, proc)
    try:
        event = await asyncio.wait_for(_next_event(node), READY_TIMEOUT)
        if event.get("event") != "ready":
            raise RuntimeError(f"node {name}: expected a ready line, got {event}")
    except BaseException:
        node.kill()
        await proc.wait()
        raise
    return node


@contextlib.asynccontextmanager
async def gateway_cluster(
    names: Sequence[str],
    extra_args: Sequence[str] = (),
    log_dir: Path | None = None,
) -> AsyncIterator[list[NodeProcess]]:
    """A full mesh of gateway nodes, ready (every route up) on entry, stopped on exit."""
    ports, cluster_ports = _distinct_ports(names, cluster=len(names) > 1)
    nodes: list[NodeProcess] = []

    async def start(name: str) -> None:
        peers = {peer: cluster_ports[peer] for peer in names if peer != name}
        log_path = log_dir / f"{name}.log" if log_dir is not None else None
        nodes.append(
            await start_gateway_node(name, ports[name], cluster_ports.get(name), peers, extra_args, log_path)
        )

    try:
        # In parallel: most of a node's start-up is the interpreter importing grpc.
        # A TaskGroup cancels the other starts if one fails (a cancelled start kills its process).
        async with asyncio.TaskGroup() as group:
            for name in names:
                group.create_task(start(name))
        nodes.sort(key=lambda node: names.index(node.name))
        await asyncio.gather(
            *(wait_for_peers(node, [peer for peer in names if peer != node.name]) for node in nodes)
        )
        yield nodes
    finally:
        await asyncio.gather(*(node.stop() for node in nodes))


async def await_interest(
    publisher: Any, subscriber: Any, subject: str, timeout: float = READY_TIMEOUT
) -> None:
    """Until a message `publisher` publishes on `subject` reaches a new subscription of `subscriber`
    (both nats-py clients).

    Interest travels between two nodes in order, so once this probe's
    subscription is known on the publisher's node, every subscription the
    subscriber made before it is known there too.
    """
    arrived = asyncio.Event()

    async def on_probe(_msg: Any) -> None:
        arrived.set()

    sub = await subscriber.subscribe(subject, cb=on_probe)
    await subscriber.flush()

    async def probe() -> None:
        while not arrived.is_set():
            await publisher.publish(subject, b"probe")
            await publisher.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), 0.05)

    try:
        await asyncio.wait_for(probe(), timeout)
    finally:
        await sub.unsubscribe()


async def await_mesh(nodes: Sequence[NodeProcess]) -> None:
    """Until every node routes a message to every other one."""
    import nats  # the client library; imported here so the node code never needs it

    clients = [await nats.connect(node.url) for node in nodes]
    try:
        for i, publisher in enumerate(clients):
            for j, subscriber in enumerate(clients):
                if i != j:
                    await await_interest(publisher, subscriber, f"_mesh_probe.{i}.{j}")
    finally:
        for client in clients:
            await client.close()


async def _wait_for_log(proc: asyncio.subprocess.Process, needle: bytes, count: int, timeout: float) -> None:
    assert proc.stderr is not None
    stream = proc.stderr

    async def watch() -> None:
        seen = 0
        while seen < count:
            line = await stream.readline()
            if not line:
                raise RuntimeError("nats-server exited before it was ready")
            if needle in line:
                seen += 1

    await asyncio.wait_for(watch(), timeout)


@contextlib.asynccontextmanager
async def nats_server_cluster(size: int) -> AsyncIterator[list[NodeProcess]]:
    """`size` real nats-servers (a cluster when size > 1), for side-by-side tests and benchmarks."""
    names = [f"r{i}" for i in range(1, size + 1)]
    ports, cluster_ports = _distinct_ports(names, cluster=True)
    nodes: list[NodeProcess] = []
    try:
        for name in names:
            cmd = [str(NATS_SERVER), "-a", HOST, "-p", str(ports[name]), "-n", name]
            if size > 1:
                routes = ",".join(
                    f"nats-route://{HOST}:{cluster_ports[peer]}" for peer in names if peer != name
                )
                cmd += ["--cluster_name", "ref", "--cluster", f"nats://{HOST}:{cluster_ports[name]}"]
                cmd += ["--routes", routes]
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            nodes.append(NodeProcess(name, ports[name], cluster_ports[name], proc))
        for node in nodes:
            await _wait_for_log(node.proc, b"Server is ready", 1, READY_TIMEOUT)
            # Keep draining the log so a chatty server never blocks on a full pipe.
            asyncio.get_running_loop().create_task(_drain(node.proc))
        if size > 1:
            # Its log is no clear signal (route pools, duplicates): route a real message instead.
            await await_mesh(nodes)
        yield nodes
    finally:
        for node in nodes:
            node.kill()
        for node in nodes:
            await node.proc.wait()


async def _drain(proc: asyncio.subprocess.Process) -> None:
    assert proc.stderr is not None
    while await proc.stderr.readline():
        pass
