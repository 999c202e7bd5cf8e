"""A stream deleted while one of its replicas' nodes was down leaves nothing on that node once it is back.

The node never had that replica running to remove: it learns of the deletion from the meta log, or from a
meta snapshot that no longer names the stream at all. Before, its Raft logs and its store stayed on disk
for good (cluster/meta/leftovers.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from local.cluster import LocalCluster
from raft.rocks_log_storage import RocksLogEngine
from storage.rocks_engine import StreamStoreEngine
from tests.node.cluster_fixtures import local_cluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path) as running:
        yield running


def _held(node_dir: Path) -> tuple[set[str], set[str]]:
    """The Raft groups and stream stores on disk under a stopped node's directory (all its workers)."""
    groups: set[str] = set()
    stores: set[str] = set()
    for raft_dir in node_dir.rglob("raft"):
        engine = RocksLogEngine(raft_dir)
        try:
            groups.update(engine.groups())
        finally:
            engine.close()
        streams = StreamStoreEngine(raft_dir.parent / "streams.rocks")
        try:
            stores.update(streams.stores())
        finally:
            streams.close()
    return groups, stores


def _named(names: set[str], stream: str) -> set[str]:
    return {name for name in names if f"-{stream}-" in f"-{name}"}


async def test_a_stream_deleted_while_a_node_was_down_is_removed_from_it(cluster: LocalCluster) -> None:
    down = next(spec.name for spec in cluster.specs if spec.name != cluster.meta_leader())
    up = next(spec for spec in cluster.specs if spec.name != down)
    nc = await nats.connect(up.client_url)
    js = nc.jetstream(timeout=10)
    try:
        for stream in ("GONE", "KEPT"):
            await js.add_stream(name=stream, subjects=[stream.lower()], num_replicas=3)
            for i in range(10):
                await js.publish(stream.lower(), b"m%d" % i)
            await js.add_consumer(stream, durable_name="worker", ack_policy="explicit")
        cluster.stop_node(down)
        await js.delete_stream("GONE")
    finally:
        await nc.close()

    node_dir = cluster.data_dir / down
    groups, stores = _held(node_dir)
    # what the deletion left on the node that was down: the stream's and its consumer's groups, its store
    assert {name.split("-")[0].rsplit("/", 1)[-1] for name in _named(groups, "GONE")} == {"S", "C"}
    assert _named(stores, "GONE")

    cluster.restart_node(down)
    # healthy once caught up with the meta log and reconciled, leftovers removed
    await asyncio.to_thread(cluster.wait_ready, 60.0, [down])
    cluster.stop_node(down)
    groups, stores = _held(node_dir)
    assert _named(groups, "GONE") == set()
    assert _named(stores, "GONE") == set()
    # the stream that lives on keeps everything
    assert {name.split("-")[0].rsplit("/", 1)[-1] for name in _named(groups, "KEPT")} == {"S", "C"}
    assert _named(stores, "KEPT")
