"""A deleted stream's replica that a node has not stopped yet must not disturb the stream re-created under
the same name: each incarnation has a Raft group of its own.

With one group name for every incarnation this failed 2 runs in 4 here: the frozen node, woken, answered
the new group's appends from the old group at its higher term, the new leader stepped down, and the
publishes that followed found no stream leader."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from nats.js import JetStreamContext
from nats.js.errors import ServiceUnavailableError

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.chaos.node_metrics import scrape, value
from tests.node.cluster_fixtures import direct_get_from_every_replica, local_cluster

STREAM = "REBORN"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path) as running:
        yield running


async def _leader(js: JetStreamContext) -> tuple[str, str]:
    """(leader, raft group) once the stream has a leader; polled: no advisory announces one."""
    for _ in range(200):
        try:
            info = await js.stream_info(STREAM)
        except ServiceUnavailableError:  # no leader at this moment: an election is on
            await asyncio.sleep(0.05)
            continue
        if info.cluster is not None and info.cluster.leader:
            return info.cluster.leader, info.cluster.raft_group or ""
        await asyncio.sleep(0.05)
    raise AssertionError(f"{STREAM} has no leader")


async def test_a_frozen_replica_of_the_deleted_stream_leaves_the_new_one_alone(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    js = nc.jetstream(timeout=10)
    try:
        await js.add_stream(name=STREAM, subjects=["reborn.>"], num_replicas=3)
        for i in range(5):
            await js.publish("reborn.x", b"old-%d" % i)
        # each stepdown is an election: the old incarnation's term climbs well above a new group's
        for _ in range(3):
            await nc.request(f"$JS.API.STREAM.LEADER.STEPDOWN.{STREAM}", b"", timeout=10)
            await _leader(js)
        old_leader, _ = await _leader(js)
        meta_leader = cluster.meta_leader()
        # freeze a follower of the old stream that leads nothing, with its replica still running; the
        # client talks to the old stream's leader from now on
        frozen = next(s.name for s in cluster.specs if s.name not in (node_of(old_leader), meta_leader))
        await nc.close()
        nc = await nats.connect(cluster.spec(old_leader).client_url)
        js = nc.jetstream(timeout=10)
        pids = cluster.node_pids(frozen)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            await js.delete_stream(STREAM)
            # placed at once, while the frozen node's route still counts as up: it is a peer again
            info = await js.add_stream(
                name=STREAM, subjects=["reborn.>"], num_replicas=3, allow_direct=True
            )
            assert info.cluster is not None
            assert frozen in [node_of(peer) for peer in [info.cluster.leader, *(p.name for p in info.cluster.replicas or [])]]
            new_leader, new_group = await _leader(js)
            for i in range(5):
                assert (await js.publish("reborn.x", b"new-%d" % i)).seq == i + 1
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        # the frozen node wakes to the new group's appends before it has caught up with the meta log
        for i in range(5, 50):
            assert (await js.publish("reborn.x", b"new-%d" % i)).seq == i + 1
        # until every replica of the new stream has all 50 (Direct Get is answered by each replica)
        request = b'{"last_by_subj": "reborn.x", "min_last_seq": 50}'
        for reply in await direct_get_from_every_replica(nc, STREAM, request):
            assert reply.headers is not None and reply.headers.get("Nats-Sequence") == "50", reply.headers
            assert reply.data == b"new-49"
        # the new group's leader was never deposed by the old group's higher term: its term is 1, or 2
        # after one hand-over to its preferred leader (placement's first peer), which may come late on a
        # loaded machine; a deposition would show the old incarnation's term, 4 or more
        leader_now, group_now = await _leader(js)
        assert group_now == new_group
        term = value(scrape(cluster.spec(leader_now).http_url), "jetraft_raft_term", group=new_group)
        assert term <= 2, (new_leader, leader_now, term)
        for seq in (1, 50):
            assert (await js.get_msg(STREAM, seq=seq)).data.startswith(b"new-")
    finally:
        await nc.close()
