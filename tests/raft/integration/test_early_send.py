"""A leader sends its appends before its own fsync; nothing may commit on the strength of that unsynced copy.

The leader's RocksDB write is held open by a gate, so the appends it already
sent race ahead of its own durability, the way a slow disk would make them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raft import driver
from raft.driver import GroupOptions, RaftHost
from raft.rocks_log_storage import RocksLogEngine
from tests.raft.integration.cluster_helpers import (
    TICK,
    HostNode,
    ListMachine,
    add_group,
    connect,
    start_host,
    stop_host,
    wait_applied,
    wait_for_leader,
)


class PersistGate:
    """Holds every `persist()` of one engine until opened."""

    def __init__(self, engine: RocksLogEngine) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self.waiting = 0
        original = engine.persist

        async def gated(sync: bool = True) -> None:
            self.waiting += 1
            try:
                await self.open.wait()
            finally:
                self.waiting -= 1
            await original(sync)

        engine.persist = gated  # type: ignore[method-assign]


async def _until(predicate: object, what: str) -> None:
    # Polled: the host offers no event for a peer's acknowledgement reaching a core.
    for _ in range(500):
        if predicate():  # type: ignore[operator]
            return
        await asyncio.sleep(TICK / 4)
    raise AssertionError(f"timed out waiting until {what}")


@pytest.fixture(autouse=True)
def writes_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # Small writes are normally fsynced on the loop, which then cannot step an acknowledgement before
    # its own write is done; the race these tests are about exists when the write is on the writer
    # thread (every write above 16 KiB), so every write goes there, through the gate.
    monkeypatch.setattr(driver, "INLINE_PERSIST_BYTES", -1)


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[list[HostNode]]:
    started = [await start_host(name, tmp_path) for name in ("n1", "n2", "n3")]
    connect(started)
    try:
        yield started
    finally:
        for node in started:
            await stop_host(node)


def _follower_match(host: RaftHost, group: str, peer: str) -> int:
    return host._groups[group].core.progress[peer].match


async def test_leader_plus_one_ack_does_not_commit_while_the_leaders_write_is_pending(
    nodes: list[HostNode],
) -> None:
    add_group(nodes, "g", ("n1", "n2", "n3"), GroupOptions(election_tick=10))
    leader = await wait_for_leader(nodes, "g")
    first = await leader.host.propose("g", b"warm-up")
    await wait_applied(nodes, "g", first)
    follower, stopped = [n for n in nodes if n is not leader]
    await stop_host(stopped)
    nodes.remove(stopped)
    assert leader.engine is not None
    gate = PersistGate(leader.engine)
    gate.open.clear()

    index = leader.host.status("g").last_index + 1
    proposal = leader.host.propose_nowait("g", b"x")
    await _until(lambda: _follower_match(leader.host, "g", follower.name) >= index, "the follower acked")
    assert gate.waiting, "the leader's write must still be pending"
    # Durable on the follower only: 1 of 3. The leader's unsynced copy must not make it 2.
    assert leader.host.status("g").commit_index < index
    assert follower.host.status("g").commit_index < index
    assert not proposal.done()

    gate.open.set()
    assert await asyncio.wait_for(proposal, 10) == index
    await wait_applied([leader, follower], "g", index)


async def test_a_learner_never_applies_what_a_lone_voter_has_not_yet_written(tmp_path: Path) -> None:
    voter = await start_host("v1", tmp_path)
    learner = await start_host("l1", tmp_path)
    both = [voter, learner]
    connect(both)
    try:
        for node in both:
            node.machines["g"] = ListMachine()
            node.host.add_group("g", node.machines["g"], voters=("v1",), learners=("l1",))
        await wait_for_leader(both, "g")
        first = await voter.host.propose("g", b"warm-up")
        await wait_applied(both, "g", first)
        assert voter.engine is not None
        gate = PersistGate(voter.engine)
        gate.open.clear()

        index = voter.host.status("g").last_index + 1
        proposal = voter.host.propose_nowait("g", b"x")
        # The leader's append travels before its write; the learner stores and acks it.
        await _until(lambda: _follower_match(voter.host, "g", "l1") >= index, "the learner acked")
        assert gate.waiting
        # Were the commit index to count the voter's unsynced copy, the learner would
        # have applied an entry that a crash of the voter now would erase.
        assert [data for _, data in learner.machines["g"].values] == [b"warm-up"]
        assert learner.host.status("g").commit_index < index
        assert not proposal.done()

        gate.open.set()
        assert await asyncio.wait_for(proposal, 10) == index
        await wait_applied(both, "g", index)
        assert [data for _, data in learner.machines["g"].values] == [b"warm-up", b"x"]
    finally:
        for node in both:
            await stop_host(node)
