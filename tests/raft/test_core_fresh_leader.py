"""`RaftCore.nothing_before_term`: a leader whose log holds nothing from an earlier term has nothing to
catch up on (a new stream's first leader takes its API at once, without a ReadIndex round)."""

from __future__ import annotations

import random

from raft.core import RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.types import ConfState, Entry, HardState, Role

from .harness import Harness


def test_a_new_single_voter_group_leads_at_once_with_nothing_before_its_term() -> None:
    h = Harness(ids=("n1",))
    core = h.core("n1")
    assert not core.nothing_before_term  # a follower: never
    core.campaign()
    # no tick, no message: the only voter wins the moment it stands
    assert core.role is Role.LEADER and core.term == 1
    assert core.nothing_before_term  # before its first entry is even durable
    h.process_all()
    assert core.commit_index == 1 and core.nothing_before_term


def test_a_leader_holding_entries_of_an_earlier_term_must_catch_up_first() -> None:
    h = Harness()
    h.elect("n1")
    assert h.core("n1").nothing_before_term
    h.core("n1").propose_many([b"x"])
    h.stabilize()
    h.core("n1").transfer_leader("n2")  # n2's log holds term 1's entries, committed under n1
    h.stabilize()
    assert h.core("n2").role is Role.LEADER and h.core("n2").term == 2
    assert not h.core("n2").nothing_before_term
    assert not h.core("n1").nothing_before_term  # a follower now


def test_a_log_starting_after_a_snapshot_is_not_known_to_be_empty_before_the_term() -> None:
    storage = MemoryLogStorage(ConfState(voters=("n1",)))
    storage.append([Entry(term=1, index=1), Entry(term=1, index=2)])
    storage.set_hard_state(HardState(term=1, commit=2))
    storage.create_snapshot(2, ConfState(voters=("n1",)), b"")
    storage.compact(2)
    core = RaftCore(RaftConfig(id="n1", applied=2), storage, random.Random(1))
    core.campaign()
    assert core.role is Role.LEADER and core.term == 2
    # the entries of term 1 are in the snapshot: this leader's log no longer shows them
    assert not core.nothing_before_term
