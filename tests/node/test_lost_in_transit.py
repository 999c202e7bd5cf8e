"""A read forwarded to a leader whose node dies before reading it is answered by the next leader.

The client's node forwards a JetStream API request to the leader that answers it (the meta leader for
INFO, the stream leader for MSG.GET) over the route mesh. If that leader's node dies with the request
unread in its socket (or still queued here), the request went down with the link, and the client
heard nothing until its timeout: right after the meta leader's node restarted, a STREAM.INFO asked on
another node stayed unanswered for 10 s (issue 20), although a new leader had been elected and every
route was up. The victim here is frozen (SIGSTOP) before the request and killed after it, so the
request is certainly in its link, unread, on every run.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster, log_problems


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path) as running:
        yield running


async def _ask_while_victim_dies(cluster: LocalCluster, victim: str, subject: str, payload: bytes) -> dict:
    """Freeze `victim`, send the request from another node's client, make sure that node has taken
    it (a flush: the node handles a client's commands in order), kill `victim`, and return the answer."""
    asker = next(spec.name for spec in cluster.specs if spec.name != victim)
    nc = await nats.connect(cluster.spec(asker).client_url)
    frozen = cluster.node_pids(victim)
    try:
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        answer = asyncio.ensure_future(nc.request(subject, payload, timeout=10))
        await nc.flush(timeout=5)
        # the request is in the link to the frozen leader, or queued for it: now the node dies
        cluster.kill_node(victim)
        return json.loads((await answer).data)
    finally:
        await nc.close()


async def test_stream_info_sent_to_a_meta_leader_that_dies_is_answered_by_the_next(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    try:
        js = nc.jetstream(timeout=10)
        await js.add_stream(name="LOST", subjects=["lost.>"], num_replicas=3)
        await js.publish("lost.a", b"kept")
    finally:
        await nc.close()
    meta_leader = cluster.meta_leader()
    assert meta_leader is not None
    info = await _ask_while_victim_dies(cluster, node_of(meta_leader), "$JS.API.STREAM.INFO.LOST", b"")
    assert "error" not in info, info
    assert info["state"]["messages"] == 1
    assert log_problems(cluster) == []


async def test_msg_get_sent_to_a_stream_leader_that_dies_is_answered_by_the_next(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[0])
    try:
        js = nc.jetstream(timeout=10)
        await js.add_stream(name="GONE", subjects=["gone.>"], num_replicas=3)
        await js.publish("gone.a", b"kept")
        info = await js.stream_info("GONE")
    finally:
        await nc.close()
    assert info.cluster is not None and info.cluster.leader
    request = json.dumps({"last_by_subj": "gone.a"}).encode()
    reply = await _ask_while_victim_dies(cluster, node_of(info.cluster.leader), "$JS.API.STREAM.MSG.GET.GONE", request)
    assert "error" not in reply, reply
    assert reply["message"]["seq"] == 1
    assert log_problems(cluster) == []
