"""A follower that fell behind a compacted stream log catches up from a snapshot image built when sent.

A file-stored stream's Raft snapshot is only a marker (its store is synced, not copied), so the image a
lagging follower installs is built from the leader's store at that moment. The nodes here snapshot every
100 entries and keep 20 behind, so a follower that was down for a few hundred publishes needs one.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator

import nats
import pytest

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import connect_to_member, local_cluster

PUBLISHES = 600
SUBJECTS = 7


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    args = ["--stream-snapshot-interval", "100", "--stream-compact-keep", "20"]
    # local-first: a Direct Get is answered by the node the client is connected to
    args += ["--direct-get-policy", "local-first"]
    with local_cluster(tmp_path_factory.mktemp("snapshots"), extra_args=args) as running:
        yield running


def snapshot_installs(cluster: LocalCluster, node: str, stream: str) -> float:
    with urllib.request.urlopen(f"{cluster.spec(node).http_url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("jetraft_raft_snapshot_installs_total{") and f'group="S-{stream}-' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_follower_back_from_a_crash_catches_up_from_a_snapshot_image(cluster: LocalCluster) -> None:
    admin = await nats.connect(cluster.client_urls[0])
    info = await admin.jetstream().add_stream(
        name="SNAP", subjects=["snap.>"], num_replicas=3, allow_direct=True
    )
    await admin.close()
    assert info.cluster is not None and info.cluster.leader
    # the publisher stays connected to the leader's node: the follower killed below must not be its own
    nc = await connect_to_member(cluster, info.cluster.leader)
    js = nc.jetstream()
    follower = next(spec.name for spec in cluster.specs if spec.name != node_of(info.cluster.leader))
    await js.publish("snap.0", b"before the freeze")
    assert snapshot_installs(cluster, follower, "SNAP") == 0

    cluster.kill_node(follower)
    for base in range(0, PUBLISHES, 50):
        await asyncio.gather(
            *(js.publish(f"snap.{i % SUBJECTS}", b"m%d" % i) for i in range(base, base + 50))
        )
    # back with a log that ends where the leader's was compacted away long ago
    cluster.restart_node(follower)
    await asyncio.to_thread(cluster.wait_ready, 60.0, [follower])
    last = PUBLISHES + 1

    fc = await nats.connect(cluster.spec(follower).client_url)
    request = json.dumps({"last_by_subj": f"snap.{(PUBLISHES - 1) % SUBJECTS}", "min_last_seq": last})
    reply = None
    # Until the restarted node's own replica answers: right after the restart its router may not know
    # anyone's interest yet, and until its replica caught up, the others answer (local-first falls back).
    deadline = asyncio.get_running_loop().time() + 30
    while asyncio.get_running_loop().time() < deadline:
        try:
            reply = await fc.request("$JS.API.DIRECT.GET.SNAP", request.encode(), timeout=5)
        except nats.errors.NoRespondersError:
            await asyncio.sleep(0.1)
            continue
        if (
            reply.headers
            and node_of(reply.headers.get("Jetraft-Node", "")) == follower
            and "Nats-Sequence" in reply.headers
        ):
            break
        await asyncio.sleep(0.05)  # another replica answered: the follower is not back in _sys_ yet
    assert reply is not None and reply.headers is not None
    assert node_of(reply.headers["Jetraft-Node"]) == follower
    assert reply.headers["Nats-Sequence"] == str(last)
    assert reply.data == b"m%d" % (PUBLISHES - 1)
    # the follower's copy is whole: the first message (before the freeze) and one from the middle
    first = await fc.request("$JS.API.DIRECT.GET.SNAP", b'{"seq": 1}', timeout=5)
    middle = await fc.request("$JS.API.DIRECT.GET.SNAP", b'{"seq": 300}', timeout=5)
    assert first.data == b"before the freeze" and middle.data == b"m298"
    state = (await js.stream_info("SNAP")).state
    assert (state.messages, state.last_seq) == (last, last)
    assert snapshot_installs(cluster, follower, "SNAP") >= 1
    # and it goes on replicating normally after the install
    ack = await js.publish("snap.after", b"after")
    after = json.dumps({"last_by_subj": "snap.after", "min_last_seq": ack.seq}).encode()
    for _ in range(20):
        reply = await fc.request("$JS.API.DIRECT.GET.SNAP", after, timeout=5)
        if reply.data == b"after":
            break
    assert reply.data == b"after" and reply.headers is not None and node_of(reply.headers["Jetraft-Node"]) == follower
    await fc.close()
    await nc.close()
