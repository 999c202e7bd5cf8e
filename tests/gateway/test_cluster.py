"""Three gateway-only nodes (`python -m gateway.standalone` processes on free 127.0.0.1 ports)
in a full route mesh, with unmodified nats-py clients on different nodes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
import pytest_asyncio
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError

from local.gateway_nodes import NodeProcess, await_interest, gateway_cluster

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIMEOUT = 5.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster() -> AsyncIterator[list[NodeProcess]]:
    async with gateway_cluster(["n1", "n2", "n3"]) as nodes:
        yield nodes


@contextlib.asynccontextmanager
async def clients(*urls: str, **options: Any) -> AsyncIterator[list[Client]]:
    opened: list[Client] = []
    try:
        for url in urls:
            opened.append(await nats.connect(url, allow_reconnect=False, connect_timeout=TIMEOUT, **options))
        yield opened
    finally:
        for client in opened:
            await client.close()


async def test_connect_urls_list_every_node(cluster: list[NodeProcess]) -> None:
    async with clients(cluster[0].url) as [nc]:
        urls = set(nc._server_info["connect_urls"])
        assert urls == {f"127.0.0.1:{node.port}" for node in cluster}


async def test_pub_sub_across_nodes_with_wildcards_and_headers(cluster: list[NodeProcess]) -> None:
    n1, n2, n3 = cluster
    async with clients(n1.url, n2.url, n3.url) as [pub, sub2, sub3]:
        star = await sub2.subscribe("x.orders.*")
        tail = await sub3.subscribe("x.orders.>")
        await await_interest(pub, sub2, "x.probe.2")
        await await_interest(pub, sub3, "x.probe.3")
        await pub.publish("x.orders.new", b"one", headers={"K": "v"})
        await pub.publish("x.orders.new.eu", b"two")
        msg = await star.next_msg(timeout=TIMEOUT)
        assert (msg.subject, msg.data, msg.headers) == ("x.orders.new", b"one", {"K": "v"})
        assert [(await tail.next_msg(timeout=TIMEOUT)).data for _ in range(2)] == [b"one", b"two"]


async def test_each_message_crosses_once_in_order(cluster: list[NodeProcess]) -> None:
    n1, n2, _ = cluster
    async with clients(n1.url, n2.url) as [pub, sub_client]:
        sub = await sub_client.subscribe("x.seq")
        await await_interest(pub, sub_client, "x.seq.probe")
        for i in range(500):
            await pub.publish("x.seq", str(i).encode())
        got = [int((await sub.next_msg(timeout=TIMEOUT)).data) for _ in range(500)]
        assert got == list(range(500))
        # A marker sent after them arrives with nothing duplicated in between.
        await pub.publish("x.seq", b"-1")
        assert (await sub.next_msg(timeout=TIMEOUT)).data == b"-1"


async def queue_deliveries(
    members_on: list[NodeProcess], publisher_on: NodeProcess, subject: str, total: int
) -> dict[str, int]:
    """One queue-group member on each node of `members_on`, `total` messages published from
    `publisher_on`: how many each node's member got."""
    counts = {node.name: 0 for node in members_on}
    markers: dict[str, asyncio.Event] = {node.name: asyncio.Event() for node in members_on}
    async with clients(*(node.url for node in members_on)) as members, clients(publisher_on.url) as [pub]:
        for node, member in zip(members_on, members, strict=True):

            async def on_job(_msg: Msg, name: str = node.name) -> None:
                counts[name] += 1

            async def on_marker(_msg: Msg, name: str = node.name) -> None:
                markers[name].set()

            await member.subscribe(subject, queue="workers", cb=on_job)
            await member.subscribe(f"{subject}.done", cb=on_marker)
            await await_interest(pub, member, f"{subject}.probe.{node.name}")
        for _ in range(total):
            await pub.publish(subject, b"job")
        # Per link, messages keep their order: once each node has the marker, it has all its jobs.
        await pub.publish(f"{subject}.done", b"")
        await asyncio.wait_for(asyncio.gather(*(event.wait() for event in markers.values())), TIMEOUT)
    assert sum(counts.values()) == total
    return counts


async def test_queue_group_spreads_across_nodes(cluster: list[NodeProcess]) -> None:
    counts = await queue_deliveries(cluster, cluster[0], "x.jobs", 300)
    assert all(count > 0 for count in counts.values()), counts


async def test_local_first_policy_keeps_queue_messages_on_the_publishers_node() -> None:
    async with gateway_cluster(["l1", "l2", "l3"], extra_args=["--queue-policy", "local-first"]) as nodes:
        l1, l2, l3 = nodes
        assert await queue_deliveries(nodes, l1, "lf.jobs.a", 200) == {"l1": 200, "l2": 0, "l3": 0}
        assert await queue_deliveries(nodes, l2, "lf.jobs.b", 200) == {"l1": 0, "l2": 200, "l3": 0}
        # No member on the publisher's node: the others share, as with `random`.
        spread = await queue_deliveries([l2, l3], l1, "lf.jobs.c", 200)
        assert all(count > 0 for count in spread.values()), spread


async def test_round_robin_policy_gives_every_member_an_even_share() -> None:
    async with gateway_cluster(["r1", "r2", "r3"], extra_args=["--queue-policy", "round-robin"]) as nodes:
        assert await queue_deliveries(nodes, nodes[0], "rr.jobs", 300) == {"r1": 100, "r2": 100, "r3": 100}


async def test_request_reply_across_nodes(cluster: list[NodeProcess]) -> None:
    n1, _, n3 = cluster
    async with clients(n1.url, n3.url) as [requester, responder]:

        async def answer(msg: Msg) -> None:
            await msg.respond(b"from n3: " + msg.data)

        await responder.subscribe("x.svc", cb=answer)
        await await_interest(requester, responder, "x.svc.probe")
        for i in range(20):
            reply = await requester.request("x.svc", str(i).encode(), timeout=TIMEOUT)
            assert reply.data == f"from n3: {i}".encode()
        with pytest.raises(NoRespondersError):
            await requester.request("x.nobody", b"", timeout=TIMEOUT)


async def test_unsubscribe_withdraws_interest_across_nodes(cluster: list[NodeProcess]) -> None:
    n1, n2, _ = cluster
    async with clients(n1.url, n2.url) as [requester, responder]:

        async def answer(msg: Msg) -> None:
            await msg.respond(b"ok")

        sub = await responder.subscribe("x.brief", cb=answer)
        await await_interest(requester, responder, "x.brief.probe")
        assert (await requester.request("x.brief", b"", timeout=TIMEOUT)).data == b"ok"
        await sub.unsubscribe()
        await responder.flush()
        await await_no_responders(requester, "x.brief")


async def test_unsubscribe_with_max_across_nodes(cluster: list[NodeProcess]) -> None:
    n1, n2, _ = cluster
    async with clients(n1.url, n2.url) as [pub, sub_client]:
        sub = await sub_client.subscribe("x.limited")
        await sub.unsubscribe(limit=3)  # UNSUB <sid> 3: n2 removes it after the third delivery
        await await_interest(pub, sub_client, "x.limited.probe")
        for i in range(6):
            await pub.publish("x.limited", str(i).encode())
        assert [(await sub.next_msg(timeout=TIMEOUT)).data for _ in range(3)] == [b"0", b"1", b"2"]
        # n2 dropped the subscription by itself (nats-py sends no UNSUB of its own): n1 hears
        # the interest is gone, so a request there finds nobody.
        await await_no_responders(pub, "x.limited")


async def await_no_responders(requester: Client, subject: str, attempts: int = 100) -> None:
    """Until a request on `subject` gets the 503 (interest withdrawal travels asynchronously)."""
    for _ in range(attempts):
        try:
            await requester.request(subject, b"", timeout=0.2)
        except NoRespondersError:
            return
        except nats.errors.TimeoutError:
            continue
    pytest.fail(f"{subject} still has responders after {attempts} requests")


async def test_killed_node_interest_is_withdrawn_and_clients_reconnect() -> None:
    # Its own cluster: this test kills a node.
    async with gateway_cluster(["k1", "k2", "k3"]) as nodes:
        k1, k2, k3 = nodes
        reconnected = asyncio.Event()

        async def on_reconnect() -> None:
            reconnected.set()

        async with clients(k1.url, k3.url) as [requester, doomed]:
            roaming = await nats.connect(
                servers=[k3.url, k2.url],
                dont_randomize=True,
                reconnect_time_wait=0.05,
                max_reconnect_attempts=20,
                reconnected_cb=on_reconnect,
            )
            try:

                async def answer(msg: Msg) -> None:
                    await msg.respond(b"alive")

                await doomed.subscribe("k.svc", cb=answer)
                roaming_sub = await roaming.subscribe("k.roam")
                await await_interest(requester, doomed, "k.svc.probe")
                assert (await requester.request("k.svc", b"", timeout=TIMEOUT)).data == b"alive"
                assert roaming.connected_url is not None and roaming.connected_url.port == k3.port

                k3.kill()
                assert await asyncio.wait_for(k3.proc.wait(), TIMEOUT) != 0
                await await_no_responders(requester, "k.svc")

                await asyncio.wait_for(reconnected.wait(), TIMEOUT)
                assert roaming.connected_url is not None and roaming.connected_url.port == k2.port
                # nats-py resubscribed on k2; once that interest reaches k1, k1's messages arrive.
                await await_interest(requester, roaming, "k.roam.probe")
                await requester.publish("k.roam", b"after the crash")
                assert (await roaming_sub.next_msg(timeout=TIMEOUT)).data == b"after the crash"
            finally:
                await roaming.close()
