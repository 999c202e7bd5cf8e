"""Quiescence: an idle group's leader stops heartbeating and its followers stop their election timers,
until a proposal, a read, a message that needs them, or the host's word that a peer's node went down
or came back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from raft.types import ConfChange, ConfChangeType, Message, MessageType, Role

from .harness import Harness, isolate

ET = 10


def _idle_cluster(**config: object) -> Harness:
    h = Harness(election_tick=ET, heartbeat_tick=1, quiesce=True, **config)
    h.elect("n1")
    return h


def _tick_all(h: Harness, count: int = 1, keep: Callable[[Message], bool] | None = None) -> None:
    for _ in range(count):
        for node_id in h.nodes:
            h.tick(node_id)
        if keep is None:
            h.stabilize()
        else:
            h.stabilize(keep=keep)


def _quiesce(h: Harness) -> None:
    for _ in range(3):
        _tick_all(h)
        if all(h.core(n).quiesced for n in h.nodes):
            return
    raise AssertionError({n: h.core(n).quiesced for n in h.nodes})


def test_an_idle_group_quiesces_and_then_sends_nothing() -> None:
    h = _idle_cluster()
    _quiesce(h)
    for _ in range(5 * ET):
        for node_id in h.nodes:
            h.tick(node_id)
        h.process_all()
        assert not h.pending  # no heartbeats, no campaigns
    assert h.leader() == "n1"


def test_without_the_option_a_group_never_quiesces() -> None:
    h = Harness(election_tick=ET, heartbeat_tick=1)
    h.elect("n1")
    _tick_all(h, 3 * ET)
    assert not any(h.core(n).quiesced for n in h.nodes)


def test_no_quiescing_while_a_follower_lacks_entries() -> None:
    h = _idle_cluster()
    h.core("n1").propose(b"x")
    h.stabilize(keep=isolate("n3"))
    # n3 hears heartbeats, but the entries it lacks never reach it
    _tick_all(h, 3, keep=lambda m: m.type is not MessageType.APPEND or m.to != "n3")
    assert h.core("n3").last_index < h.core("n1").last_index
    assert not h.core("n1").quiesced and not h.core("n3").quiesced


def test_a_proposal_wakes_the_leader_and_the_entry_commits_everywhere() -> None:
    h = _idle_cluster()
    _quiesce(h)
    h.core("n1").propose(b"after the quiet")
    assert not h.core("n1").quiesced
    h.stabilize()
    assert all(h.applied_data(n) == [b"after the quiet"] for n in h.nodes)
    assert not h.core("n2").quiesced  # the entries woke the followers too
    _quiesce(h)


def test_a_read_index_wakes_the_leader_and_is_answered() -> None:
    h = _idle_cluster()
    _quiesce(h)
    h.core("n2").read_index(b"r1")
    h.stabilize()
    _tick_all(h)  # the leader's next heartbeat round confirms it
    assert [r.request_ctx for r in h.nodes["n2"].read_states] == [b"r1"]


def test_the_leaders_node_down_wakes_its_followers_who_elect_a_new_leader() -> None:
    h = _idle_cluster()
    _quiesce(h)
    for node_id in ("n2", "n3"):
        h.core(node_id).peer_down("n1")
        assert not h.core(node_id).quiesced
    # n1 is gone: within an election timeout or two, one of the others leads
    for _ in range(3 * ET):
        for node_id in ("n2", "n3"):
            h.tick(node_id)
        h.stabilize(keep=isolate("n1"))
        if h.core("n2").role is Role.LEADER or h.core("n3").role is Role.LEADER:
            break
    assert h.core("n2").role is Role.LEADER or h.core("n3").role is Role.LEADER


def test_a_follower_does_not_quiesce_with_a_leader_reported_down() -> None:
    h = _idle_cluster()
    h.core("n2").peer_down("n1")
    _tick_all(h, 3)
    assert not h.core("n2").quiesced
    assert not h.core("n1").quiesced  # n2's refusal keeps the leader awake
    h.core("n2").peer_up("n1")
    _quiesce(h)


def test_a_member_down_wakes_the_leader_and_check_quorum_deposes_it_when_alone() -> None:
    h = _idle_cluster(check_quorum=True)
    _quiesce(h)
    h.core("n1").peer_down("n2")
    h.core("n1").peer_down("n3")
    assert not h.core("n1").quiesced
    for _ in range(2 * ET + 1):
        h.tick("n1")
        h.stabilize(keep=isolate("n1"))
    assert h.core("n1").role is not Role.LEADER


def test_a_candidate_wakes_the_leader_whose_heartbeat_brings_it_back() -> None:
    h = _idle_cluster(pre_vote=True, check_quorum=True)
    _quiesce(h)
    # n3 restarted: it forgot the leader and its timer runs
    h.restart("n3")
    for _ in range(3 * ET):
        for node_id in h.nodes:
            h.tick(node_id)
        h.stabilize()
        if h.core("n3").leader_id == "n1":
            break
    assert h.core("n3").leader_id == "n1" and h.leader() == "n1"
    assert h.core("n1").term == h.core("n3").term
    _quiesce(h)


def test_a_late_heartbeat_keeps_a_quiesced_follower_asleep_but_entries_wake_it() -> None:
    h = _idle_cluster()
    _quiesce(h)
    h.core("n1").propose(b"x")
    h.process("n1")
    append = next(m for m in h.take(MessageType.APPEND) if m.to == "n2")
    # a heartbeat of this term sent before the quiesce, delivered late (links may reorder)
    late = replace(append, type=MessageType.HEARTBEAT, entries=(), index=0, log_term=0)
    h.core("n2").step(late)
    assert h.core("n2").quiesced
    h.core("n2").step(append)
    assert not h.core("n2").quiesced


def test_peer_up_after_a_restart_wakes_followers_of_that_leader() -> None:
    h = _idle_cluster()
    _quiesce(h)
    h.core("n2").peer_up("n1")
    assert not h.core("n2").quiesced
    h.core("n3").peer_up("n2")  # not its leader: nothing to do
    assert h.core("n3").quiesced


def test_a_new_preferred_leader_wakes_the_quiesced_leader_which_hands_over_and_the_group_quiesces_again() -> None:
    h = _idle_cluster(check_quorum=True)
    _quiesce(h)
    term = h.core("n1").term
    for node_id in h.nodes:  # the host names it on every member (placement's choice, applied everywhere)
        h.core(node_id).set_preferred_leader("n2")
    assert not h.core("n1").quiesced
    for _ in range(2 * ET):
        _tick_all(h)
        if h.leader() == "n2":
            break
    assert h.leader() == "n2" and h.core("n2").term == term + 1
    _quiesce(h)
    _tick_all(h, 3 * ET)
    assert h.leader() == "n2"  # asleep under the preferred leader: no hand-over back and forth


def test_a_membership_change_wakes_the_quiesced_group_and_the_new_member_quiesces_with_it() -> None:
    h = _idle_cluster()
    h.core("n1").propose(b"before n4")
    h.stabilize()
    _quiesce(h)
    h.add_node("n4")
    h.core("n1").propose_conf_change(ConfChange(ConfChangeType.ADD_VOTER, "n4"))
    assert not h.core("n1").quiesced
    h.stabilize()
    _quiesce(h)
    assert h.core("n4").voters == ("n1", "n2", "n3", "n4")
    assert h.applied_data("n4") == [b"before n4"]
    # four voters asleep: a write wakes them, and n4 now counts towards its quorum of three
    h.core("n1").propose(b"after n4")
    h.stabilize(keep=isolate("n2"))
    h.tick("n1")  # the leader learns the followers' commit through its next heartbeat round
    h.stabilize(keep=isolate("n2"))
    assert h.applied_data("n4") == [b"before n4", b"after n4"]


def test_a_quiesced_leader_told_a_follower_restarted_reaches_it_before_it_campaigns() -> None:
    # without pre-vote a restarted follower's campaign would depose the leader: the host's peer_up
    # (a new incarnation) wakes the leader, whose heartbeats reach it within its election timeout
    h = _idle_cluster(pre_vote=False, check_quorum=True)
    _quiesce(h)
    term = h.core("n1").term
    h.restart("n3")
    assert h.core("n3").leader_id is None and not h.core("n3").quiesced
    h.core("n1").peer_up("n3")
    assert not h.core("n1").quiesced
    for _ in range(ET):
        _tick_all(h)
        if h.core("n3").leader_id == "n1":
            break
    assert h.core("n3").leader_id == "n1"
    assert h.leader() == "n1" and all(h.core(n).term == term for n in h.nodes)
    _quiesce(h)


def test_a_quiesced_follower_never_campaigns_however_long_its_leader_is_silent() -> None:
    h = _idle_cluster(pre_vote=False)
    _quiesce(h)
    for _ in range(20 * ET):
        h.tick("n2")
        h.tick("n3")
        h.process_all()
        assert not h.pending
    assert h.core("n2").role is Role.FOLLOWER and h.core("n2").leader_id == "n1"
    # the host's word that the leader's node is gone is what wakes it, with the leader's lease over:
    # it campaigns within one (randomized) election timeout
    h.core("n2").peer_down("n1")
    ticks = 0
    while not any(m.type is MessageType.VOTE for m in h.pending) and ticks < 2 * ET:
        h.tick("n2")
        ticks += 1
        h.process_all()
    assert any(m.type is MessageType.VOTE for m in h.pending) and ticks <= ET
