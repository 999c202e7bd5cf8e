"""Answers reach the requester when a request took two hops and its reply interest lags on a third link.

A fresh client on node A asks for STREAM.INFO (and CONSUMER.INFO): A sends it
to the meta leader M, which passes it on to the stream leader S. A's interest
in the client's inbox goes straight from A to S. With that one link lagging,
S answers before it knows anyone wants the answer; the request's reply route
(gateway/router.py, `pass_on`) must carry it to A anyway. Without it every
such request timed out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js.api import ConsumerConfig, Placement, StreamConfig

from chaos.readafterwrite.faults import LinkFaults
from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, node_available, plan_free_nodes, proxy_name, start_faultable_links

pytestmark = pytest.mark.skipif(not node_available(), reason="needs a runnable `jetraft node`")

LAG_MS = 400
ATTEMPTS = 5
REQUEST_TIMEOUT = 3.0


@pytest.fixture
def tagged_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    specs = plan_free_nodes(3, 0)
    for spec in specs:
        spec.tags = [f"node:{spec.name}"]
    toxiproxy = start_faultable_links(specs, 0, log_path=None)
    cluster = LocalCluster(specs, tmp_path, toxiproxy=toxiproxy)
    cluster.start(timeout=60)
    try:
        yield cluster
    finally:
        cluster.stop()


async def info_from_fresh_clients(url: str, stream: str, consumer: str) -> list[str]:
    """Each attempt on a new connection, so its inbox interest is new too; what went wrong, if anything."""
    failures = []
    for _ in range(ATTEMPTS):
        nc = await nats.connect(url)
        js = nc.jetstream(timeout=REQUEST_TIMEOUT)
        try:
            assert (await js.stream_info(stream)).config.name == stream
            assert (await js.consumer_info(stream, consumer)).name == consumer
        except nats.errors.TimeoutError as exc:
            failures.append(repr(exc))
        finally:
            await nc.close()
    return failures


def test_info_passed_on_by_the_meta_leader_is_answered_despite_a_lagging_link(
    tagged_cluster: LocalCluster,
) -> None:
    meta = tagged_cluster.meta_leader()
    assert meta is not None
    names = [spec.name for spec in tagged_cluster.specs]
    leader = next(name for name in names if name != meta)
    client_node = next(name for name in names if name not in (meta, leader))
    url = tagged_cluster.spec(client_node).client_url

    async def set_up() -> str:
        nc = await nats.connect(url)
        js = nc.jetstream(timeout=10)
        await js.add_stream(
            StreamConfig(name="LAGGED", subjects=["lagged.>"], placement=Placement(tags=[f"node:{leader}"]))
        )
        await js.add_consumer("LAGGED", ConsumerConfig(durable_name="C"))
        stream_leader = (await js.stream_info("LAGGED")).cluster.leader
        assert node_of(stream_leader) == leader
        await nc.close()
        return stream_leader

    stream_leader = asyncio.run(set_up())
    assert tagged_cluster.toxiproxy_url is not None
    faults = LinkFaults(tagged_cluster.toxiproxy_url)
    # only what the client's node sends the stream leader lags: the request's own two hops do not
    proxy = faults.client.get_proxy(proxy_name(client_node, stream_leader))
    proxy.add_toxic(name="lag", type="latency", stream="upstream", attributes={"latency": LAG_MS})
    try:
        assert asyncio.run(info_from_fresh_clients(url, "LAGGED", "C")) == []
    finally:
        proxy.destroy_toxic("lag")
