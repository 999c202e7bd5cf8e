"""Single-server membership changes (thesis §4.1, §4.2.1 learners, §4.2.2 removed leader)."""

from __future__ import annotations

import random

import pytest

from raft.core import ConfChangeRejectedError, RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.types import (
    ConfChange,
    ConfChangeRecord,
    ConfChangeType,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Role,
)

from .harness import Harness, isolate

ADD_VOTER, ADD_LEARNER, REMOVE = (
    ConfChangeType.ADD_VOTER,
    ConfChangeType.ADD_LEARNER,
    ConfChangeType.REMOVE_NODE,
)


def _change(h: Harness, leader: str, change_type: ConfChangeType, node_id: str) -> int:
    if change_type is not REMOVE and node_id not in h.nodes:
        h.add_node(node_id)
    index = h.core(leader).propose_conf_change(ConfChange(change_type, node_id))
    h.stabilize()
    return index


def test_added_learner_receives_the_log_but_does_not_vote_or_count() -> None:
    h = Harness()
    h.elect("n1")
    h.core("n1").propose(b"before")
    h.stabilize()
    _change(h, "n1", ADD_LEARNER, "n4")
    assert h.core("n1").learners == ("n4",)
    assert h.applied_data("n4") == [b"before"], "a new node learns the log from index 1"
    # With both voters other than the leader cut off, the learner's ack must not commit anything.
    index = h.core("n1").propose(b"after")
    h.stabilize(keep=lambda m: m.to not in ("n2", "n3") and m.from_ not in ("n2", "n3"))
    assert h.core("n4").last_index >= index
    assert h.core("n1").commit_index < index
    h.core("n4").campaign()
    assert h.core("n4").role is Role.FOLLOWER, "a learner never campaigns"


def test_promoted_learner_becomes_a_voter() -> None:
    h = Harness()
    h.elect("n1")
    _change(h, "n1", ADD_LEARNER, "n4")
    _change(h, "n1", ADD_VOTER, "n4")
    for node_id in h.nodes:
        assert h.core(node_id).voters == ("n1", "n2", "n3", "n4")
        assert h.core(node_id).learners == ()


def test_added_voter_raises_the_quorum() -> None:
    h = Harness()
    h.elect("n1")
    _change(h, "n1", ADD_VOTER, "n4")
    index = h.core("n1").propose(b"x")
    # 4 voters: the leader and n2 are no longer a majority.
    h.stabilize(keep=isolate("n3", "n4"))
    assert h.core("n1").commit_index < index
    h.stabilize()
    h.tick("n1")
    h.stabilize()
    assert h.core("n1").commit_index >= index


def test_removed_voter_no_longer_counts_toward_the_quorum() -> None:
    h = Harness(ids=("n1", "n2", "n3", "n4"))
    h.elect("n1")
    _change(h, "n1", REMOVE, "n4")
    assert h.core("n1").voters == ("n1", "n2", "n3")
    index = h.core("n1").propose(b"x")
    h.stabilize(keep=isolate("n3", "n4"))
    assert h.core("n1").commit_index >= index, "leader + n2 are a majority of three"


def test_membership_takes_effect_when_the_entry_is_appended() -> None:
    h = Harness()
    h.elect("n1")
    h.add_node("n4")
    h.core("n1").propose_conf_change(ConfChange(ADD_VOTER, "n4"))
    assert h.core("n1").voters == ("n1", "n2", "n3", "n4")
    assert h.core("n1").commit_index < h.core("n1").last_index


def test_only_one_membership_change_may_be_uncommitted() -> None:
    h = Harness()
    h.elect("n1")
    h.add_node("n4")
    h.core("n1").propose_conf_change(ConfChange(ADD_LEARNER, "n4"))
    with pytest.raises(ConfChangeRejectedError, match="uncommitted"):
        h.core("n1").propose_conf_change(ConfChange(ADD_VOTER, "n4"))


def test_new_leader_must_commit_an_entry_of_its_term_before_changing_membership() -> None:
    h = Harness()
    h.core("n1").campaign()
    h.stabilize(keep=lambda m: m.type is not MessageType.APPEND)
    assert h.core("n1").role is Role.LEADER
    with pytest.raises(ConfChangeRejectedError, match="its term"):
        h.core("n1").propose_conf_change(ConfChange(ADD_LEARNER, "n4"))


def test_nonsensical_changes_are_rejected() -> None:
    h = Harness()
    h.elect("n1")
    with pytest.raises(ConfChangeRejectedError, match="already a voter"):
        h.core("n1").propose_conf_change(ConfChange(ADD_VOTER, "n2"))
    with pytest.raises(ConfChangeRejectedError, match="not a member"):
        h.core("n1").propose_conf_change(ConfChange(REMOVE, "n9"))


def test_removed_leader_steps_down_once_its_removal_is_committed() -> None:
    h = Harness()
    h.elect("n1")
    index = h.core("n1").propose_conf_change(ConfChange(REMOVE, "n1"))
    assert h.core("n1").role is Role.LEADER, "it keeps leading until the change commits"
    h.stabilize()
    assert h.core("n1").role is Role.FOLLOWER
    assert all(h.core(n).commit_index >= index for n in ("n2", "n3"))
    # The others elect a leader among themselves; n1 never campaigns again.
    for _ in range(40):
        for node_id in h.nodes:
            h.tick(node_id)
        h.stabilize()
    assert h.leader() in ("n2", "n3")
    assert h.core("n1").role is Role.FOLLOWER


def test_truncated_membership_change_is_undone() -> None:
    conf = ConfState(voters=("n1", "n2", "n3"))
    storage = MemoryLogStorage(conf)
    record = ConfChangeRecord(ConfChange(ADD_VOTER, "n4"), ConfState(voters=("n1", "n2", "n3", "n4")))
    storage.append([Entry(1, 1), Entry(1, 2, EntryType.CONF_CHANGE, record.encode())])
    storage.set_hard_state(HardState(term=1, commit=1))
    core = RaftCore(RaftConfig(id="n2"), storage, random.Random(1))
    assert core.voters == ("n1", "n2", "n3", "n4"), "restart replays the conf change in the log"
    core.step(
        Message(
            type=MessageType.APPEND, from_="n3", to="n2", term=2, index=1, log_term=1, entries=(Entry(2, 2),)
        )
    )
    assert core.voters == ("n1", "n2", "n3")


def test_conf_state_at_answers_the_membership_for_a_snapshot_index() -> None:
    h = Harness()
    h.elect("n1")
    index = _change(h, "n1", ADD_LEARNER, "n4")
    core = h.core("n1")
    assert core.conf_state_at(index - 1) == ConfState(voters=("n1", "n2", "n3"))
    assert core.conf_state_at(index) == ConfState(voters=("n1", "n2", "n3"), learners=("n4",))
    with pytest.raises(ValueError, match="not applied"):
        core.conf_state_at(core.applied + 1)


def test_conf_change_record_round_trips_and_rejects_garbage() -> None:
    record = ConfChangeRecord(ConfChange(ADD_LEARNER, "n7", b"ctx"), ConfState(("n1",), ("n7",)))
    assert ConfChangeRecord.decode(record.encode()) == record
    with pytest.raises(ValueError, match="malformed"):
        ConfChangeRecord.decode(record.encode()[:-1])
    with pytest.raises(ValueError, match="malformed"):
        ConfChangeRecord.decode(b"\x09")


def test_conf_state_refuses_a_node_both_voter_and_learner() -> None:
    with pytest.raises(ValueError, match="both"):
        ConfState(voters=("n1",), learners=("n1",))


def test_removed_leader_that_lost_leadership_before_committing_its_removal_can_finish_it() -> None:
    # {n1, n2} -> {n2}: n1 appends its removal, then loses leadership before n2
    # stores the entry. n2 (still on {n1, n2}) needs n1's vote but its log is
    # shorter; n1 must be able to campaign, win with n2 alone, commit, step down.
    h = Harness(ids=("n1", "n2"), pre_vote=False)
    h.elect("n1")
    index = h.core("n1").propose_conf_change(ConfChange(REMOVE, "n1"))
    h.process("n1")
    h.pending = []  # the appends carrying the removal are lost
    h.core("n1").step(Message(type=MessageType.APPEND_RESP, from_="n2", to="n1", term=h.core("n1").term + 1))
    assert h.core("n1").role is Role.FOLLOWER
    assert h.core("n1").voters == ("n2",) and h.core("n2").voters == ("n1", "n2")
    for _ in range(60):
        for node_id in h.nodes:
            h.tick(node_id)
        h.stabilize()
        if h.core("n2").role is Role.LEADER:
            break
    assert h.core("n2").role is Role.LEADER, "the cluster must not deadlock"
    assert h.core("n2").commit_index >= index and h.core("n2").voters == ("n2",)
    assert h.core("n1").role is Role.FOLLOWER
