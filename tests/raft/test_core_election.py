"""Leader election, one test per rule of the Raft paper (§5.1, §5.2, §5.4.1) and thesis (§9.6 pre-vote, §6.2 check-quorum)."""

from __future__ import annotations

import random

from raft.core import RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.types import ConfState, Entry, HardState, Message, MessageType, Role

from .harness import Harness, isolate

ET = 10  # election_tick used throughout


def _log_of(terms: list[int]) -> MemoryLogStorage:
    storage = MemoryLogStorage(ConfState(voters=("n1", "n2", "n3")))
    storage.append([Entry(term=t, index=i + 1) for i, t in enumerate(terms)])
    storage.set_hard_state(HardState(term=max(terms, default=0)))
    return storage


def _vote_request(term: int, last_index: int, last_term: int, pre: bool = False) -> Message:
    return Message(
        type=MessageType.PRE_VOTE if pre else MessageType.VOTE,
        from_="n2",
        to="n1",
        term=term,
        index=last_index,
        log_term=last_term,
    )


def _single(storage: MemoryLogStorage | None = None, **config: object) -> RaftCore:
    storage = storage or MemoryLogStorage(ConfState(voters=("n1", "n2", "n3")))
    return RaftCore(RaftConfig(id="n1", **config), storage, random.Random(7))  # type: ignore[arg-type]


def test_follower_becomes_candidate_after_election_timeout_and_requests_votes() -> None:
    h = Harness(pre_vote=False)
    core = h.core("n1")
    h.tick("n1", 2 * ET)
    assert core.role is Role.CANDIDATE
    assert core.term == 1 and core.vote == "n1"
    ready = core.ready()
    assert {(m.type, m.to, m.term) for m in ready.messages} == {
        (MessageType.VOTE, "n2", 1),
        (MessageType.VOTE, "n3", 1),
    }


def test_election_timeout_is_randomized_in_one_to_two_election_ticks() -> None:
    timeouts = set()
    for seed in range(30):
        core = RaftCore(
            RaftConfig(id="n1", pre_vote=False),
            MemoryLogStorage(ConfState(voters=("n1", "n2", "n3"))),
            random.Random(seed),
        )
        ticks = 0
        while core.role is Role.FOLLOWER:
            core.tick()
            ticks += 1
        timeouts.add(ticks)
    assert min(timeouts) >= ET and max(timeouts) < 2 * ET
    assert len(timeouts) > 3, "timeouts should spread to avoid split votes"


def test_candidate_with_votes_from_a_majority_becomes_leader() -> None:
    h = Harness(pre_vote=False)
    h.elect("n1")
    assert h.core("n1").term == 1
    assert all(h.core(n).leader_id == "n1" for n in ("n2", "n3"))


def test_candidate_rejected_by_a_majority_becomes_follower() -> None:
    core = _single(_log_of([1]), pre_vote=False)
    core.campaign()
    assert core.role is Role.CANDIDATE and core.term == 2
    for voter in ("n2", "n3"):
        core.step(Message(type=MessageType.VOTE_RESP, from_=voter, to="n1", term=2, reject=True))
    assert core.role is Role.FOLLOWER and core.term == 2


def test_each_server_votes_for_at_most_one_candidate_per_term() -> None:
    core = _single()
    core.step(_vote_request(term=1, last_index=0, last_term=0))
    other = Message(type=MessageType.VOTE, from_="n3", to="n1", term=1)
    core.step(other)
    responses = core.ready().messages
    assert [(m.to, m.reject) for m in responses] == [("n2", False), ("n3", True)]
    assert core.vote == "n2"


def test_repeated_vote_request_from_the_same_candidate_is_granted_again() -> None:
    core = _single()
    core.step(_vote_request(term=1, last_index=0, last_term=0))
    core.step(_vote_request(term=1, last_index=0, last_term=0))
    assert [m.reject for m in core.ready().messages] == [False, False]


def test_voter_denies_candidate_whose_last_term_is_older() -> None:
    core = _single(_log_of([1, 2]))
    core.step(_vote_request(term=3, last_index=5, last_term=1))
    (response,) = core.ready().messages
    assert response.reject and core.vote is None


def test_voter_denies_candidate_with_same_last_term_but_shorter_log() -> None:
    core = _single(_log_of([1, 1, 1]))
    core.step(_vote_request(term=2, last_index=2, last_term=1))
    (response,) = core.ready().messages
    assert response.reject


def test_voter_grants_candidate_with_newer_last_term_even_if_shorter() -> None:
    core = _single(_log_of([1, 1, 1]))
    core.step(_vote_request(term=3, last_index=1, last_term=2))
    (response,) = core.ready().messages
    assert not response.reject and core.vote == "n2"


def test_candidate_receiving_append_from_leader_of_its_term_becomes_follower() -> None:
    core = _single(pre_vote=False)
    core.campaign()
    core.step(Message(type=MessageType.APPEND, from_="n2", to="n1", term=1, index=0, log_term=0))
    assert core.role is Role.FOLLOWER and core.leader_id == "n2"


def test_message_with_higher_term_turns_leader_into_follower_of_that_term() -> None:
    h = Harness()
    h.elect("n1")
    leader = h.core("n1")
    old_term = leader.term
    leader.step(Message(type=MessageType.APPEND_RESP, from_="n2", to="n1", term=old_term + 5))
    assert leader.role is Role.FOLLOWER and leader.term == old_term + 5
    assert leader.leader_id is None


def test_message_with_stale_term_is_answered_with_current_term_and_otherwise_ignored() -> None:
    h = Harness()
    h.elect("n1")
    follower = h.core("n2")
    h.process_all()
    follower.step(Message(type=MessageType.APPEND, from_="n3", to="n2", term=0, index=5, log_term=9))
    (answer,) = follower.ready().messages
    assert answer.type is MessageType.APPEND_RESP and answer.term == follower.term
    assert follower.leader_id == "n1"


def test_leader_sends_heartbeat_every_heartbeat_tick() -> None:
    h = Harness(heartbeat_tick=2)
    h.elect("n1")
    h.tick("n1")
    h.process_all()
    assert not h.take(MessageType.HEARTBEAT)
    h.tick("n1")
    h.process_all()
    assert {m.to for m in h.take(MessageType.HEARTBEAT)} == {"n2", "n3"}


def test_leaders_of_groups_started_at_different_host_ticks_heartbeat_on_the_same_ticks() -> None:
    # two groups of one host: the second core is created 3 host ticks after the first
    groups = {"early": Harness(heartbeat_tick=4, tick_phase=0), "late": Harness(heartbeat_tick=4, tick_phase=3)}
    for h in groups.values():
        h.elect("n1")
    beats: dict[str, list[int]] = {"early": [], "late": []}
    for host_tick in range(1, 17):
        for name, h in groups.items():
            if name == "late" and host_tick <= 3:
                continue  # not created yet
            h.tick("n1")
            h.process_all()
            if h.take(MessageType.HEARTBEAT):
                beats[name].append(host_tick)
    assert beats["early"] == [4, 8, 12, 16]
    assert beats["late"] == beats["early"]


def test_split_vote_is_resolved_by_a_later_election() -> None:
    h = Harness(pre_vote=False)
    h.core("n1").campaign()
    h.core("n2").campaign()
    h.process_all()
    h.stabilize()  # each voted for itself; n3 voted for one of them
    for _ in range(20 * ET):
        if h.leader():
            break
        for node_id in h.nodes:
            h.tick(node_id)
        h.stabilize()
    leader = h.leader()
    assert leader is not None
    assert all(h.core(n).leader_id == leader for n in h.nodes)


def test_pre_vote_failure_leaves_term_unchanged() -> None:
    h = Harness(pre_vote=True)
    h.elect("n1")
    term = h.core("n1").term
    # n3 is cut off: it keeps pre-voting but never raises its term.
    for _ in range(5 * ET):
        h.tick("n3")
        h.stabilize(keep=isolate("n3"))
    assert h.core("n3").term == term
    assert h.core("n3").role is Role.PRE_CANDIDATE


def test_rejoining_node_does_not_disrupt_a_healthy_leader_under_pre_vote() -> None:
    h = Harness(pre_vote=True, check_quorum=True)
    h.elect("n1")
    for _ in range(5 * ET):
        h.tick("n3")
        h.stabilize(keep=isolate("n3"))
    h.tick("n1")  # heartbeats reach n3 again
    h.stabilize()
    assert h.core("n1").role is Role.LEADER and h.core("n1").term == 1
    assert h.core("n3").leader_id == "n1" and h.core("n3").role is Role.FOLLOWER


def test_pre_vote_grant_leads_to_a_real_election_in_the_next_term() -> None:
    h = Harness(pre_vote=True)
    h.core("n1").campaign()
    assert h.core("n1").role is Role.PRE_CANDIDATE and h.core("n1").term == 0
    h.stabilize()
    assert h.core("n1").role is Role.LEADER and h.core("n1").term == 1


def test_pre_vote_for_a_stale_log_is_refused() -> None:
    core = _single(_log_of([1, 2]))
    core.step(_vote_request(term=3, last_index=1, last_term=1, pre=True))
    (response,) = core.ready().messages
    assert response.type is MessageType.PRE_VOTE_RESP and response.reject
    assert core.term == 2, "a pre-vote never changes the voter's term"


def test_leader_without_quorum_contact_for_an_election_timeout_steps_down() -> None:
    h = Harness(check_quorum=True)
    h.elect("n1")
    for _ in range(2 * ET):
        h.tick("n1")
        h.stabilize(keep=isolate("n1"))
    assert h.core("n1").role is Role.FOLLOWER


def test_leader_in_contact_with_a_quorum_stays_leader() -> None:
    h = Harness(check_quorum=True)
    h.elect("n1")
    for _ in range(3 * ET):
        h.tick("n1")
        h.stabilize(keep=isolate("n3"))
    assert h.core("n1").role is Role.LEADER


def test_follower_in_leader_lease_ignores_vote_request_of_higher_term() -> None:
    h = Harness(check_quorum=True, pre_vote=False)
    h.elect("n1")
    follower = h.core("n2")
    follower.step(Message(type=MessageType.VOTE, from_="n3", to="n2", term=5, index=100, log_term=5))
    assert follower.term == 1 and follower.leader_id == "n1"
    assert not [m for m in follower.ready().messages if m.type is MessageType.VOTE_RESP]


def test_restarted_node_keeps_its_vote_for_the_term() -> None:
    h = Harness(pre_vote=False)
    core = h.core("n1")
    core.step(_vote_request(term=1, last_index=0, last_term=0))
    h.process("n1")
    restarted = h.restart("n1").core
    assert (restarted.term, restarted.vote) == (1, "n2")
    restarted.step(Message(type=MessageType.VOTE, from_="n3", to="n1", term=1))
    assert restarted.ready().messages[0].reject
