"""A Nats-Msg-Id seen within the duplicate window is refused after a restart too, now that a replica reads
the window from its store when first needed rather than while it starts (cluster/stream/dedup.py)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
from nats.js.api import PubAck

from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster

MESSAGES = 300


async def _api(nc: nats.NATS, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    reply = await nc.request(subject, json.dumps(body).encode() if body is not None else b"", timeout=5)
    answer: dict[str, Any] = json.loads(reply.data)
    return answer


async def _until(check: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not within {within} s")
        await asyncio.sleep(0.1)


async def _publish(nc: nats.NATS, subject: str, msg_id: str, within: float = 30.0) -> PubAck:
    """A publish with a msg id, retried while the stream is not served yet (a node just restarted,
    or a leader just stepped down): a retry of the same id is what a client does then."""
    js = nc.jetstream()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            return await js.publish(subject, b"again", timeout=2, headers={"Nats-Msg-Id": msg_id})
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError, nats.js.errors.APIError):
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _fill(url: str, stream: str, replicas: int) -> None:
    nc = await nats.connect(url)
    try:
        created = await _api(
            nc,
            f"$JS.API.STREAM.CREATE.{stream}",
            {"name": stream, "subjects": [f"{stream}.>"], "num_replicas": replicas},
        )
        assert "error" not in created, created
        js = nc.jetstream()
        for n in range(1, MESSAGES + 1):
            headers = {"Nats-Msg-Id": f"id-{n}"} if n % 3 else None  # every third without an id
            ack = await js.publish(f"{stream}.x", b"m", headers=headers)
            assert ack.seq == n and not ack.duplicate
    finally:
        await nc.close()


async def _duplicates_are_caught(url: str, stream: str, fresh_seq: int) -> None:
    nc = await nats.connect(url)
    try:

        async def served() -> bool:
            answer = await _api(nc, f"$JS.API.STREAM.INFO.{stream}")
            return answer.get("state", {}).get("messages") == fresh_seq - 1

        await _until(served, 60, f"{stream} to answer with its messages")
        again = await _publish(nc, f"{stream}.x", "id-5")
        assert (again.seq, again.duplicate) == (5, True)
        again = await _publish(nc, f"{stream}.x", f"id-{MESSAGES - 1}")
        assert (again.seq, again.duplicate) == (MESSAGES - 1, True)
        fresh = await _publish(nc, f"{stream}.x", f"new-{fresh_seq}")
        assert (fresh.seq, bool(fresh.duplicate)) == (fresh_seq, False)
    finally:
        await nc.close()


def _restart_all(cluster: LocalCluster, crash: bool) -> None:
    for spec in cluster.specs:
        if crash:
            cluster.kill_node(spec.name, signal.SIGKILL)
        else:
            cluster.stop_node(spec.name)
    for spec in cluster.specs:
        cluster.restart_node(spec.name)
    cluster.wait_ready(60)


async def test_a_duplicate_after_a_restart_of_one_node_is_caught(tmp_path: Path) -> None:
    with local_cluster(tmp_path, nodes=1) as cluster:
        url = cluster.client_urls[0]
        await _fill(url, "ONE", 1)
        _restart_all(cluster, crash=False)
        await _duplicates_are_caught(url, "ONE", MESSAGES + 1)
        _restart_all(cluster, crash=True)  # no saved index, no clean stop: the store is scanned
        await _duplicates_are_caught(url, "ONE", MESSAGES + 2)


async def test_a_duplicate_after_a_restart_and_a_leader_change_is_caught(tmp_path: Path) -> None:
    with local_cluster(tmp_path, nodes=3) as cluster:
        await _fill(cluster.client_urls[0], "THREE", 3)
        _restart_all(cluster, crash=False)
        await _duplicates_are_caught(cluster.client_urls[1], "THREE", MESSAGES + 1)
        # the duplicates above were answered by the leader alone: the followers' windows are still
        # unread, and the next leader reads its own when its first publish with an id comes
        nc = await nats.connect(cluster.client_urls[2])
        try:
            before = (await _api(nc, "$JS.API.STREAM.INFO.THREE"))["cluster"]["leader"]
            stepdown = await _api(nc, "$JS.API.STREAM.LEADER.STEPDOWN.THREE")
            assert stepdown.get("success") is True, stepdown

            async def new_leader() -> bool:
                leader = (await _api(nc, "$JS.API.STREAM.INFO.THREE")).get("cluster", {}).get("leader")
                return leader not in (None, before)

            await _until(new_leader, 30, "a new leader")
        finally:
            await nc.close()
        await _duplicates_are_caught(cluster.client_urls[2], "THREE", MESSAGES + 2)
