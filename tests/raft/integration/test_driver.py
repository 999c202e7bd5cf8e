"""RaftHost: several hosts in one process over real gRPC, on RocksDB logs or in memory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from raft.driver import (
    GroupOptions,
    LeadershipLostError,
    NotLeaderError,
    ProposalQueueFullError,
    RaftHost,
    RaftHostError,
)
from raft.rocks_log_storage import RocksLogEngine
from raft.types import ConfChange, ConfChangeType, Entry, Role
from tests.raft.integration.cluster_helpers import (
    HostNode,
    ListMachine,
    add_group,
    connect,
    running_hosts,
    start_host,
    stop_host,
    wait_applied,
    wait_for_leader,
)

NAMES = ("n1", "n2", "n3")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[list[HostNode]]:
    async with running_hosts(NAMES, tmp_path) as nodes:
        yield nodes


def _values(node: HostNode, group: str) -> list[bytes]:
    return [data for _, data in node.machines[group].values]


async def test_proposals_commit_and_apply_in_the_same_order_everywhere(cluster: list[HostNode]) -> None:
    add_group(cluster, "g", NAMES)
    leader = await wait_for_leader(cluster, "g")
    futures = [leader.host.propose_nowait("g", b"v%d" % i) for i in range(300)]
    indices = await asyncio.gather(*futures)
    assert indices == sorted(indices) and len(set(indices)) == 300
    await wait_applied(cluster, "g", indices[-1])
    expected = [b"v%d" % i for i in range(300)]
    for node in cluster:
        assert _values(node, "g") == expected
    # every entry went to disk with far fewer fsyncs than entries: group commit
    assert leader.engine is not None and leader.engine.fsyncs < 300


async def test_follower_refuses_proposals_and_names_the_leader(cluster: list[HostNode]) -> None:
    add_group(cluster, "g", NAMES)
    leader = await wait_for_leader(cluster, "g")
    follower = next(n for n in cluster if n is not leader)
    with pytest.raises(NotLeaderError) as info:
        follower.host.propose_nowait("g", b"x")
    assert info.value.leader_id == leader.name


async def test_read_index_on_leader_and_follower_sees_prior_writes(cluster: list[HostNode]) -> None:
    add_group(cluster, "g", NAMES)
    leader = await wait_for_leader(cluster, "g")
    written = await leader.host.propose("g", b"before-read")
    for node in cluster:
        index = await node.host.read_index("g")
        assert index >= written
        assert b"before-read" in _values(node, "g")


async def test_concurrent_reads_share_one_read_index_round(cluster: list[HostNode]) -> None:
    """Reads asked for in the same loop turn cost one heartbeat round together, and each still sees
    every write acknowledged before it was asked."""
    add_group(cluster, "g", NAMES)
    leader = await wait_for_leader(cluster, "g")
    written = await leader.host.propose("g", b"before-reads")
    sent_before = leader.host.transport.stats.messages_sent
    indices = await asyncio.gather(*(leader.host.read_index("g") for _ in range(200)))
    assert all(index >= written for index in indices)
    assert b"before-reads" in _values(leader, "g")
    # 200 separate rounds would send 400 heartbeats; a shared one sends 2 (and ticks a few more)
    assert leader.host.transport.stats.messages_sent - sent_before < 40


async def test_many_groups_share_one_fsync_per_iteration(cluster: list[HostNode]) -> None:
    groups = [f"g{i}" for i in range(20)]
    for group in groups:
        add_group(cluster, group, NAMES)
    leaders = {group: await wait_for_leader(cluster, group) for group in groups}
    before = {node.name: node.engine.fsyncs for node in cluster if node.engine is not None}
    results = await asyncio.gather(
        *(leaders[g].host.propose_nowait(g, b"%s-%d" % (g.encode(), i)) for i in range(20) for g in groups)
    )
    assert len(results) == 400
    for group in groups:
        assert _values(leaders[group], group) == [b"%s-%d" % (group.encode(), i) for i in range(20)]
    fsyncs = sum(node.engine.fsyncs - before[node.name] for node in cluster if node.engine is not None)
    assert fsyncs < 400  # far fewer than one per entry and group


async def test_leader_transfer_moves_leadership_and_fails_nothing_committed(cluster: list[HostNode]) -> None:
    add_group(cluster, "g", NAMES)
    leader = await wait_for_leader(cluster, "g")
    await leader.host.propose("g", b"a")
    target = next(n for n in cluster if n is not leader)
    await leader.host.transfer_leadership("g", target.name, timeout=5)
    new_leader = await wait_for_leader(cluster, "g")
    assert new_leader is target
    index = await target.host.propose("g", b"b")
    await wait_applied(cluster, "g", index)
    for node in cluster:
        assert _values(node, "g") == [b"a", b"b"]


async def test_stepping_down_fails_waiting_proposals(cluster: list[HostNode]) -> None:
    add_group(cluster, "g", NAMES, GroupOptions(election_tick=10))
    leader = await wait_for_leader(cluster, "g")
    followers = [n for n in cluster if n is not leader]
    # cut the leader off: its followers stop hearing it and it loses check-quorum
    for follower in followers:
        await follower.host.transport.remove_peer(leader.name)
        await leader.host.transport.remove_peer(follower.name)
    future = leader.host.propose_nowait("g", b"lost?")
    with pytest.raises((LeadershipLostError, NotLeaderError)):
        await asyncio.wait_for(future, 10)
    new_leader = await wait_for_leader(followers, "g")
    assert new_leader is not leader


async def test_pending_proposals_are_bounded(cluster: list[HostNode]) -> None:
    add_group(cluster, "g", NAMES, GroupOptions(max_pending_proposals=10))
    leader = await wait_for_leader(cluster, "g")
    futures = [leader.host.propose_nowait("g", b"x") for _ in range(10)]
    with pytest.raises(ProposalQueueFullError):
        leader.host.propose_nowait("g", b"one too many")
    await asyncio.gather(*futures)
    await leader.host.propose("g", b"room again")


async def test_add_learner_promote_and_remove_a_voter(tmp_path: Path, cluster: list[HostNode]) -> None:
    add_group(cluster, "g", NAMES, GroupOptions(snapshot_interval=50, compact_keep=10))
    leader = await wait_for_leader(cluster, "g")
    for i in range(120):  # past a snapshot and compaction: the newcomer needs the snapshot
        await leader.host.propose("g", b"w%d" % i)
    assert leader.host.status("g").first_index > 1

    n4 = await start_host("n4", tmp_path)
    try:
        connect([*cluster, n4])
        add_group([n4], "g", ())  # knows nothing; learns membership from the leader
        await leader.host.change_membership("g", ConfChange(ConfChangeType.ADD_LEARNER, "n4"))
        last = await leader.host.propose("g", b"after-learner")
        await wait_applied([n4], "g", last)
        assert _values(n4, "g") == _values(leader, "g")
        assert n4.machines["g"].restored_from, "the learner caught up from a snapshot"
        assert n4.host.status("g").learners == ("n4",)

        await leader.host.change_membership("g", ConfChange(ConfChangeType.ADD_VOTER, "n4"))
        assert leader.host.status("g").voters == ("n1", "n2", "n3", "n4")
        victim = next(n for n in cluster if n is not leader)
        await leader.host.change_membership("g", ConfChange(ConfChangeType.REMOVE_NODE, victim.name))
        assert victim.name not in leader.host.status("g").voters
        index = await leader.host.propose("g", b"after-remove")
        remaining = [n for n in [*cluster, n4] if n is not victim]
        await wait_applied(remaining, "g", index)
        for node in remaining:
            assert _values(node, "g")[-1] == b"after-remove"
    finally:
        await stop_host(n4)


async def test_bad_membership_change_is_refused_cleanly(cluster: list[HostNode]) -> None:
    add_group(cluster, "g", NAMES)
    leader = await wait_for_leader(cluster, "g")
    await leader.host.propose("g", b"x")
    with pytest.raises(RaftHostError, match="already a voter"):
        await leader.host.change_membership("g", ConfChange(ConfChangeType.ADD_VOTER, "n2"))


async def test_remove_group_and_restart_recovers_the_log(tmp_path: Path) -> None:
    async with running_hosts(NAMES, tmp_path) as nodes:
        add_group(nodes, "g", NAMES)
        leader = await wait_for_leader(nodes, "g")
        last = 0
        for i in range(30):
            last = await leader.host.propose("g", b"r%d" % i)
        await wait_applied(nodes, "g", last)
        for node in nodes:
            await node.host.remove_group("g")
            assert node.host.groups() == []

    # same data directories: every node recovers its log and replays it into a fresh machine
    async with running_hosts(NAMES, tmp_path) as nodes:
        add_group(nodes, "g", ())
        leader = await wait_for_leader(nodes, "g")
        index = await leader.host.propose("g", b"after-restart")
        await wait_applied(nodes, "g", index)
        for node in nodes:
            assert _values(node, "g") == [b"r%d" % i for i in range(30)] + [b"after-restart"]
            assert node.host.status("g").role in (Role.LEADER, Role.FOLLOWER)


async def test_memory_logs_work_without_an_engine() -> None:
    nodes = [await start_host(name, None) for name in NAMES]
    try:
        connect(nodes)
        add_group(nodes, "g", NAMES)
        leader = await wait_for_leader(nodes, "g")
        index = await leader.host.propose("g", b"in-memory")
        await wait_applied(nodes, "g", index)
        assert all(_values(n, "g") == [b"in-memory"] for n in nodes)
    finally:
        for node in nodes:
            await stop_host(node)


def _fsyncs_and_batches(nodes: list[HostNode]) -> dict[str, tuple[int, int]]:
    return {node.name: (node.engine.fsyncs, node.engine.batches) for node in nodes if node.engine is not None}


async def test_unsafe_no_sync_group_is_written_but_never_fsynced(cluster: list[HostNode]) -> None:
    """GroupOptions(sync=False): votes and entries reach RocksDB unsynced, so acknowledged writes are
    not durable; a sync=True group on the same host still gets its fsync."""
    add_group(cluster, "relaxed", NAMES, GroupOptions(sync=False))
    leader = await wait_for_leader(cluster, "relaxed")
    indices = await asyncio.gather(*(leader.host.propose_nowait("relaxed", b"u%d" % i) for i in range(100)))
    # every proposal acknowledged, and no node fsynced anything: not the election, not the entries
    assert all(fsyncs == 0 for fsyncs, _ in _fsyncs_and_batches(cluster).values())
    await wait_applied(cluster, "relaxed", indices[-1])
    relaxed = _fsyncs_and_batches(cluster)
    assert all(fsyncs == 0 and batches > 0 for fsyncs, batches in relaxed.values()), relaxed

    add_group(cluster, "safe", NAMES)
    safe_leader = await wait_for_leader(cluster, "safe")
    index = await safe_leader.host.propose("safe", b"synced")
    await wait_applied(cluster, "safe", index)
    after = _fsyncs_and_batches(cluster)
    assert all(after[name][0] > 0 for name in relaxed), after


async def test_committed_entries_are_applied_in_slices_of_the_group_limit(cluster: list[HostNode]) -> None:
    """GroupOptions.max_committed_size_per_ready: a burst committed at once reaches the machine in
    slices within the limit (one entry at least), in order, and every entry is applied."""
    add_group(cluster, "sliced", NAMES, GroupOptions(max_committed_size_per_ready=1024))
    leader = await wait_for_leader(cluster, "sliced")
    machine = leader.machines["sliced"]
    slices: list[list[bytes]] = []
    apply = machine.apply

    def recording_apply(entries: Sequence[Entry]) -> list[Any]:
        slices.append([entry.data for entry in entries if entry.data])
        return apply(entries)

    machine.apply = recording_apply  # type: ignore[method-assign]
    payloads = [b"%03d" % i + b"x" * 97 for i in range(200)]
    indices = await asyncio.gather(*(leader.host.propose_nowait("sliced", data) for data in payloads))
    await wait_applied(cluster, "sliced", indices[-1])
    assert [data for piece in slices for data in piece] == payloads
    # 100-byte commands count 116 bytes each towards the limit: at most 8 per slice
    assert max(len(piece) for piece in slices) <= 8
    assert len(slices) >= 25


async def test_the_quick_accessors_say_what_status_says(cluster: list[HostNode]) -> None:
    add_group(cluster, "g", NAMES)
    for node in cluster:
        assert node.host.last_index("g") == node.host.status("g").last_index == 0
    leader = await wait_for_leader(cluster, "g")
    index = await leader.host.propose_nowait("g", b"v")
    await wait_applied(cluster, "g", index)
    for node in cluster:
        status = node.host.status("g")
        assert node.host.last_index("g") == status.last_index >= index
        assert node.host.term("g") == status.term >= 1
        assert node.host.voters("g") == status.voters == tuple(sorted(NAMES))
    with pytest.raises(RaftHostError):
        leader.host.term("nope")


async def test_a_single_voters_entry_is_applied_in_the_iteration_that_writes_it(tmp_path: Path) -> None:
    """Its own write commits it: applying it waits for no further iteration, and so for none of the
    loop turns between two (what a one-node stream create or publish waits for)."""
    engine = RocksLogEngine(tmp_path / "solo")
    # no ticks while this runs: every iteration counted is one the proposals caused
    host = RaftHost("solo", engine, tick_interval=3600)
    await host.start()
    try:
        machine = ListMachine()
        host.add_group("g", machine, voters=("solo",), options=GroupOptions())
        host.campaign("g")
        for _ in range(10):  # bounded: a single voter's election is one write away
            if host.is_leader("g"):
                break
            await asyncio.wait_for(host.wait_leadership_change("g"), 10)
        assert host.is_leader("g")
        await host.propose("g", b"settle")  # the new term's empty entry is applied by now
        for index in range(20):
            before = host.iterations
            await host.propose("g", b"v%d" % index)
            assert host.iterations - before == 1, f"proposal {index}"
        assert [data for _, data in machine.values][-20:] == [b"v%d" % i for i in range(20)]
        assert engine.fsyncs >= 20  # each was durable before it was applied
    finally:
        await host.stop()
        engine.close()


async def test_a_proposal_on_an_idle_host_is_written_and_applied_in_the_next_loop_turn(tmp_path: Path) -> None:
    """The host yields twice before an iteration so that what the last one scheduled runs first (the
    writes carrying its PubAcks); once that has run, a proposal on an idle node (a one-node create)
    waits for no turn of the loop but the one that wakes the host. Right after an iteration it still
    yields first."""
    engine = RocksLogEngine(tmp_path / "solo")
    host = RaftHost("solo", engine, tick_interval=3600)  # no ticks: only the proposals wake it
    await host.start()
    try:
        host.add_group("g", ListMachine(), voters=("solo",), options=GroupOptions())
        host.campaign("g")
        for _ in range(10):  # bounded: a single voter's election is one write away
            if host.is_leader("g"):
                break
            await asyncio.wait_for(host.wait_leadership_change("g"), 10)
        await host.propose("g", b"settle")

        async def turns_until_applied() -> int:
            future = host.propose_nowait("g", b"x")
            for turn in range(1, 20):
                await asyncio.sleep(0)
                if future.done():
                    return turn
            raise AssertionError("not applied within 20 loop turns")

        for _ in range(5):
            for _ in range(3):  # the last iteration's callbacks, and theirs, have run: the host is idle
                await asyncio.sleep(0)
            assert await turns_until_applied() == 1
        # straight after an iteration (its result just delivered), the host lets that settle first
        assert await turns_until_applied() >= 2
    finally:
        await host.stop()
        engine.close()


async def test_a_leader_lease_answers_reads_without_a_round_each(cluster: list[HostNode]) -> None:
    """With `read_lease` a leader's reads after a round that a quorum answered send nothing for 0.9 s; without
    it each sequential read sends its own heartbeat round (two messages here). Each still sees the writes
    acknowledged before it."""
    sent: dict[str, int] = {}
    for group, options in (
        ("plain", GroupOptions(election_tick=20)),
        ("leased", GroupOptions(election_tick=20, read_lease=True)),
    ):
        add_group(cluster, group, NAMES, options)
        leader = await wait_for_leader(cluster, group)
        await leader.host.read_index(group)  # the round that starts the lease
        before = leader.host.transport.stats.messages_sent
        for index in range(30):
            written = await leader.host.propose(group, b"w%d" % index)
            assert await leader.host.read_index(group) >= written
        sent[group] = leader.host.transport.stats.messages_sent - before
    # each write sends its appends and commit notices either way; the plain reads add a round each
    assert sent["plain"] - sent["leased"] >= 2 * 30 - 10, sent
