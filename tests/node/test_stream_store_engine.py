"""Every file stream of a node in the node's one database (storage/rocks_engine.py), through real nodes:
a deleted stream's store leaves it, and a node whose data directory still has the old layout (one
database per stream under streams/) comes back with every message, the stores moved into the database."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats

from local.cluster import LocalCluster
from storage.rocks import RocksStreamStore
from storage.rocks_engine import StreamStoreEngine
from tests.node.cluster_fixtures import direct_get_from_every_replica, local_cluster, log_problems
from tests.storage.legacy_rocks_store import LegacyRocksStreamStore

MESSAGES = 20


def _to_old_layout(node_dir: Path) -> list[str]:
    """Rewrite every store of the node's engine as an old-layout database under streams/; their names."""
    engine = StreamStoreEngine(node_dir / "streams.rocks")
    names = engine.stores()
    for name in names:
        store = RocksStreamStore(engine, name)
        legacy = LegacyRocksStreamStore(node_dir / "streams" / name)
        legacy.restore(store.snapshot())
        legacy.close()
        store.delete()
    assert engine.stores() == []
    engine.close()
    return names


def _stores(node_dir: Path) -> list[str]:
    engine = StreamStoreEngine(node_dir / "streams.rocks")
    try:
        return engine.stores()
    finally:
        engine.close()


async def _fill(cluster: LocalCluster) -> list[str]:
    """The members holding OLD's replicas: nodes, or the worker of each several-worker node holding it,
    each with its own data directory (<data>/<node>/w<i>/)."""
    nc = await nats.connect(cluster.client_urls[0])
    js = nc.jetstream()
    for name in ("OLD", "GONE"):
        await js.add_stream(name=name, subjects=[f"{name.lower()}.>"], num_replicas=3, allow_direct=True)
        for i in range(MESSAGES):
            await js.publish(f"{name.lower()}.{i % 3}", b"%s-%d" % (name.encode(), i))
    await js.delete_stream("GONE")
    info = await js.stream_info("OLD")
    await nc.close()
    assert info.cluster is not None and info.cluster.leader
    return [info.cluster.leader, *(peer.name for peer in info.cluster.replicas or [])]


async def _read_back(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    js = nc.jetstream()
    info = await js.stream_info("OLD")
    assert (info.state.messages, info.state.last_seq) == (MESSAGES, MESSAGES)
    for seq in range(1, MESSAGES + 1):
        msg = await js.get_msg("OLD", seq)
        assert msg.data == b"OLD-%d" % (seq - 1)
    # each replica answers from its own migrated store
    request = json.dumps({"seq": MESSAGES}).encode()
    for reply in await direct_get_from_every_replica(nc, "OLD", request):
        assert reply.data == b"OLD-%d" % (MESSAGES - 1)
    ack = await js.publish("old.after", b"after")
    assert ack.seq == MESSAGES + 1
    await nc.close()


def test_deleted_stores_leave_the_database_and_an_old_layout_node_comes_back_whole(tmp_path: Path) -> None:
    with local_cluster(tmp_path) as cluster:
        members = asyncio.run(_fill(cluster))
        for spec in cluster.specs:
            cluster.stop_node(spec.name)
        node_dirs = [tmp_path / member for member in members]
        assert len(node_dirs) == len(cluster.specs)
        # GONE's replicas may be other workers than OLD's: they hold nothing now
        others = [tmp_path / m for spec in cluster.specs for m in spec.members if m not in members]
        for other_dir in others:
            assert _stores(other_dir) == []
        for node_dir in node_dirs:
            stores = _stores(node_dir)
            assert len(stores) == 1 and stores[0].startswith("OLD-"), stores
            assert _to_old_layout(node_dir) == stores
        for spec in cluster.specs:
            cluster.restart_node(spec.name)
        cluster.wait_ready(60.0)
        asyncio.run(_read_back(cluster))
        for spec in cluster.specs:
            cluster.stop_node(spec.name)
        assert not log_problems(cluster)
    for node_dir in node_dirs:
        assert [p.name for p in (node_dir / "streams").iterdir()] == []
        assert len(_stores(node_dir)) == 1
