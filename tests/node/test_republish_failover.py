"""RePublish when the stream's leader dies with publishes in flight: the messages it had sent its followers
but not yet seen committed are stored by the next leader, and republished by it (cluster/stream/republish.py).

The followers' acknowledgements to the leader go through a latency toxic, so the leader cannot commit
for LAG_MS after it appended: killed halfway through, it leaves entries the new leader commits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js.api import RePublish, StreamConfig

from chaos.readafterwrite.faults import LinkFaults
from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, node_available, plan_free_nodes, proxy_name, start_faultable_links
from tests.node.cluster_fixtures import subscribe_on_follower

pytestmark = pytest.mark.skipif(not node_available(), reason="needs a runnable `jetraft node`")

LAG_MS = 1500
PUBLISHES = 200
RECEIVE_WITHIN = 30.0


@pytest.fixture
def faultable(tmp_path: Path) -> Iterator[LocalCluster]:
    specs = plan_free_nodes(3, 0)
    cluster = LocalCluster(specs, tmp_path, toxiproxy=start_faultable_links(specs, 0, log_path=None))
    cluster.start(timeout=60)
    try:
        yield cluster
    finally:
        cluster.stop()


def test_what_a_killed_leader_left_uncommitted_is_republished_by_the_next(faultable: LocalCluster) -> None:
    asyncio.run(_scenario(faultable))


async def _scenario(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    js = nc.jetstream(timeout=10)
    await js.add_stream(
        StreamConfig(name="RPF", subjects=["rpf_in.*"], num_replicas=3, republish=RePublish(dest="rpf_out.>"))
    )
    sub_client, received = await subscribe_on_follower(cluster, js, "RPF", "rpf_out.>")
    await nc.close()
    js = sub_client.jetstream(timeout=10)
    info = await js.stream_info("RPF")
    assert info.cluster is not None and info.cluster.leader
    leader = info.cluster.leader
    followers = [spec.name for spec in cluster.specs if spec.name != node_of(leader)]
    assert cluster.toxiproxy_url is not None
    faults = LinkFaults(cluster.toxiproxy_url)
    lagging = [faults.client.get_proxy(proxy_name(follower, leader)) for follower in followers]
    publisher = await nats.connect(cluster.spec(leader).client_url, allow_reconnect=False)
    try:
        for proxy in lagging:
            proxy.add_toxic(name="acks", type="latency", stream="upstream", attributes={"latency": LAG_MS})
        for i in range(PUBLISHES):
            await publisher.publish(f"rpf_in.{i % 3}", b"%d" % i)
        await publisher.flush()  # the leader has read them all, and proposes as it reads
        # No event tells that the appends reached the followers: they are on their way at once, and the
        # leader cannot commit before the acks' LAG_MS, so halfway through leaves margin on both sides.
        await asyncio.sleep(LAG_MS / 2000)
        cluster.kill_node(leader)
    finally:
        for proxy in lagging:
            proxy.destroy_toxic("acks")
    try:
        info = await _info_from_new_leader(js, "RPF", leader)
        stored = info.state.last_seq
        assert 0 < stored == info.state.messages  # the new leader committed what the old one had sent
        cluster.restart_node(leader)
        seen: set[int] = set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RECEIVE_WITHIN
        while len(seen) < stored:
            try:
                msg = await asyncio.wait_for(received.get(), max(deadline - loop.time(), 0.01))
            except TimeoutError:
                missing = sorted(set(range(1, stored + 1)) - seen)
                raise AssertionError(f"{len(missing)} of {stored} never republished: {missing[:20]}") from None
            assert msg.headers is not None and msg.headers["Nats-Stream"] == "RPF"
            index = int(msg.data)
            assert msg.subject == f"rpf_out.rpf_in.{index % 3}"
            seen.add(int(msg.headers["Nats-Sequence"]))
        assert sorted(seen) == list(range(1, stored + 1))
    finally:
        await sub_client.close()
        await publisher.close()  # its node was killed: nothing left to flush


async def _info_from_new_leader(js: nats.js.JetStreamContext, stream: str, old: str) -> nats.js.api.StreamInfo:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while loop.time() < deadline:
        try:
            info = await js.stream_info(stream)
        except (nats.js.errors.ServiceUnavailableError, nats.errors.TimeoutError):
            await asyncio.sleep(0.1)  # no leader yet: elections take 1-2 s
            continue
        if info.cluster is not None and info.cluster.leader and info.cluster.leader != old:
            return info
        await asyncio.sleep(0.1)
    raise AssertionError(f"{stream} got no new leader")
