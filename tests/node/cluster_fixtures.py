"""Real jetraft clusters for the integration tests: processes on 127.0.0.1, stopped by PID."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import nats
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import PubAck

from cluster.runtime.workers import node_of
from local.cluster import LocalCluster, plan_free_nodes
from tests.pipeline.servers import when_served


@contextmanager
def local_cluster(
    data_dir: Path,
    nodes: int = 3,
    mirror_nodes: int = 0,
    extra_args: list[str] | None = None,
    workers: int | None = None,
) -> Iterator[LocalCluster]:
    """A started cluster, stopped on exit; `workers` per node ($JETRAFT_TEST_WORKERS or 1 unless given)."""
    specs = plan_free_nodes(nodes, mirror_nodes, workers)
    cluster = LocalCluster(specs, data_dir, extra_args=extra_args)
    cluster.start(timeout=60)
    try:
        yield cluster
    finally:
        cluster.stop()


def log_problems(cluster: LocalCluster) -> list[str]:
    """Lines of the nodes' logs that show an unhandled error: a traceback, an exception logged with
    its stack, or asyncio's "never retrieved" (a failed future or task nobody looked at)."""
    problems = []
    for spec in cluster.specs:
        path = cluster.log_dir / f"{spec.name}.log"
        for line in path.read_text(errors="replace").splitlines() if path.exists() else ():
            if "never retrieved" in line or "Traceback" in line or '"exception":' in line:
                problems.append(f"{spec.name}: {line[:400]}")
    return problems


async def connect_to_member(cluster: LocalCluster, member: str, **options: Any) -> nats.NATS:
    """A client of cluster member `member`: a node, or one worker of a several-worker node, whose
    client port all its workers share (the kernel picks one per connection, so connect until it is
    the one wanted; each attempt misses with probability 1 - 1/workers)."""
    url = cluster.spec(member).client_url
    for _ in range(64):
        nc = await nats.connect(url, **options)
        if nc._server_info.get("server_name") == member:
            return nc
        await nc.close()
    raise AssertionError(f"64 connections to {url} never reached {member}")


async def publish_when_served(
    js: JetStreamContext, subject: str, payload: bytes, headers: dict[str, str] | None = None
) -> PubAck:
    """A publish to a stream created a moment ago, through `when_served`."""
    return await when_served(lambda: js.publish(subject, payload, headers=headers), subject)


async def direct_get_from_every_replica(
    nc: nats.NATS, stream: str, request: bytes, within: float = 20.0
) -> list[Msg]:
    """Direct Get `request` until each of the three replicas has answered (each request reaches one
    member of `_sys_` at random, and a replica joins once it has caught up); every reply, for the
    caller to check. Bounded by time, not by a count: a fast loop could ask 400 times before a
    replica that was just woken or started has caught up."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    replies: list[Msg] = []
    seen: set[str] = set()
    while len(seen) < 3:
        if loop.time() > deadline:
            raise AssertionError(f"only {sorted(seen)} answered for {stream} within {within} s")
        reply = await nc.request(f"$JS.API.DIRECT.GET.{stream}", request, timeout=5)
        assert reply.headers is not None, reply
        replies.append(reply)
        seen.add(reply.headers["Jetraft-Node"])
    return replies


async def every_replica_applied(nc: nats.NATS, stream: str, subject: str, seq: int) -> None:
    """Until all three replicas have applied `seq`: nats-py's KV reads are Direct Gets, answered by any replica, so a read right after a write may be stale until then (that is Direct Get's trade-off)."""
    request = json.dumps({"last_by_subj": subject, "min_last_seq": seq}).encode()
    for reply in await direct_get_from_every_replica(nc, stream, request):
        assert reply.headers is not None and int(reply.headers["Jetraft-Last-Sequence"]) >= seq


async def subscribe_on_follower(
    cluster: LocalCluster, js: nats.js.JetStreamContext, stream: str, dest: str
) -> tuple[nats.NATS, asyncio.Queue[Msg]]:
    """A subscriber on `dest` on a node that does not lead `stream`, once its interest reaches the leader."""
    info = await js.stream_info(stream)
    assert info.cluster is not None and info.cluster.leader
    leader = info.cluster.leader
    follower = next(spec for spec in cluster.specs if spec.name != node_of(leader))
    sub_client = await nats.connect(follower.client_url)
    received: asyncio.Queue[Msg] = asyncio.Queue()
    await sub_client.subscribe(dest, cb=received.put)
    await sub_client.flush()
    leader_client = await connect_to_member(cluster, leader)
    try:
        probe = dest.replace(">", "probe")
        for _ in range(100):
            await leader_client.publish(probe, b"")
            try:
                first = await asyncio.wait_for(received.get(), 0.2)
            except TimeoutError:
                continue
            assert first.subject == probe
            break
        else:
            raise AssertionError(f"{dest} interest never reached the leader {leader}")
    finally:
        await leader_client.close()
    while not received.empty():  # later probes still on their way
        assert received.get_nowait().subject == probe
    return sub_client, received
