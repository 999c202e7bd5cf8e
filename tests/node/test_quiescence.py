"""A cluster whose idle Raft groups quiesce (the default; `--quiesce` here says so) still does everything it did:
idle streams answer publishes and reads at once, and a leader's node killed while its groups are
quiesced is replaced (the others' node liveness wakes its followers)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest

from local.cluster import LocalCluster
from tests.node.cluster_fixtures import local_cluster

STREAMS = 6


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path, extra_args=["--quiesce"]) as running:
        yield running


async def test_quiesced_streams_serve_and_survive_their_leaders_node(cluster: LocalCluster) -> None:
    nc = await nats.connect(cluster.client_urls[1])
    try:
        js = nc.jetstream(timeout=10)
        for index in range(STREAMS):
            await js.add_stream(name=f"Q{index}", subjects=[f"q.{index}"], num_replicas=3)
            await js.publish(f"q.{index}", b"first")
        # idle long enough for every group to quiesce (two heartbeat rounds after the last write)
        await asyncio.sleep(2.0)
        leaders = {}
        for index in range(STREAMS):
            info = await js.stream_info(f"Q{index}")
            assert info.state.messages == 1
            assert info.cluster is not None and info.cluster.leader
            leaders[f"Q{index}"] = info.cluster.leader
            assert (await js.publish(f"q.{index}", b"second")).seq == 2
            assert (await js.get_msg(f"Q{index}", seq=2)).data == b"second"
        await asyncio.sleep(2.0)
    finally:
        await nc.close()

    # n1 dies while its groups are quiesced: the others learn it from the keepalives' silence
    cluster.kill_node("n1")
    nc = await nats.connect(cluster.client_urls[1])
    try:
        js = nc.jetstream(timeout=10)
        loop = asyncio.get_running_loop()
        for index in range(STREAMS):
            deadline = loop.time() + 20  # liveness (1 s), an election (1-2 s), meta failover if n1 led it
            while True:
                try:
                    ack = await js.publish(f"q.{index}", b"third", timeout=2)
                    break
                except (
                    nats.errors.TimeoutError,
                    nats.errors.NoRespondersError,
                    nats.js.errors.NoStreamResponseError,
                ):
                    assert loop.time() < deadline, (
                        f"Q{index} (led by {leaders[f'Q{index}']}) never took a write"
                    )
                    await asyncio.sleep(0.2)
            assert ack.seq == 3
    finally:
        await nc.close()


async def test_every_node_restarted_in_turn_while_its_groups_sleep_and_every_stream_answers_at_once(
    cluster: LocalCluster,
) -> None:
    """A restart loses a node's volatile Raft state: the quiesced leaders of its groups learn it from
    its new incarnation's keepalives and wake, and groups it led elect anew through the others'
    liveness. From another node, right after each restart, every stream answers INFO and takes a
    write within a client timeout each, no retry: nothing is left unanswered."""
    nc = await nats.connect(cluster.client_urls[0])
    try:
        js = nc.jetstream(timeout=10)
        for index in range(STREAMS):
            await js.add_stream(name=f"R{index}", subjects=[f"r.{index}"], num_replicas=3)
            await js.publish(f"r.{index}", b"first")
    finally:
        await nc.close()
    for round_no, victim in enumerate(("n1", "n2", "n3")):
        await asyncio.sleep(2.0)  # idle long enough for every group to quiesce
        cluster.kill_node(victim)
        cluster.start_node(victim)
        other = cluster.client_urls[(round_no + 1) % 3]
        nc = await nats.connect(other)
        try:
            js = nc.jetstream(timeout=10)
            for index in range(STREAMS):
                info = await js.stream_info(f"R{index}")
                assert info.state.messages == round_no + 1, (victim, info.state)
                assert (await js.publish(f"r.{index}", b"again", timeout=10)).seq == round_no + 2
        finally:
            await nc.close()
        # Back before the next one goes: a node takes seconds to start (more with several workers under
        # load), and the next kill would otherwise leave one node of three, which no R3 group survives.
        await asyncio.to_thread(cluster.wait_ready, 60.0, [victim])
