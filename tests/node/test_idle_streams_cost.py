"""What idle streams cost between the nodes: nothing per stream. The Direct Get staleness positions go
one beacon per pair of nodes carrying only the streams whose position moved (cluster/direct_get/
positions.py), so ten times the idle streams send no more route messages than a few do; the route
messages are counted from each node's /varz (`out_msgs` less `out_client_msgs`), as nats-server reports
them."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.chaos.node_metrics import scrape
from tests.node.cluster_fixtures import local_cluster

FEW = 3
MANY = 30
MEASURE_SECONDS = 4.0
# after the last write: every group quiesces (two heartbeat rounds) and every replica has caught up
SETTLE_SECONDS = 3.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path) as running:
        yield running


def route_messages_sent(cluster: LocalCluster) -> int:
    total = 0
    for spec in cluster.specs:
        with urllib.request.urlopen(f"{spec.http_url}/varz", timeout=5) as response:
            varz = json.loads(response.read())
        total += varz["out_msgs"] - varz["out_client_msgs"]
    return total


async def idle_route_rate(cluster: LocalCluster) -> float:
    """Route messages per second the whole cluster sends while nothing happens."""
    await asyncio.sleep(SETTLE_SECONDS)
    before, started = await asyncio.to_thread(route_messages_sent, cluster), time.monotonic()
    await asyncio.sleep(MEASURE_SECONDS)
    after, elapsed = await asyncio.to_thread(route_messages_sent, cluster), time.monotonic() - started
    return (after - before) / elapsed


async def create_idle_streams(js: nats.js.JetStreamContext, first: int, count: int) -> None:
    for index in range(first, first + count):
        await js.add_stream(
            name=f"IDLE{index}", subjects=[f"idle.{index}"], num_replicas=3, allow_direct=True
        )
        await js.publish(f"idle.{index}", b"one")


async def test_idle_streams_send_no_route_messages_of_their_own(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    try:
        js = nc.jetstream(timeout=10)
        await create_idle_streams(js, 0, FEW)
        few_rate = await idle_route_rate(cluster)
        await create_idle_streams(js, FEW, MANY - FEW)
        many_rate = await idle_route_rate(cluster)
        # the staleness positions of ten times the streams still cost nothing: a few messages a second
        # of slack for whatever else the nodes happen to say to each other
        assert many_rate <= few_rate * 1.25 + 3, (
            f"{MANY} idle streams: {many_rate:.1f} route messages/s, {FEW}: {few_rate:.1f}"
        )
        # and every idle follower still reads as fresh (its staleness as of its leader's latest beacon,
        # 0.5 s apart), and answers Direct Gets
        followers = {}
        for spec in cluster.specs:
            for name, labels, seconds in await asyncio.to_thread(scrape, spec.http_url):
                # the series' node label is the member (a worker `n1/w0` of a several-worker node)
                mine = node_of(labels.get("node", "")) == spec.name and labels.get("role") == "follower"
                if name == "jetraft_replica_lag_seconds" and mine:
                    followers[(labels["stream"], spec.name)] = seconds
        assert len(followers) == 2 * MANY, sorted(followers)
        assert max(followers.values()) < 1.5, followers
        for index in range(MANY):
            reply = await js.get_msg(f"IDLE{index}", seq=1, direct=True)
            assert reply.data == b"one"
    finally:
        await nc.close()
