"""After a partition heals, every node serves its clients again within seconds, and /healthz tells a
node that cannot serve from one that can (issue 23).

Every node-to-node link goes through its own Toxiproxy proxy (`local.cluster.faultable_cluster`).
The stream's leader is cut off from both peers while clients on every node keep publishing; then
the links come back, and each node's own client must publish to the stream and read with
STREAM.MSG.GET (the leader's ReadIndex, through the route mesh) within a few seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator

import nats
import pytest
from nats.js.api import StreamConfig

from chaos.readafterwrite.faults import LinkFaults
from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, faultable_cluster, node_available
from tests.node.cluster_fixtures import log_problems

pytestmark = pytest.mark.skipif(
    not node_available(), reason="needs a runnable `jetraft node` (cluster.node.command)"
)

SERVE_AGAIN_WITHIN = 10.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with faultable_cluster(tmp_path_factory.mktemp("heal"), nodes=3, mirror_nodes=0) as running:
        yield running


@pytest.fixture
def faults(cluster: LocalCluster) -> Iterator[LinkFaults]:
    assert cluster.toxiproxy_url is not None
    link_faults = LinkFaults(cluster.toxiproxy_url)
    try:
        yield link_faults
    finally:
        link_faults.client.reset()


@pytest.fixture
async def clients(cluster: LocalCluster) -> AsyncIterator[dict[str, nats.NATS]]:
    # each client stays on its own node: the point is what that node serves
    connected = {
        spec.name: await nats.connect(
            spec.client_url, dont_randomize=True, no_echo=False, max_reconnect_attempts=-1
        )
        for spec in cluster.specs
    }
    try:
        yield connected
    finally:
        for nc in connected.values():
            await nc.close()


def _healthz(http_url: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"{http_url}/healthz", timeout=2) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
    except OSError:
        return 0, {}


async def _serves(nc: nats.NATS, stream: str, subject: str, within: float) -> float:
    """Seconds until this client's node took a publish and answered a STREAM.MSG.GET of it."""
    js = nc.jetstream(timeout=1.0)
    started = time.monotonic()
    failures: list[str] = []
    while time.monotonic() - started < within:
        try:
            ack = await js.publish(subject, b"after the heal", timeout=1.0)
            got = await js.get_msg(stream, seq=ack.seq, direct=False)
            assert got.data == b"after the heal"
            return time.monotonic() - started
        except (TimeoutError, nats.errors.Error) as exc:
            failures.append(type(exc).__name__)
    raise AssertionError(f"not serving {within}s after the heal; failures: {failures[-5:]}")


async def _keep_publishing(nc: nats.NATS, subject: str, stop: asyncio.Event) -> int:
    """Load on the route mesh while the fault lasts: forwards queued on every link when it heals."""
    js = nc.jetstream(timeout=1.0)
    acked = 0
    while not stop.is_set():
        results = await asyncio.gather(
            *(js.publish(subject, b"x" * 1024, timeout=1.0) for _ in range(16)), return_exceptions=True
        )
        acked += sum(1 for r in results if not isinstance(r, BaseException))
    return acked


async def _new_leader(nc: nats.NATS, stream: str, old: str, within: float) -> str:
    js = nc.jetstream(timeout=1.0)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            leader = (await js.stream_info(stream)).cluster.leader
        except (TimeoutError, nats.errors.Error):
            continue
        if leader and leader != old:
            return leader
    raise AssertionError(f"no new leader for {stream} within {within}s")


async def _partition_and_heal(
    cluster: LocalCluster, clients: dict[str, nats.NATS], stream: str, cut: object, heal: object
) -> tuple[str, dict[str, float]]:
    admin = clients[cluster.specs[0].name].jetstream(timeout=10)
    info = await admin.add_stream(StreamConfig(name=stream, subjects=[f"{stream.lower()}.>"], num_replicas=3))
    assert info.cluster is not None and info.cluster.leader
    # every replica caught up before the cut: a replica cut off from its leader before its first catch-up
    # is rightly "not current" (as in nats-server), which is not the flapping this test looks for
    await asyncio.to_thread(cluster.wait_ready, 20)
    # the leader's node (machine) is cut off or frozen whole, its other workers too when it has several
    leader = node_of(info.cluster.leader)
    others = [name for name in clients if name != leader]
    stop = asyncio.Event()
    load = [
        asyncio.create_task(_keep_publishing(nc, f"{stream.lower()}.load.{n}", stop))
        for n, nc in clients.items()
    ]
    try:
        cut(leader)  # type: ignore[operator]
        await _new_leader(clients[others[0]], stream, info.cluster.leader, within=30)
        # the cut-off node cannot serve its clients: /healthz says so once the grace has passed,
        # while the majority's nodes, which can, stay healthy the whole time
        deadline = time.monotonic() + 20
        while (status := (await asyncio.to_thread(_healthz, cluster.spec(leader).http_url)))[0] == 200:
            assert time.monotonic() < deadline, f"{leader} cut off, still healthy: {status}"
            for name in others:
                code, body = await asyncio.to_thread(_healthz, cluster.spec(name).http_url)
                assert code == 200, f"{name} flapped while {leader} was cut off: {body}"
            await asyncio.sleep(0.2)
        assert status[0] in (0, 503)
    finally:
        heal(leader)  # type: ignore[operator]
        healed = time.monotonic()
        stop.set()
        await asyncio.gather(*load)
    served = await asyncio.gather(
        *(
            _serves(nc, stream, f"{stream.lower()}.after.{name}", SERVE_AGAIN_WITHIN)
            for name, nc in clients.items()
        )
    )
    # and /healthz agrees, on every node
    for spec in cluster.specs:
        while (status := (await asyncio.to_thread(_healthz, spec.http_url)))[0] != 200:
            assert time.monotonic() - healed < 30, f"{spec.name} unhealthy after the heal: {status}"
            await asyncio.sleep(0.2)
    await admin.delete_stream(stream)
    return leader, dict(zip(clients, served, strict=True))


async def test_an_isolated_leader_serves_its_clients_again_within_seconds_of_the_heal(
    cluster: LocalCluster, faults: LinkFaults, clients: dict[str, nats.NATS]
) -> None:
    _, served = await _partition_and_heal(cluster, clients, "HEALISO", faults.isolate, faults.heal)
    assert max(served.values()) < SERVE_AGAIN_WITHIN
    assert log_problems(cluster) == []


async def test_a_frozen_leader_serves_its_clients_again_within_seconds_of_waking(
    cluster: LocalCluster, clients: dict[str, nats.NATS]
) -> None:
    """SIGSTOP: its peers end its silent calls while it sleeps; on waking it writes into them. The
    whole node is frozen, its workers too when it has several (node_pids)."""

    def freeze(name: str) -> None:
        for pid in cluster.node_pids(name):
            os.kill(pid, signal.SIGSTOP)

    def thaw(name: str) -> None:
        for pid in cluster.node_pids(name):
            os.kill(pid, signal.SIGCONT)

    _, served = await _partition_and_heal(cluster, clients, "HEALSTOP", freeze, thaw)
    assert max(served.values()) < SERVE_AGAIN_WITHIN
    assert log_problems(cluster) == []
