"""A follower whose Raft log is damaged while it is down sets its files aside, votes in nothing until its
leader has caught it up, and then serves every message from its own, rebuilt store (docs/chaos.md).

The nodes snapshot every 100 entries and keep 20 behind, so the stream's log was compacted long before:
the repaired follower can only get the messages from a snapshot image of the leader's store.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from cluster.node.damage import DAMAGED_DIR
from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from raft.recovery import LEDGER_FILE
from tests.node.cluster_fixtures import connect_to_member, local_cluster, log_problems, publish_when_served

PUBLISHES = 300


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    args = ["--stream-snapshot-interval", "100", "--stream-compact-keep", "20"]
    # local-first: a Direct Get is answered by the node the client is connected to, once it has caught up
    args += ["--direct-get-policy", "local-first"]
    with local_cluster(tmp_path_factory.mktemp("damage"), extra_args=args) as running:
        yield running


def _flip_a_byte_in_the_middle_of_the_newest_wal(db_dir: Path) -> None:
    newest = max((p for p in db_dir.glob("*.log") if p.stat().st_size > 0), key=lambda p: p.name)
    offset = newest.stat().st_size // 2
    with open(newest, "r+b") as file:
        file.seek(offset)
        byte = file.read(1)[0]
        file.seek(offset)
        file.write(bytes([byte ^ 0x10]))


async def _answered_by(fc: nats.NATS, node: str, seq: int, within: float = 30.0) -> bytes:
    """Direct Get of `seq` until `node`'s own replica answers (until caught up, the others do)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    request = json.dumps({"seq": seq}).encode()
    while loop.time() < deadline:
        try:
            reply = await fc.request("$JS.API.DIRECT.GET.DMG", request, timeout=5)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            await asyncio.sleep(0.1)
            continue
        if reply.headers and node_of(reply.headers.get("Jetraft-Node", "")) == node:
            assert reply.headers.get("Nats-Sequence") == str(seq), reply.headers
            return reply.data
        await asyncio.sleep(0.1)
    raise AssertionError(f"{node} never answered a Direct Get of {seq} itself within {within} s")


async def test_a_follower_with_a_damaged_raft_log_is_repaired_from_its_peers(cluster: LocalCluster) -> None:
    admin = await nats.connect(cluster.client_urls[0])
    info = await admin.jetstream().add_stream(
        name="DMG", subjects=["dmg.>"], num_replicas=3, allow_direct=True
    )
    await admin.close()
    assert info.cluster is not None and info.cluster.leader
    nc = await connect_to_member(cluster, info.cluster.leader)
    js = nc.jetstream()
    follower = next(spec.name for spec in cluster.specs if spec.name != node_of(info.cluster.leader))
    # the member of that node that holds the replica: the node itself, or one of its workers, whose
    # files are its own (<data>/<node>/w<i>/)
    replica = next(peer.name for peer in info.cluster.replicas or [] if node_of(peer.name) == follower)
    await publish_when_served(js, "dmg.0", b"m0")
    for base in range(1, PUBLISHES, 50):
        await asyncio.gather(*(js.publish(f"dmg.{i % 5}", b"m%d" % i) for i in range(base, min(base + 50, PUBLISHES))))

    cluster.kill_node(follower)
    data_dir = cluster.data_dir / replica
    _flip_a_byte_in_the_middle_of_the_newest_wal(data_dir / "raft")
    cluster.restart_node(follower)
    # healthy means every group it runs has been caught up (a recovering group is a /healthz problem)
    await asyncio.to_thread(cluster.wait_ready, 90.0, [follower])

    assert (data_dir / DAMAGED_DIR).is_dir()
    log = (cluster.log_dir / f"{follower}.log").read_text()
    assert "node_files_damaged" in log and "raft_group_recovered" in log
    # every group it had caught up: the ledger is retired, and groups created from now on vote at once
    def retired() -> bool:
        # the node logs the retirement just after removing the file: both, or a read between them fails
        logged = "raft_recovery_complete" in (cluster.log_dir / f"{follower}.log").read_text()
        return logged and not (data_dir / LEDGER_FILE).exists()

    await asyncio.to_thread(cluster.wait_until, retired, 30.0, "the recovery ledger retired")
    fc = await nats.connect(cluster.spec(follower).client_url)
    try:
        for seq in (1, 2, 100, 150, 299, PUBLISHES):
            assert await _answered_by(fc, follower, seq) == b"m%d" % (seq - 1)
    finally:
        await fc.close()
        await nc.close()
    # and the cluster still commits with it: a publish acknowledged after the repair (its peers' routes
    # to the restarted node may take a second more to come back than its own routes to them)
    nc = await nats.connect(cluster.spec(follower).client_url)
    try:
        ack = await publish_when_served(nc.jetstream(), "dmg.0", b"after")
        assert ack.seq == PUBLISHES + 1
    finally:
        await nc.close()
    assert log_problems(cluster) == []
