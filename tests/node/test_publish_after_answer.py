"""A publish made the moment an API answer arrives reaches the stream, never "no responders".

A client's publish on a stream's subject goes wherever the stream leader's interest says. After a
create answered by the new leader, that interest came first on the same link (docs/architecture.md,
"Route mesh"); after a leader change it comes from another node than the answer, and may be later
(cluster/runtime/publish_hold.py). Here the client's node holds no replica, or is a follower; the
new leader's link to the client's node is slowed by a latency toxic, so its interest is sure to come
after the stepdown's answer. Four nodes: n1 holds no replica of the streams placed on tag `replica`.
The nodes run with the publish hold on (`--publish-hold`, off by default): without it a publish after
a stepdown gets 503 no responders, as from nats-server (tests/node/test_publish_no_leader.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.js.api import Placement

from chaos.readafterwrite.faults import LinkFaults
from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, node_available, plan_free_nodes, proxy_name, start_faultable_links
from tests.node.cluster_fixtures import connect_to_member

pytestmark = pytest.mark.skipif(not node_available(), reason="needs a runnable `jetraft node`")

REPLICAS = Placement(tags=["replica"])
LAG_MS = 300
CREATES = 30
KV_CREATES = 10
CONSUMER_CREATES = 10
STEPDOWNS = 3
NOT_SERVED = (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError)
PUBLISH_HOLD = ["--publish-hold", "2"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    specs = plan_free_nodes(4, 0)
    for spec in specs[1:]:
        spec.tags = ["replica"]
    directory = Path(tmp_path_factory.mktemp("publish-after-answer"))
    toxiproxy = start_faultable_links(specs, 0, log_path=None)
    running = LocalCluster(specs, directory, extra_args=PUBLISH_HOLD, toxiproxy=toxiproxy)
    running.start(timeout=90)
    try:
        yield running
    finally:
        running.stop()


async def creates_then_publishes(url: str, prefix: str) -> list[str]:
    """CREATES R3 streams placed away from n1 or not, each published to at once; which publishes failed."""
    nc = await nats.connect(url)
    js = nc.jetstream(timeout=10)
    refused = []
    try:
        for n in range(CREATES):
            name = f"{prefix}{n}"
            await js.add_stream(name=name, subjects=[f"{name.lower()}.x"], num_replicas=3, placement=REPLICAS)
            try:
                assert (await js.publish(f"{name.lower()}.x", b"first")).seq == 1
            except NOT_SERVED as exc:
                refused.append(f"{name}: {exc!r}")
    finally:
        await nc.close()
    return refused


def test_a_publish_right_after_a_create_through_a_node_without_a_replica(cluster: LocalCluster) -> None:
    assert asyncio.run(creates_then_publishes(cluster.spec("n1").client_url, "FAR")) == []


def test_a_publish_right_after_a_create_through_a_replica(cluster: LocalCluster) -> None:
    # n2 holds a replica of every stream placed on `replica`: a follower, or now and then the leader
    assert asyncio.run(creates_then_publishes(cluster.spec("n2").client_url, "NEAR")) == []


def test_a_put_right_after_a_kv_create_and_a_pull_right_after_a_consumer_create(cluster: LocalCluster) -> None:
    async def scenario() -> list[str]:
        nc = await nats.connect(cluster.spec("n1").client_url)
        js = nc.jetstream(timeout=10)
        failed = []
        try:
            for n in range(KV_CREATES):
                kv = await js.create_key_value(bucket=f"KV{n}", replicas=3, placement=REPLICAS)
                try:
                    assert await kv.put("key", b"value") == 1
                except NOT_SERVED as exc:
                    failed.append(f"KV{n} put: {exc!r}")
            await js.add_stream(name="PULLED", subjects=["pulled.>"], num_replicas=3, placement=REPLICAS)
            for n in range(CONSUMER_CREATES):
                await js.publish(f"pulled.{n}", f"m{n}".encode())
                sub = await js.pull_subscribe(f"pulled.{n}", durable=f"C{n}", stream="PULLED")
                try:
                    [msg] = await sub.fetch(1, timeout=5)
                    assert msg.data == f"m{n}".encode()
                except (*NOT_SERVED, nats.errors.TimeoutError) as exc:
                    failed.append(f"C{n} pull: {exc!r}")
        finally:
            await nc.close()
        return failed

    assert asyncio.run(scenario()) == []


def test_a_publish_right_after_a_stepdown_waits_for_the_new_leaders_interest(cluster: LocalCluster) -> None:
    """The old leader answers the stepdown at once; the new leader's interest takes LAG_MS more to reach
    the client's node, a follower. Without the publish hold every one of these publishes got 503."""
    assert cluster.toxiproxy_url is not None
    faults = LinkFaults(cluster.toxiproxy_url)

    async def once(n: int) -> str | None:
        name = f"HANDED{n}"
        nc = await nats.connect(cluster.spec("n1").client_url)
        try:
            info = await nc.jetstream(timeout=10).add_stream(
                name=name, subjects=[f"handed.{n}"], num_replicas=3, placement=REPLICAS
            )
        finally:
            await nc.close()
        assert info.cluster is not None and info.cluster.leader and info.cluster.replicas
        # members: nodes, or workers of several-worker nodes (what the stream's group names)
        client_member, new_leader = (replica.name for replica in info.cluster.replicas)
        # what the new leader's node sends the client's member: its interest, among the rest
        proxy = faults.client.get_proxy(proxy_name(node_of(new_leader), client_member))
        proxy.add_toxic(name="lag", type="latency", stream="upstream", attributes={"latency": LAG_MS})
        try:
            nc = await connect_to_member(cluster, client_member)
            try:
                stepdown = json.dumps({"placement": {"preferred": new_leader}}).encode()
                answer = json.loads((await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{name}", stepdown, 10)).data)
                assert answer.get("success") is True, answer
                try:
                    ack = await nc.jetstream(timeout=10).publish(f"handed.{n}", b"after the stepdown")
                except NOT_SERVED as exc:
                    return f"{name}: {exc!r}"
                assert ack.seq == 1
                info = await nc.jetstream(timeout=10).stream_info(name)
                assert info.cluster is not None and info.cluster.leader == new_leader
                return None
            finally:
                await nc.close()
        finally:
            proxy.destroy_toxic("lag")

    async def scenario() -> list[str]:
        return [failure for n in range(STEPDOWNS) if (failure := await once(n)) is not None]

    assert asyncio.run(scenario()) == []
