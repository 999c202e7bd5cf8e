"""The Ready contract: state a message depends on travels in the same Ready, to be synced first."""

from __future__ import annotations

import random

import pytest

from raft.core import RaftConfig, RaftCore, RaftError
from raft.log_storage import MemoryLogStorage
from raft.types import ConfState, Entry, HardState, Message, MessageType

from .harness import Harness


def _voter() -> RaftCore:
    return RaftCore(
        RaftConfig(id="n1"), MemoryLogStorage(ConfState(voters=("n1", "n2", "n3"))), random.Random(3)
    )


def test_vote_is_sent_with_the_hard_state_recording_it_and_must_sync() -> None:
    core = _voter()
    core.step(Message(type=MessageType.VOTE, from_="n2", to="n1", term=4))
    ready = core.ready()
    assert [m.type for m in ready.messages] == [MessageType.VOTE_RESP]
    assert ready.hard_state == HardState(term=4, vote="n2", commit=0)
    assert ready.must_sync


def test_append_ack_is_sent_with_the_entries_it_acknowledges_and_must_sync() -> None:
    core = _voter()
    entries = (Entry(1, 1, data=b"a"), Entry(1, 2, data=b"b"))
    core.step(Message(type=MessageType.APPEND, from_="n2", to="n1", term=1, entries=entries, commit=0))
    ready = core.ready()
    assert ready.entries == entries and ready.must_sync
    (ack,) = ready.messages
    assert ack.type is MessageType.APPEND_RESP and ack.index == 2


def test_commit_only_change_does_not_require_an_fsync() -> None:
    storage = MemoryLogStorage(ConfState(voters=("n1", "n2", "n3")))
    core = RaftCore(RaftConfig(id="n1"), storage, random.Random(3))
    core.step(Message(type=MessageType.APPEND, from_="n2", to="n1", term=1, entries=(Entry(1, 1),)))
    first = core.ready()
    storage.append(first.entries)
    core.advance(first)
    core.step(Message(type=MessageType.HEARTBEAT, from_="n2", to="n1", term=1, commit=1))
    ready = core.ready()
    assert ready.hard_state == HardState(term=1, vote=None, commit=1)
    assert not ready.must_sync and not ready.entries
    assert [e.index for e in ready.committed_entries] == [1]


def test_leader_entries_are_handed_out_once_and_then_become_stable() -> None:
    h = Harness()
    h.elect("n1")
    leader = h.core("n1")
    leader.propose(b"x")
    ready = leader.ready()
    assert [e.data for e in ready.entries] == [b"x"] and ready.must_sync
    leader.advance(ready)
    assert not leader.ready().entries


def test_ready_cannot_be_taken_again_before_advance() -> None:
    core = _voter()
    core.campaign()
    ready = core.ready()
    assert not core.has_ready()
    with pytest.raises(RaftError, match="advance"):
        core.ready()
    with pytest.raises(RaftError):
        core.advance(type(ready)())
    core.advance(ready)


def test_steps_between_ready_and_advance_surface_in_the_next_ready() -> None:
    core = _voter()
    core.step(Message(type=MessageType.APPEND, from_="n2", to="n1", term=1, entries=(Entry(1, 1),)))
    first = core.ready()
    core.step(
        Message(
            type=MessageType.APPEND, from_="n2", to="n1", term=1, index=1, log_term=1, entries=(Entry(1, 2),)
        )
    )
    core.advance(first)
    second = core.ready()
    assert [e.index for e in first.entries] == [1]
    assert [e.index for e in second.entries] == [2]


def test_restart_recovers_term_vote_commit_and_log() -> None:
    h = Harness()
    h.elect("n2")
    h.core("n2").propose_many([b"a", b"b"])
    h.stabilize()
    before = h.core("n1")
    restarted = h.restart("n1").core
    assert (restarted.term, restarted.vote, restarted.commit_index, restarted.last_index) == (
        before.term,
        before.vote,
        before.commit_index,
        before.last_index,
    )
    # The state machine restarts empty; the committed log is handed out again.
    h.stabilize()
    assert h.applied_data("n1") == [b"a", b"b"]


def test_restart_with_applied_index_does_not_reapply() -> None:
    h = Harness()
    h.elect("n2")
    h.core("n2").propose_many([b"a", b"b"])
    h.stabilize()
    storage = h.nodes["n1"].storage
    core = RaftCore(RaftConfig(id="n1", applied=3), storage, random.Random(1))
    assert core.applied == 3
    assert not core.ready().committed_entries


def test_restart_treats_applied_index_as_committed_even_if_commit_was_not_synced() -> None:
    storage = MemoryLogStorage(ConfState(voters=("n1", "n2", "n3")))
    storage.append([Entry(1, 1), Entry(1, 2)])
    storage.set_hard_state(HardState(term=1, commit=0))
    core = RaftCore(RaftConfig(id="n1", applied=2), storage, random.Random(1))
    assert core.commit_index == 2


def test_leader_counts_its_own_entries_towards_commit_only_once_they_are_durable() -> None:
    # Thesis §10.2.1: the host may send a leader's appends before writing them,
    # so the leader's own copy must not count until advance() confirms it.
    h = Harness(ids=("n1", "n2", "n3"))
    h.elect("n1")
    leader = h.core("n1")
    index = leader.propose(b"x")
    ready = leader.ready()  # taken, but the leader's write has not completed
    assert [e.index for e in ready.entries] == [index]
    appends = [m for m in ready.messages if m.type is MessageType.APPEND]
    assert {m.to for m in appends} == {"n2", "n3"}
    h.pending = [m for m in appends if m.to == "n2"]
    h.deliver()
    h.process("n2")
    h.deliver()  # n2's durable ack reaches the leader while the leader's write is pending
    assert leader.commit_index < index, "only n2 holds the entry durably: 1 of 3 is no majority"
    h.nodes["n1"].storage.append(ready.entries)
    leader.advance(ready)
    assert leader.commit_index == index, "leader + n2 durable is a majority"


def test_single_voter_leader_commits_only_after_its_write_and_never_tells_a_learner_sooner() -> None:
    h = Harness(ids=("n1",), learners=("l1",))
    h.elect("n1")
    h.stabilize()
    leader = h.core("n1")
    index = leader.propose(b"x")
    ready = leader.ready()
    assert leader.commit_index < index
    assert not ready.committed_entries
    assert all(m.commit < index for m in ready.messages), "a learner could apply an entry the leader may lose"
    h.nodes["n1"].storage.append(ready.entries)
    leader.advance(ready)
    assert leader.commit_index == index
    h.pending.extend(ready.messages)
    h.stabilize()
    assert h.applied_data("l1") == [b"x"]
    assert h.applied_data("n1") == [b"x"]
