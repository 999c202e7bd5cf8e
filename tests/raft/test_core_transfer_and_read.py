"""Leader transfer (thesis §3.10) and ReadIndex (thesis §6.4)."""

from __future__ import annotations

import pytest

from raft.core import ProposalDroppedError
from raft.types import ConfChange, ConfChangeType, MessageType, Role

from .harness import Harness, isolate

ET = 10


# --- leader transfer ---


def test_transfer_to_an_up_to_date_follower_sends_timeout_now_and_it_wins() -> None:
    h = Harness()
    h.elect("n1")
    term = h.core("n1").term
    h.core("n1").transfer_leader("n2")
    h.process("n1")
    assert [m.to for m in h.pending if m.type is MessageType.TIMEOUT_NOW] == ["n2"]
    h.stabilize()
    assert h.leader() == "n2" and h.core("n2").term == term + 1


def test_transfer_wins_even_inside_the_followers_leader_lease() -> None:
    h = Harness(check_quorum=True, pre_vote=True)
    h.elect("n1")
    h.core("n1").transfer_leader("n3")
    h.stabilize()
    assert h.leader() == "n3"


def test_transfer_to_a_lagging_follower_first_brings_it_up_to_date() -> None:
    h = Harness()
    h.elect("n1")
    h.core("n1").propose_many([b"a", b"b"])
    h.stabilize(keep=isolate("n3"))
    assert h.core("n3").last_index < h.core("n1").last_index
    h.core("n1").transfer_leader("n3")
    h.process("n1")
    assert not [m for m in h.pending if m.type is MessageType.TIMEOUT_NOW]
    h.stabilize()
    assert h.leader() == "n3"
    assert h.applied_data("n3") == [b"a", b"b"]


def test_proposals_are_refused_while_a_transfer_is_under_way() -> None:
    h = Harness()
    h.elect("n1")
    h.core("n1").transfer_leader("n3")
    with pytest.raises(ProposalDroppedError, match="transferred"):
        h.core("n1").propose(b"x")


def test_transfer_that_does_not_finish_within_an_election_timeout_is_abandoned() -> None:
    h = Harness()
    h.elect("n1")
    h.core("n1").transfer_leader("n3")
    for _ in range(ET):
        h.tick("n1")
        h.stabilize(keep=isolate("n3"))
    assert h.core("n1").lead_transferee is None
    h.core("n1").propose(b"accepted again")


def test_transfer_requested_on_a_follower_is_forwarded_to_the_leader() -> None:
    h = Harness()
    h.elect("n1")
    h.core("n3").transfer_leader("n2")
    h.stabilize()
    assert h.leader() == "n2"


def test_transfer_to_a_non_voter_is_refused() -> None:
    h = Harness()
    h.elect("n1")
    with pytest.raises(ProposalDroppedError):
        h.core("n1").transfer_leader("n9")


# --- ReadIndex ---


def test_leader_answers_read_index_only_after_a_heartbeat_quorum() -> None:
    h = Harness()
    h.elect("n1")
    leader = h.core("n1")
    h.core("n1").propose(b"w")
    h.stabilize()
    leader.read_index(b"r1")
    h.process("n1")
    assert not h.nodes["n1"].read_states
    heartbeats = h.take(MessageType.HEARTBEAT)
    assert {m.context for m in heartbeats} == {b"r1"}
    h.pending = heartbeats
    h.stabilize()
    (state,) = h.nodes["n1"].read_states
    assert (state.index, state.request_ctx) == (leader.commit_index, b"r1")


def test_leader_cut_off_from_the_quorum_never_answers_a_read() -> None:
    h = Harness(check_quorum=False)
    h.elect("n1")
    h.core("n1").read_index(b"r1")
    for _ in range(3):
        h.tick("n1")
        h.stabilize(keep=isolate("n1"))
    assert not h.nodes["n1"].read_states


def test_follower_read_index_is_forwarded_and_answered_with_the_leaders_commit() -> None:
    h = Harness()
    h.elect("n1")
    h.core("n1").propose(b"w")
    h.stabilize()
    h.core("n3").read_index(b"f1")
    h.stabilize()
    (state,) = h.nodes["n3"].read_states
    assert (state.index, state.request_ctx) == (h.core("n1").commit_index, b"f1")


def test_new_leader_defers_reads_until_it_commits_an_entry_of_its_term() -> None:
    h = Harness()
    h.core("n1").campaign()
    h.stabilize(keep=lambda m: m.type is not MessageType.APPEND)
    leader = h.core("n1")
    assert leader.role is Role.LEADER and leader.commit_index == 0
    leader.read_index(b"early")
    h.process_all()
    assert not [m for m in h.pending if m.context == b"early"], "no read round before the first commit"
    h.pending.clear()
    h.tick("n1")
    h.stabilize()
    (state,) = h.nodes["n1"].read_states
    assert state.index >= 1 and state.request_ctx == b"early"


def test_read_index_without_a_leader_is_refused() -> None:
    h = Harness()
    with pytest.raises(ProposalDroppedError, match="no leader"):
        h.core("n2").read_index(b"r")


def test_read_index_ctx_must_not_be_empty() -> None:
    h = Harness()
    h.elect("n1")
    with pytest.raises(ValueError):
        h.core("n1").read_index(b"")


def test_single_voter_answers_read_index_at_once() -> None:
    h = Harness(ids=("n1",))
    h.elect("n1")
    h.core("n1").read_index(b"solo")
    h.process("n1")
    (state,) = h.nodes["n1"].read_states
    assert state.index == h.core("n1").commit_index


def test_a_read_waiting_for_a_removed_voter_is_answered_when_the_leader_is_left_alone() -> None:
    """Found by the simulator (seed 11267): a leader of two voters asked for a read whose heartbeat the
    other voter never answered, then removed that voter. Alone, the leader gets no heartbeat answer
    again: the read waited forever, and the group never quiesced."""
    h = Harness(ids=("n1", "n2"), quiesce=True)
    h.elect("n1")
    leader = h.core("n1")
    leader.propose(b"w")
    h.stabilize()
    leader.read_index(b"r1")
    h.process("n1")
    h.take(MessageType.HEARTBEAT)  # n2 never hears of r1
    read_point = leader.commit_index
    leader.propose_conf_change(ConfChange(ConfChangeType.REMOVE_NODE, "n2"))
    h.process("n1")
    assert [(s.request_ctx, s.index) for s in h.nodes["n1"].read_states] == [(b"r1", read_point)]
    h.stabilize(keep=isolate("n2"))
    h.tick("n1", 3 * ET)
    h.stabilize(keep=isolate("n2"))
    assert leader.voters == ("n1",) and leader.quiesced


def test_acknowledgements_that_make_a_quorum_after_a_removal_answer_the_read_at_once() -> None:
    """Four voters: n2's acknowledgement and the leader's own are not a quorum; once n4 is removed they
    are one of three, and the read is answered without waiting for another heartbeat round."""
    h = Harness(ids=("n1", "n2", "n3", "n4"))
    h.elect("n1")
    leader = h.core("n1")
    leader.propose(b"w")
    h.stabilize()
    leader.read_index(b"r1")
    h.stabilize(keep=isolate("n3", "n4"))
    assert not h.nodes["n1"].read_states
    read_point = leader.commit_index
    leader.propose_conf_change(ConfChange(ConfChangeType.REMOVE_NODE, "n4"))
    h.process("n1")
    assert [(s.request_ctx, s.index) for s in h.nodes["n1"].read_states] == [(b"r1", read_point)]


def test_a_removal_that_leaves_no_quorum_of_acknowledgements_answers_nothing() -> None:
    h = Harness(ids=("n1", "n2", "n3", "n4", "n5"))
    h.elect("n1")
    leader = h.core("n1")
    leader.read_index(b"r1")
    h.stabilize(keep=isolate("n3", "n4", "n5"))  # n1 and n2 of five
    leader.propose_conf_change(ConfChange(ConfChangeType.REMOVE_NODE, "n5"))
    h.process("n1")
    assert not h.nodes["n1"].read_states, "two of four voters are not a quorum"
    h.tick("n1", 3)  # the next heartbeat carries r1 to every voter left
    h.stabilize()
    assert [s.request_ctx for s in h.nodes["n1"].read_states] == [b"r1"]
