"""The `$SYS` requests operators' tools send, the account's usage in `$JS.API.INFO`, and what
STREAM.INFO says of each replica, on a real three-node jetraft cluster."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import nats
import pytest

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("sys")) as running:
        yield running


async def gather_replies(nc: nats.NATS, subject: str, body: Any, want: int, within: float = 5.0) -> list[Any]:
    """Every reply to one request that arrives within `within` seconds, or until `want` have come."""
    inbox = nc.new_inbox()
    replies: asyncio.Queue[Any] = asyncio.Queue()
    sub = await nc.subscribe(inbox, cb=replies.put)
    await nc.publish(subject, json.dumps(body).encode(), reply=inbox)
    got: list[Any] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    try:
        while len(got) < want and loop.time() < deadline:
            try:
                msg = await asyncio.wait_for(replies.get(), deadline - loop.time())
            except TimeoutError:
                break
            got.append(json.loads(msg.data))
    finally:
        await sub.unsubscribe()
    return got


def _servers(cluster: LocalCluster) -> list[str]:
    """Every server of the cluster: each node, a several-worker one included (one of its workers answers
    for it, with its supervisor's merged bodies), as each nats-server answers for itself."""
    return sorted(spec.name for spec in cluster.specs)


async def test_server_ping_is_answered_by_every_node(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    members = _servers(cluster)
    try:
        # each node's interest in the ping reaches the others over the route mesh once it is up:
        # right after the cluster starts, ask again until every server answers (bounded)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        replies = await gather_replies(nc, "$SYS.REQ.SERVER.PING", {}, want=len(members))
        while len(replies) < len(members) and loop.time() < deadline:
            replies = await gather_replies(nc, "$SYS.REQ.SERVER.PING", {}, want=len(members))
        assert sorted(r["server"]["name"] for r in replies) == members, replies
        for reply in replies:
            assert reply["server"]["cluster"] == "jetraft" and reply["server"]["ver"] == "2.15.1"
            statsz = reply["statsz"]
            # the meta group has one voter per node (a several-worker node's worker 0)
            assert statsz["active_servers"] == len(cluster.specs), statsz
            assert statsz["jetstream"]["meta"]["cluster_size"] == len(cluster.specs), statsz
        one = "n2"
        only = await gather_replies(
            nc, "$SYS.REQ.SERVER.PING", {"server_name": one, "exact_match": True}, want=3, within=1.0
        )
        assert [r["server"]["name"] for r in only] == [one]
    finally:
        await nc.close()


async def test_jsz_over_nats_and_user_info_from_the_connected_node(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[1])
    try:
        js = nc.jetstream()
        await js.add_stream(name="SYSJSZ", subjects=["sysjsz.>"], num_replicas=3)
        await js.publish("sysjsz.a", b"x")
        info = await js.stream_info("SYSJSZ")
        assert info.cluster is not None and info.cluster.leader
        replicas = sorted([info.cluster.leader, *(peer.name for peer in info.cluster.replicas or [])])
        members = _servers(cluster)
        replies = await gather_replies(nc, "$SYS.REQ.SERVER.PING.JSZ", {"streams": True}, want=len(members))
        assert sorted(reply["server"]["name"] for reply in replies) == members
        # each server shows the streams it holds a replica of (a several-worker node: one of its workers)
        holding = []
        for reply in replies:
            accounts = reply["data"].get("account_details") or [{}]
            if "SYSJSZ" in [d["name"] for d in accounts[0].get("stream_detail", [])]:
                holding.append(reply["server"]["name"])
        assert sorted(holding) == sorted(node_of(replica) for replica in replicas)
        server_id = replies[0]["server"]["id"]
        direct = await gather_replies(nc, f"$SYS.REQ.SERVER.{server_id}.VARZ", {}, want=3, within=1.0)
        assert [r["server"]["id"] for r in direct] == [server_id] and direct[0]["data"]["server_id"] == server_id
        users = await gather_replies(nc, "$SYS.REQ.USER.INFO", {}, want=3, within=1.0)
        assert len(users) == 1
        assert node_of(users[0]["server"]["name"]) == "n2" and users[0]["data"]["account"] == "$G"
        await js.delete_stream("SYSJSZ")
    finally:
        await nc.close()


async def test_account_info_adds_up_each_streams_bytes_times_its_replicas(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[2])
    try:
        js = nc.jetstream()
        await js.add_stream(name="USAGE3", subjects=["usage3.>"], num_replicas=3)
        await js.add_stream(name="USAGE1", subjects=["usage1.>"], num_replicas=1, storage="memory")
        for i in range(5):
            await js.publish("usage3.a", b"x" * (10 + i))
            await js.publish("usage1.a", b"y" * 20)
        three = (await js.stream_info("USAGE3")).state.bytes
        one = (await js.stream_info("USAGE1")).state.bytes
        assert three > 0 and one > 0
        # a follower's copy may trail its leader by what it has not applied yet: until it catches up
        for _ in range(50):
            info = await js.account_info()
            if info.storage == 3 * three:
                break
            await asyncio.sleep(0.1)
        assert info.storage == 3 * three and info.memory == one
        await js.delete_stream("USAGE3")
        await js.delete_stream("USAGE1")
    finally:
        await nc.close()


async def test_stream_info_says_when_each_replica_was_last_heard_from(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    try:
        js = nc.jetstream()
        await js.add_stream(name="HEARD", subjects=["heard.>"], num_replicas=3)
        await js.publish("heard.a", b"x")
        # a follower the leader has not heard from yet (it acknowledged after the quorum did) shows
        # as never seen, as on nats-server: within a few heartbeats both have been heard from
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while True:
            reply = await nc.request("$JS.API.STREAM.INFO.HEARD", b"", timeout=5)
            cluster_info = json.loads(reply.data)["cluster"]
            replicas = cluster_info["replicas"]
            if all(r["active"] > 0 for r in replicas) or loop.time() > deadline:
                break
            await asyncio.sleep(0.1)
        assert cluster_info["system_account"] is True and cluster_info["traffic_account"] == "$SYS"
        assert len(replicas) == 2
        # heard from within the last few heartbeats: nanoseconds, more than none and under 5 s
        assert all(0 < r["active"] < 5_000_000_000 for r in replicas), replicas
        await js.delete_stream("HEARD")
    finally:
        await nc.close()


async def test_info_names_the_cluster(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    try:
        assert nc._server_info.get("cluster") == "jetraft"
    finally:
        await nc.close()
