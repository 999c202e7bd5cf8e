"""Snapshots and InstallSnapshot (§7): a follower behind a compacted log catches up from a snapshot."""

from __future__ import annotations

import random

from raft.core import RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.progress import ProgressState
from raft.types import ConfState, Entry, HardState, Message, MessageType, Snapshot, SnapshotMetadata

from .harness import Harness, isolate


def _compact_leader(h: Harness, leader_id: str) -> int:
    node = h.nodes[leader_id]
    applied = node.core.applied
    node.storage.create_snapshot(applied, node.core.conf_state_at(applied), b"image@%d" % applied)
    node.storage.compact(applied)
    return applied


def _cluster_with_n3_behind_a_compaction() -> tuple[Harness, int]:
    h = Harness()
    h.elect("n1")
    h.core("n1").propose_many([b"a", b"b"])
    h.stabilize(keep=isolate("n3"))
    h.core("n1").propose_many([b"c", b"d"])
    h.stabilize(keep=isolate("n3"))
    return h, _compact_leader(h, "n1")


def test_leader_sends_snapshot_to_follower_whose_next_entry_is_compacted() -> None:
    h, snap_index = _cluster_with_n3_behind_a_compaction()
    leader = h.core("n1")
    h.tick("n1")  # heartbeat: n3 answers, the leader probes and finds the gap
    for _ in range(4):
        h.process_all()
        h.deliver()
        if leader.progress["n3"].state is ProgressState.SNAPSHOT:
            break
    assert leader.progress["n3"].state is ProgressState.SNAPSHOT
    assert leader.progress["n3"].pending_snapshot == snap_index


def test_follower_installs_snapshot_then_replicates_the_rest() -> None:
    h, snap_index = _cluster_with_n3_behind_a_compaction()
    h.core("n1").propose(b"e")
    h.tick("n1")
    h.stabilize()
    node = h.nodes["n3"]
    assert node.snapshots_applied == 1
    assert (
        node.storage.snapshot().index == snap_index
        and node.storage.snapshot().data == b"image@%d" % snap_index
    )
    assert [e.data for e in node.applied if e.index > snap_index] == [b"e"]
    assert node.core.commit_index == h.core("n1").commit_index
    assert h.core("n1").progress["n3"].state is ProgressState.REPLICATE


def test_failed_snapshot_send_is_retried_after_the_next_heartbeat() -> None:
    h, _ = _cluster_with_n3_behind_a_compaction()
    leader = h.core("n1")
    h.tick("n1")
    for _ in range(4):
        h.process_all()
        h.deliver(keep=lambda m: m.type is not MessageType.SNAPSHOT)
        if leader.progress["n3"].state is ProgressState.SNAPSHOT:
            break
    h.pending.clear()
    leader.report_snapshot("n3", ok=False)
    assert leader.progress["n3"].state is ProgressState.PROBE and leader.progress["n3"].is_paused()
    h.tick("n1")
    h.stabilize()
    assert h.nodes["n3"].snapshots_applied == 1
    assert h.core("n3").commit_index == leader.commit_index


def test_snapshot_not_newer_than_the_commit_index_is_ignored() -> None:
    storage = MemoryLogStorage(ConfState(voters=("n1", "n2")))
    storage.append([Entry(1, 1), Entry(1, 2), Entry(1, 3)])
    storage.set_hard_state(HardState(term=1, commit=3))
    core = RaftCore(RaftConfig(id="n2"), storage, random.Random(1))
    old = Snapshot(SnapshotMetadata(2, 1, ConfState(voters=("n1", "n2"))), b"old")
    core.step(Message(type=MessageType.SNAPSHOT, from_="n1", to="n2", term=1, snapshot=old))
    ready = core.ready()
    assert ready.snapshot is None
    assert ready.messages[0].index == 3  # tells the leader how far it really is


def test_snapshot_matching_the_log_only_advances_the_commit_index() -> None:
    storage = MemoryLogStorage(ConfState(voters=("n1", "n2")))
    storage.append([Entry(1, 1), Entry(1, 2), Entry(1, 3)])
    storage.set_hard_state(HardState(term=1, commit=1))
    core = RaftCore(RaftConfig(id="n2"), storage, random.Random(1))
    snap = Snapshot(SnapshotMetadata(2, 1, ConfState(voters=("n1", "n2"))), b"img")
    core.step(Message(type=MessageType.SNAPSHOT, from_="n1", to="n2", term=1, snapshot=snap))
    ready = core.ready()
    assert ready.snapshot is None and core.commit_index == 2 and core.last_index == 3


def test_installed_snapshot_sets_membership_and_applied_index() -> None:
    storage = MemoryLogStorage(ConfState())
    core = RaftCore(RaftConfig(id="n4"), storage, random.Random(1))
    conf = ConfState(voters=("n1", "n2", "n3"), learners=("n4",))
    snap = Snapshot(SnapshotMetadata(10, 3, conf), b"img")
    core.step(Message(type=MessageType.SNAPSHOT, from_="n1", to="n4", term=3, snapshot=snap))
    ready = core.ready()
    assert ready.snapshot == snap and ready.must_sync
    assert core.conf_state == conf and core.commit_index == 10
    assert ready.messages[0].index == 10
    storage.apply_snapshot(snap)
    core.advance(ready)
    assert core.applied == 10 and core.first_index == 11
