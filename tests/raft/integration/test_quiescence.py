"""Idle groups quiesce on real hosts: no Raft message at all while idle, only one keepalive frame per pair
of nodes now and then; a proposal wakes a group, and a leader's node going away wakes its followers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from raft.driver import GroupOptions
from tests.raft.integration.cluster_helpers import (
    TICK,
    HostNode,
    add_group,
    running_hosts,
    stop_host,
    wait_applied,
    wait_for_leader,
)

NAMES = ("n1", "n2", "n3")
GROUPS = [f"g{i}" for i in range(20)]
QUIESCING = GroupOptions(election_tick=20, heartbeat_tick=4, quiesce=True)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[list[HostNode]]:
    async with running_hosts(NAMES, tmp_path) as nodes:
        yield nodes


async def _until(predicate: Callable[[], bool], within: float, what: str) -> None:
    # Polled: quiescing is a core's decision at a heartbeat tick, with no event of its own.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        assert loop.time() < deadline, f"{what} within {within} s"
        await asyncio.sleep(5 * TICK)


async def _start_groups(cluster: list[HostNode], options: GroupOptions) -> None:
    for index, group in enumerate(GROUPS):
        # each node first in a third of the groups, as placement does
        voters = [NAMES[(index + k) % 3] for k in range(3)]
        add_group(cluster, group, voters, options)
        for node in cluster:
            if node.name == voters[0]:
                node.host.campaign(group)
    for group in GROUPS:
        await wait_for_leader(cluster, group)


def _messages_sent(cluster: list[HostNode]) -> int:
    return sum(node.host.transport.stats.messages_sent for node in cluster)


async def test_idle_groups_quiesce_and_send_no_raft_message(cluster: list[HostNode]) -> None:
    await _start_groups(cluster, QUIESCING)
    await _until(
        lambda: all(node.host.quiesced_groups() == len(GROUPS) for node in cluster),
        10,
        "not every group quiesced",
    )
    messages, frames = _messages_sent(cluster), sum(n.host.transport.stats.frames_sent for n in cluster)
    await asyncio.sleep(1.0)  # a measured interval: what an idle second costs
    assert _messages_sent(cluster) == messages
    frames_per_second = sum(n.host.transport.stats.frames_sent for n in cluster) - frames
    # keepalives only: every 4 ticks, on each of the 6 links
    assert 0 < frames_per_second <= 6 * (1 / (4 * TICK)) * 1.5, frames_per_second


async def test_without_quiescence_idle_groups_keep_heartbeating(cluster: list[HostNode]) -> None:
    await _start_groups(cluster, GroupOptions(election_tick=20, heartbeat_tick=4))
    messages = _messages_sent(cluster)
    await asyncio.sleep(1.0)
    # 20 leaders, 2 followers each, a heartbeat and its answer every 4 ticks
    assert _messages_sent(cluster) - messages > len(GROUPS) * 2 * 2 * 5


async def test_a_proposal_wakes_a_quiesced_group_and_commits_everywhere(cluster: list[HostNode]) -> None:
    await _start_groups(cluster, QUIESCING)
    await _until(lambda: all(n.host.quiesced_groups() == len(GROUPS) for n in cluster), 10, "no quiescence")
    leader = await wait_for_leader(cluster, "g7")
    index = await asyncio.wait_for(leader.host.propose("g7", b"woken"), 5)
    await wait_applied(cluster, "g7", index)
    assert all((index, b"woken") in node.machines["g7"].values for node in cluster)
    await _until(
        lambda: all(n.host.quiesced_groups() == len(GROUPS) for n in cluster), 10, "no quiescence again"
    )


async def test_a_leader_node_that_goes_away_is_replaced_in_its_quiesced_groups(
    cluster: list[HostNode],
) -> None:
    await _start_groups(cluster, QUIESCING)
    await _until(lambda: all(n.host.quiesced_groups() == len(GROUPS) for n in cluster), 10, "no quiescence")
    gone = cluster[0]
    led = [group for group in GROUPS if gone.host.is_leader(group)]
    assert led
    cluster.remove(gone)  # stopped here, not by the fixture
    await stop_host(gone)
    rest = cluster
    loop = asyncio.get_running_loop()
    started = loop.time()
    for group in led:
        leader = await wait_for_leader(rest, group, timeout=10)
        index = await asyncio.wait_for(leader.host.propose(group, b"after"), 5)
        await wait_applied(rest, group, index)
    # the liveness timeout (1 s) and an election (20-40 ticks)
    assert loop.time() - started < 1.0 + 2 * 20 * TICK * 2 + 2.0
