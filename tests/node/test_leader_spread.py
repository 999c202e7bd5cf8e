"""Stream leaders spread over the nodes, as nats-server's do: placement puts a different node first in
each new stream's peers, and that first peer stands for election at once."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.api import PubAck
from nats.js.errors import ServiceUnavailableError

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path) as running:
        yield running


async def _leader(js: JetStreamContext, stream: str) -> str:
    # Polled: no advisory announces a stream leader; the first peer usually leads by the first look.
    for _ in range(100):
        try:
            info = await js.stream_info(stream)
        except (nats.errors.TimeoutError, ServiceUnavailableError):
            # an INFO on its way to a leader that just handed over (or was killed) goes unanswered,
            # as on nats-server when a leader steps down under it; asked again
            continue
        if info.cluster is not None and info.cluster.leader:
            return info.cluster.leader
        await asyncio.sleep(0.05)
    raise AssertionError(f"{stream} has no leader")


async def test_three_r3_streams_get_three_different_leaders(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    try:
        js = nc.jetstream()
        names = ["SPREAD_A", "SPREAD_B", "SPREAD_C"]
        for index, name in enumerate(names):
            await js.add_stream(name=name, subjects=[f"spread.{index}.>"], num_replicas=3)
        # each stream's first peer stands at once; if another won the first election, the preferred
        # leader gets leadership handed over within an election timeout or two
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while True:
            leaders = [await _leader(js, name) for name in names]
            if sorted(node_of(leader) for leader in leaders) == ["n1", "n2", "n3"]:
                break
            assert loop.time() < deadline, leaders
            await asyncio.sleep(0.25)
        # and they serve: a publish to each is acknowledged by its own stream
        for index, name in enumerate(names):
            assert (await _publish_retrying(js, f"spread.{index}.x")).stream == name
    finally:
        await nc.close()


async def _leader_counts(js: JetStreamContext, names: list[str]) -> Counter[str]:
    """Streams led per node (machine): a leader is a node, or one worker of it (`n1/w1`)."""
    return Counter([node_of(await _leader(js, name)) for name in names])


def _balanced(counts: Counter[str], streams: int, nodes: int) -> bool:
    share = streams // nodes
    return sum(counts.values()) == streams and all(
        share - 1 <= counts[f"n{i}"] <= share + 1 for i in range(1, nodes + 1)
    )


async def test_twelve_r3_streams_spread_their_leaders_and_spread_again_after_a_restart(
    cluster: LocalCluster,
) -> None:
    names = [f"BALANCE_{index}" for index in range(12)]
    nc = await nats.connect(cluster.client_urls[1])
    try:
        js = nc.jetstream()
        for index, name in enumerate(names):
            await js.add_stream(name=name, subjects=[f"balance.{index}.>"], num_replicas=3)
        counts = await _leader_counts(js, names)
        assert _balanced(counts, 12, 3), counts
        led_by_n1 = [name for name in names if node_of(await _leader(js, name)) == "n1"]
    finally:
        await nc.close()

    # n1 goes away: its streams elect leaders elsewhere; back, it is handed them again once caught up
    cluster.kill_node("n1")
    nc = await nats.connect(cluster.client_urls[1])
    try:
        js = nc.jetstream()
        for name in led_by_n1:
            for _ in range(200):  # bounded: an election takes 1-2 s
                if node_of(await _leader(js, name)) != "n1":
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"{name} still led by the killed n1")
        cluster.restart_node("n1")
        cluster.wait_ready(timeout=60, names=["n1"])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30  # catching up, then a transfer at the next election timeout (1 s)
        while True:
            counts = await _leader_counts(js, names)
            if _balanced(counts, 12, 3) and counts["n1"] >= 3:
                break
            assert loop.time() < deadline, f"leaders did not spread again after n1 restarted: {counts}"
            await asyncio.sleep(0.25)
        # and every stream still serves (a publish that meets a hand-over still in flight is answered
        # 503, as nats-server answers one during a leader change: the client asks again)
        for index, name in enumerate(names):
            assert (await _publish_retrying(js, f"balance.{index}.x")).stream == name
    finally:
        await nc.close()


async def _publish_retrying(js: JetStreamContext, subject: str, attempts: int = 20) -> PubAck:
    for _ in range(attempts - 1):
        try:
            return await js.publish(subject, b"v")
        except ServiceUnavailableError:
            await asyncio.sleep(0.25)
    return await js.publish(subject, b"v")
