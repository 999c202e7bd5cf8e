"""Who answers a Direct Get on a cluster started with no policy flags (as `make up` starts it): a member
of `_sys_` chosen at random among every replica and every mirror_direct mirror, local or remote, as
nats-server chooses; clients' own queue groups spread the same way. Once an origin stream's delete is
acknowledged, none of its replicas answers and its mirror answers its Direct Gets at once, even when a
replica hears of the delete late."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.api import StreamConfig, StreamSource

from chaos.readafterwrite.faults import LinkFaults, link_ends
from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, faultable_cluster
from local.gateway_nodes import await_interest
from tests.node.cluster_fixtures import local_cluster

RESPONDERS = {"n1", "n2", "n3", "m1"}
READS_PER_CLIENT = 400


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("spread"), nodes=3, mirror_nodes=1) as running:
        yield running


@pytest.fixture
async def clients(cluster: LocalCluster) -> AsyncIterator[dict[str, nats.NATS]]:
    connected = {
        spec.name: await nats.connect(spec.client_url, allow_reconnect=False) for spec in cluster.specs
    }
    try:
        yield connected
    finally:
        for nc in connected.values():
            await nc.close()


async def _origin_with_mirror(js: nats.js.JetStreamContext, origin: str, mirror: str) -> int:
    """An R3 origin and an R1 mirror_direct mirror of it (on the mirror node); the origin's last sequence."""
    await js.add_stream(name=origin, subjects=[f"{origin.lower()}.>"], num_replicas=3, allow_direct=True)
    seq = 0
    for i in range(5):
        seq = (await js.publish(f"{origin.lower()}.k{i}", b"v%d" % i)).seq
    info = await js.add_stream(
        StreamConfig(name=mirror, mirror=StreamSource(name=origin), mirror_direct=True, num_replicas=1)
    )
    assert info.cluster is not None and node_of(info.cluster.leader) == "m1"
    return seq


async def _until_every_responder_answered(nc: nats.NATS, stream: str, seq: int, within: float = 20.0) -> None:
    """Until each replica and the mirror has answered this client, having applied `seq`: each joins
    `_sys_` once caught up, and its interest reaches this client's node over the route mesh."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    request = json.dumps({"seq": seq, "min_last_seq": seq}).encode()
    seen: set[str] = set()
    while seen != RESPONDERS:
        assert loop.time() < deadline, f"only {sorted(seen)} answered within {within} s"
        reply = await nc.request(f"$JS.API.DIRECT.GET.{stream}", request, timeout=5)
        assert reply.headers is not None
        if "Status" not in reply.headers:
            seen.add(node_of(reply.headers["Jetraft-Node"]))


async def test_direct_gets_from_any_client_spread_over_every_replica_and_the_mirror(
    clients: dict[str, nats.NATS],
) -> None:
    js = clients["n1"].jetstream()
    seq = await _origin_with_mirror(js, "SPREAD", "SPREAD_M")
    for name, nc in clients.items():
        await _until_every_responder_answered(nc, "SPREAD", seq)
        answered: Counter[str] = Counter()
        requests = [
            nc.request("$JS.API.DIRECT.GET.SPREAD.spread.k1", b"", timeout=5) for _ in range(READS_PER_CLIENT)
        ]
        for reply in await asyncio.gather(*requests):
            assert reply.headers is not None and reply.data == b"v1"
            answered[node_of(reply.headers["Jetraft-Node"])] += 1
            expected_stream = "SPREAD_M" if node_of(reply.headers["Jetraft-Node"]) == "m1" else "SPREAD"
            assert reply.headers["Nats-Stream"] == expected_stream
        # each of the four a fair share: 100 expected, 50..150 is more than five standard deviations
        assert set(answered) == RESPONDERS, f"a client of {name}: {dict(answered)}"
        assert all(50 <= count <= 150 for count in answered.values()), f"a client of {name}: {dict(answered)}"


@pytest.fixture(scope="module")
def lagging_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with faultable_cluster(tmp_path_factory.mktemp("takeover"), nodes=3, mirror_nodes=1) as running:
        yield running


async def test_once_an_origin_is_deleted_only_its_mirror_answers_its_direct_gets(
    lagging_cluster: LocalCluster,
) -> None:
    """One replica hears of the delete late: what the meta leader sends it takes 300 ms, while the
    client's node reaches it at once. The delete is acknowledged only once that replica has stopped,
    so from then on only the mirror answers the origin's Direct Gets."""
    leaders = {lagging_cluster.meta_leader(spec.name) for spec in lagging_cluster.specs}
    assert len(leaders) == 1 and None not in leaders, leaders
    leader = leaders.pop()
    assert leader is not None
    late, client_node = [name for name in ("n1", "n2", "n3") if name != leader][:2]
    nc = await nats.connect(lagging_cluster.spec(client_node).client_url, allow_reconnect=False)
    assert lagging_cluster.toxiproxy_url is not None
    faults = LinkFaults(lagging_cluster.toxiproxy_url)
    # every link from the meta leader's node to the late node (one per worker of a several-worker node)
    slow_links = [p for p in faults.proxies_of([late]) if link_ends(p.name) == (leader, late)]
    try:
        js = nc.jetstream()
        seq = await _origin_with_mirror(js, "GONE", "GONE_M")
        await _until_every_responder_answered(nc, "GONE", seq)
        for slow_link in slow_links:
            for direction in ("upstream", "downstream"):
                slow_link.add_toxic(
                    name=f"late_{direction}", type="latency", stream=direction, attributes={"latency": 300}
                )
        assert await js.delete_stream("GONE")
        for _ in range(40):
            reply = await nc.request("$JS.API.DIRECT.GET.GONE.gone.k2", b"", timeout=1)
            assert reply.headers is not None
            answered = (reply.headers.get("Nats-Stream"), node_of(reply.headers.get("Jetraft-Node", "")))
            assert answered == ("GONE_M", "m1"), f"answered by {dict(reply.headers)} after the delete"
            assert reply.data == b"v2"
    finally:
        for slow_link in slow_links:
            for name in slow_link.toxics():
                slow_link.destroy_toxic(name)
        await nc.close()


async def test_a_client_queue_group_still_spreads_over_the_nodes(clients: dict[str, nats.NATS]) -> None:
    got: Counter[str] = Counter()
    everything = asyncio.Event()
    total = 200

    def member(name: str) -> Callable[[Msg], Awaitable[None]]:
        async def on_msg(_msg: Msg) -> None:
            got[name] += 1
            if sum(got.values()) == total:
                everything.set()

        return on_msg

    for name, nc in clients.items():
        await nc.subscribe("jobs", queue="workers", cb=member(name))
        await nc.flush()
    publisher = clients["n1"]
    # n1 knows the members on the other nodes once it knows a later subscription there
    for name in ("n2", "n3", "m1"):
        await await_interest(publisher, clients[name], f"probe.{name}")
    for i in range(total):
        await publisher.publish("jobs", str(i).encode())
    await asyncio.wait_for(everything.wait(), 10)
    assert set(got) == {"n1", "n2", "n3", "m1"}, dict(got)
