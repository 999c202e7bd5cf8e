"""Stream leaders spread over the nodes, as nats-server's do: placement puts a different node first in
each new stream's peers, and that first peer stands for election at once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js import JetStreamContext

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
        info = await js.stream_info(stream)
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
        leaders = [await _leader(js, name) for name in names]
        assert sorted(node_of(leader) for leader in leaders) == ["n1", "n2", "n3"], leaders
        # and they serve: a publish to each is acknowledged by its own stream
        for index, name in enumerate(names):
            assert (await js.publish(f"spread.{index}.x", b"v")).stream == name
    finally:
        await nc.close()
