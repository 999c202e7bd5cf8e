"""Who gets a message on a cluster started with no policy flags: Direct Gets are answered by the
replica on the client's own node, while clients' queue groups spread over the nodes, as in NATS."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import nats
import pytest
from nats.aio.msg import Msg

from local.cluster import LocalCluster
from local.gateway_nodes import await_interest
from tests.node.cluster_fixtures import local_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("default-routing")) as running:
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


async def test_each_node_answers_the_direct_gets_of_its_own_clients(clients: dict[str, nats.NATS]) -> None:
    js = clients["n1"].jetstream()
    await js.add_stream(name="HOME", subjects=["home.>"], num_replicas=3, allow_direct=True)
    ack = await js.publish("home.a", b"v1")
    for name, nc in clients.items():
        await _answered_here(nc, name, "HOME", ack.seq)
        answered: Counter[str] = Counter()
        for _ in range(30):
            reply = await nc.request("$JS.API.DIRECT.GET.HOME.home.a", b"", timeout=5)
            assert reply.headers is not None and reply.data == b"v1"
            answered[reply.headers["Jetraft-Node"]] += 1
        assert answered == {name: 30}, f"a client of {name} was answered by {dict(answered)}"


async def _answered_here(nc: nats.NATS, node: str, stream: str, seq: int, within: float = 20.0) -> None:
    """Until `node` answers its own client's Direct Get, having applied `seq`: a replica joins `_sys_`
    once it has caught up, and until then the others answer for it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    request = json.dumps({"seq": seq, "min_last_seq": seq}).encode()
    while True:
        reply = await nc.request(f"$JS.API.DIRECT.GET.{stream}", request, timeout=5)
        assert reply.headers is not None
        if reply.headers.get("Jetraft-Node") == node and "Status" not in reply.headers:
            return
        if loop.time() > deadline:
            raise AssertionError(f"{node} did not answer its own client within {within} s: {reply.headers}")
        await asyncio.sleep(0.05)


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
    # n1 knows the members on n2 and n3 once it knows a later subscription there
    for name in ("n2", "n3"):
        await await_interest(publisher, clients[name], f"probe.{name}")
    for i in range(total):
        await publisher.publish("jobs", str(i).encode())
    await asyncio.wait_for(everything.wait(), 10)
    assert set(got) == {"n1", "n2", "n3"}, dict(got)
