"""Leadership: a leader cut off from its majority answers no coherent read once its lease is over; stepdown
moves the leader."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator

import nats
import pytest

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import connect_to_member, local_cluster, log_problems


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # local-first: a request is handled by the node the client is connected to whenever it can be
    with local_cluster(
        tmp_path_factory.mktemp("leadership"), extra_args=["--direct-get-policy", "local-first"]
    ) as c:
        yield c


async def test_isolated_leader_answers_no_msg_get(cluster: LocalCluster) -> None:
    admin = await nats.connect(cluster.client_urls[0])
    js = admin.jetstream()
    info = await js.add_stream(name="ISO", subjects=["iso.>"], num_replicas=3)
    await js.publish("iso.a", b"before")
    await admin.close()
    leader = info.cluster.leader
    followers = [spec.name for spec in cluster.specs if spec.name != node_of(leader)]

    nc = await connect_to_member(cluster, leader)  # the leader itself, not a sibling worker of it
    request = json.dumps({"last_by_subj": "iso.a"}).encode()
    ok = json.loads((await nc.request("$JS.API.STREAM.MSG.GET.ISO", request, timeout=5)).data)
    assert "message" in ok
    # freeze both followers: the leader is alive and reachable by clients, but has no majority
    frozen = [pid for name in followers for pid in cluster.node_pids(name)]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        # In its lease (0.9 s after the last round a quorum answered, raft/core.py RaftConfig.read_lease) the
        # leader may still answer: nobody else can be elected before it ends, so nothing newer exists. Once
        # the lease is over it answers nothing but 503 (its ReadIndex round finds no quorum).
        loop = asyncio.get_running_loop()
        frozen_at = loop.time()
        while True:
            sent = loop.time()
            reply = json.loads((await nc.request("$JS.API.STREAM.MSG.GET.ISO", request, timeout=10)).data)
            if "message" not in reply:
                break
            assert reply["message"] == ok["message"]
            # the lease began before the freeze, with the last round: asked 1 s after it, no answer is due
            assert sent - frozen_at < 1.0, "a cut-off leader answered after its lease"
        assert reply["error"]["code"] == 503
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    await nc.close()
    # the next tests start from a whole cluster again: every node back, with a meta leader
    await asyncio.to_thread(cluster.wait_ready, 30.0)
    # the reads the deposed leader had asked for failed (NotLeaderError) after it closed: each was
    # answered and its failure taken, nothing left for asyncio to report
    assert log_problems(cluster) == []


async def test_leader_stepdown_moves_leadership(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[1])
    js = nc.jetstream()
    info = await js.add_stream(name="STEP", subjects=["step.>"], num_replicas=3)
    before = info.cluster.leader
    # Asked straight after the stepdown, INFO may meet the moment between leaders (the new leader's
    # interest still on its way to the meta leader): it waits for the new leader instead of a 503.
    for seq in range(1, 6):
        reply = json.loads((await nc.request("$JS.API.STREAM.LEADER.STEPDOWN.STEP", b"", timeout=10)).data)
        assert reply == {"type": "io.nats.jetstream.api.v1.stream_leader_stepdown_response", "success": True}
        after = (await js.stream_info("STEP")).cluster.leader
        assert after != before
        assert (await js.publish("step.x", b"still serving")).seq == seq
        before = after
    await nc.close()
    assert log_problems(cluster) == []


async def test_direct_get_responders_leave_when_allow_direct_is_turned_off(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[2])
    js = nc.jetstream()
    config = (
        await js.add_stream(name="TOGGLE", subjects=["toggle.>"], num_replicas=3, allow_direct=True)
    ).config
    await js.publish("toggle.a", b"x")
    # local-first: this node's replica answers, once it has applied the publish
    reply = await nc.request("$JS.API.DIRECT.GET.TOGGLE", b'{"seq":1,"min_last_seq":1}', timeout=5)
    assert reply.data == b"x"
    config.allow_direct = False
    await js.update_stream(config)
    # The update is answered once the leader applied it; each follower leaves `_sys_` when it applies
    # it too, a moment later. Until then a follower may still answer (a stale config, like a stale
    # read), and a request routed to a follower just as it leaves goes unanswered (its node had not yet
    # heard that the follower left, as with nats-server's interest propagation); within a bounded time
    # nobody answers and the client is told so at once.
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            await nc.request("$JS.API.DIRECT.GET.TOGGLE", b'{"seq":1}', timeout=2)
        except nats.errors.NoRespondersError:
            break
        except nats.errors.TimeoutError:
            pass
        assert asyncio.get_running_loop().time() < deadline, "a replica still answers Direct Gets"
        await asyncio.sleep(0.05)
    # and it stays that way
    for _ in range(5):
        with pytest.raises(nats.errors.NoRespondersError):
            await nc.request("$JS.API.DIRECT.GET.TOGGLE", b'{"seq":1}', timeout=5)
    await nc.close()
