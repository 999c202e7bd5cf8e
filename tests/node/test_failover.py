"""Crash the stream leader under publish load: publishing resumes, no acknowledged message is lost anywhere."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import nats
import pytest
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import APIError, NoStreamResponseError

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster

STREAM = "FAILOVER"
# A node asked for a Direct Get answers from its own replica when it has one.
LOCAL_READS = ["--direct-get-policy", "local-first"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("failover"), extra_args=LOCAL_READS) as running:
        yield running


class Writer:
    """Publishes numbered messages one at a time, retrying each (same msg id) until acknowledged."""

    def __init__(self, js: nats.js.JetStreamContext) -> None:
        self.js = js
        self.acked: dict[int, bytes] = {}
        self.errors = 0
        self.stop = asyncio.Event()

    async def run(self, limit: int, deadline: float) -> None:
        for n in range(limit):
            payload = b"msg-%d" % n
            while True:
                if self.stop.is_set() or time.monotonic() > deadline:
                    return
                try:
                    ack = await self.js.publish(
                        "failover.x", payload, timeout=1.0, headers={"Nats-Msg-Id": f"m{n}"}
                    )
                    break
                except (NatsTimeoutError, NoRespondersError, NoStreamResponseError, APIError):
                    self.errors += 1  # no leader for a moment: retry the same message
            assert ack.seq not in self.acked, "two messages acknowledged at one sequence"
            self.acked[ack.seq] = payload

    async def wait_for(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} of {count} acks in {timeout}s"
            await asyncio.sleep(0.02)


async def test_leader_crash_under_load_loses_nothing(cluster: LocalCluster) -> None:
    admin = await nats.connect(cluster.client_urls[0])
    js = admin.jetstream()
    info = await js.add_stream(name=STREAM, subjects=["failover.>"], num_replicas=3, allow_direct=True)
    leader = info.cluster.leader
    follower = next(spec for spec in cluster.specs if spec.name != node_of(leader))
    await admin.close()

    nc = await nats.connect(follower.client_url)
    writer = Writer(nc.jetstream())
    task = asyncio.create_task(writer.run(limit=5_000, deadline=time.monotonic() + 60))
    try:
        await writer.wait_for(150, timeout=20)
        cluster.kill_node(leader)
        killed_at = len(writer.acked)
        await writer.wait_for(killed_at + 150, timeout=30)
        new_leader = (await nc.jetstream().stream_info(STREAM)).cluster.leader
        assert new_leader != leader
    finally:
        writer.stop.set()
        await task
    await nc.close()

    acked = writer.acked
    assert sorted(acked) == list(range(1, len(acked) + 1)), "acknowledged sequences must be gap-free"
    cluster.restart_node(leader)
    cluster.wait_ready(names=[leader])
    last = max(acked)
    for spec in cluster.specs:
        client = await nats.connect(spec.client_url)
        try:
            # read-your-writes: wait (server side) until this replica holds every acknowledged message;
            # a node just restarted learns its peers' interest over the route mesh first (bounded)
            deadline = asyncio.get_running_loop().time() + 20
            while True:
                try:
                    reply = await client.request(
                        f"$JS.API.DIRECT.GET.{STREAM}",
                        json.dumps({"seq": last, "min_last_seq": last}).encode(),
                        timeout=15,
                    )
                except NoRespondersError:
                    assert asyncio.get_running_loop().time() < deadline, f"{spec.name} never answered"
                    await asyncio.sleep(0.1)
                    continue
                if reply.headers is not None and node_of(reply.headers.get("Jetraft-Node", "")) == spec.name:
                    break
                # answered by another replica: this one has not rejoined _sys_ yet
                assert asyncio.get_running_loop().time() < deadline, f"{spec.name} never rejoined _sys_"
                await asyncio.sleep(0.1)
            assert reply.headers is not None and node_of(reply.headers.get("Jetraft-Node", "")) == spec.name
            assert int(reply.headers["Nats-Sequence"]) == last
            for seq, payload in acked.items():
                msg = await client.jetstream().get_msg(STREAM, seq=seq, direct=True)
                assert msg.data == payload, f"{spec.name} lost or changed seq {seq}"
                assert msg.headers is not None and node_of(msg.headers["Jetraft-Node"]) == spec.name
        finally:
            await client.close()
