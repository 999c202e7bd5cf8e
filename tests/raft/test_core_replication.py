"""Log replication and commitment, one test per rule of the Raft paper (§5.3, §5.4.2), plus flow control."""

from __future__ import annotations

import random

import pytest

from raft.core import ProposalDroppedError, RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.progress import ProgressState
from raft.raft_log import LogInvariantError, RaftLog
from raft.types import ConfState, Entry, HardState, Message, MessageType, Role

from .harness import Harness, isolate


def _follower(terms: list[int], commit: int = 0) -> RaftCore:
    storage = MemoryLogStorage(ConfState(voters=("n1", "n2", "n3")))
    storage.append([Entry(term=t, index=i + 1, data=b"old%d" % (i + 1)) for i, t in enumerate(terms)])
    storage.set_hard_state(HardState(term=max(terms, default=0), commit=commit))
    return RaftCore(RaftConfig(id="n2"), storage, random.Random(1))


def _append(prev_index: int, prev_term: int, entries: list[Entry], commit: int = 0, term: int = 5) -> Message:
    return Message(
        type=MessageType.APPEND,
        from_="n1",
        to="n2",
        term=term,
        index=prev_index,
        log_term=prev_term,
        entries=tuple(entries),
        commit=commit,
    )


def _persist(core: RaftCore, storage: MemoryLogStorage) -> None:
    """Do what a host does with a Ready, minus sending."""
    ready = core.ready()
    storage.append(ready.entries)
    if ready.hard_state is not None:
        storage.set_hard_state(ready.hard_state)
    core.advance(ready)


def _log_terms(core: RaftCore) -> list[int]:
    return [e.term for e in core.log_entries(1, core.last_index + 1)]


def test_new_leader_appends_an_empty_entry_of_its_term() -> None:
    h = Harness()
    h.elect("n1")
    leader = h.core("n1")
    (entry,) = leader.log_entries(1, 2)
    assert (entry.term, entry.index, entry.data) == (leader.term, 1, b"")
    assert leader.commit_index == 1


def test_only_the_leader_accepts_proposals() -> None:
    h = Harness()
    h.elect("n1")
    with pytest.raises(ProposalDroppedError):
        h.core("n2").propose(b"x")


def test_leader_replicates_proposals_and_all_members_apply_them_in_order() -> None:
    h = Harness()
    h.elect("n1")
    first = h.core("n1").propose_many([b"a", b"b", b"c"])
    h.core("n1").propose(b"d")
    h.stabilize()
    assert first == 2
    for node_id in h.nodes:
        assert h.applied_data(node_id) == [b"a", b"b", b"c", b"d"]


def test_entry_is_committed_once_a_majority_stores_it_and_not_before() -> None:
    h = Harness(ids=("n1", "n2", "n3", "n4", "n5"))
    h.elect("n1")
    leader = h.core("n1")
    index = leader.propose(b"x")
    h.process("n1")
    appends = h.take(MessageType.APPEND)
    h.pending = [m for m in appends if m.to == "n2"]
    h.deliver()
    h.process("n2")
    h.deliver()
    assert leader.commit_index < index, "leader + 1 of 5 is not a majority"
    h.pending = [m for m in appends if m.to == "n3"]
    h.deliver()
    h.process("n3")
    h.deliver()
    assert leader.commit_index == index


def test_commit_reaches_followers_in_notices_that_ask_for_no_answer() -> None:
    """Once an entry commits, each follower learns so without an empty APPEND (and its APPEND_RESP):
    a COMMIT notice carries it, also to the follower whose ack came in after the commit, and no tick
    is needed. One proposal costs one APPEND and one ack per follower."""
    h = Harness()
    h.elect("n1")
    h.stabilize()
    leader = h.core("n1")
    index = leader.propose(b"x")
    sent: list[Message] = []
    for _ in range(50):
        h.process_all()
        if not h.pending:
            break
        sent.extend(h.pending)
        h.deliver()
    kinds = [(m.type, m.to) for m in sent]
    for follower in ("n2", "n3"):
        assert kinds.count((MessageType.APPEND, follower)) == 1
        assert kinds.count((MessageType.APPEND_RESP, "n1")) == 2
        assert (MessageType.COMMIT, follower) in kinds
        assert h.core(follower).commit_index == index
        assert h.applied_data(follower) == [b"x"]
    notices = [m for m in sent if m.type is MessageType.COMMIT]
    assert all(m.commit == index for m in notices) and len(notices) == 2


def test_commit_notice_commits_nothing_a_follower_has_not_got() -> None:
    """The notice is valid only up to an entry the follower holds with the leader's term (as an empty
    APPEND's log check): n3 lost the entry, hears every COMMIT notice, and must not commit it."""
    h = Harness()
    h.elect("n1")
    h.stabilize()
    leader = h.core("n1")
    index = leader.propose(b"x")
    notices_to_n3: list[Message] = []
    for _ in range(10):
        h.process_all()
        notices_to_n3.extend(m for m in h.pending if m.to == "n3" and m.type is MessageType.COMMIT)
        h.deliver(lambda m: not (m.to == "n3" and m.type is MessageType.APPEND))
    assert leader.commit_index == index
    assert h.core("n2").commit_index == index
    assert notices_to_n3, "n3 was told of the commit"
    assert h.core("n3").commit_index < index
    assert h.applied_data("n3") == []


def test_entry_of_a_previous_term_is_not_committed_by_counting_replicas() -> None:
    # Figure 8: n1 leads term 2 with an entry (2, 2) only it stores; then it
    # leads again in term 4 and replicates (2, 2) to a majority. Counting
    # replicas must not commit it until an entry of term 4 is also replicated.
    storage = MemoryLogStorage(ConfState(voters=("n1", "n2", "n3")))
    storage.append([Entry(1, 1), Entry(2, 2, data=b"old")])
    storage.set_hard_state(HardState(term=3, commit=1))
    leader = RaftCore(RaftConfig(id="n1", pre_vote=False), storage, random.Random(1))
    leader.campaign()
    leader.step(Message(type=MessageType.VOTE_RESP, from_="n2", to="n1", term=4))
    assert leader.role is Role.LEADER
    _persist(leader, storage)
    # n2 acknowledges only the old entry (its append of the no-op was lost).
    leader.step(Message(type=MessageType.APPEND_RESP, from_="n2", to="n1", term=4, index=2))
    assert leader.commit_index == 1
    leader.step(Message(type=MessageType.APPEND_RESP, from_="n2", to="n1", term=4, index=3))
    assert leader.commit_index == 3


def test_follower_rejects_append_whose_previous_entry_it_lacks() -> None:
    follower = _follower([1, 1])
    follower.step(_append(prev_index=3, prev_term=1, entries=[Entry(1, 4)]))
    (response,) = follower.ready().messages
    assert response.type is MessageType.APPEND_RESP and response.reject
    assert response.reject_hint == 2 and follower.last_index == 2


def test_follower_rejects_append_whose_previous_entry_has_another_term() -> None:
    follower = _follower([1, 1, 2])
    follower.step(_append(prev_index=3, prev_term=3, entries=[Entry(3, 4)]))
    (response,) = follower.ready().messages
    assert response.reject
    # Hint: the last entry whose term is <= 3 is index 3 (term 2); the leader skips back by term.
    assert (response.reject_hint, response.log_term) == (3, 2)


def test_follower_deletes_conflicting_suffix_and_appends_leaders_entries() -> None:
    follower = _follower([1, 1, 2, 2])
    follower.step(_append(prev_index=2, prev_term=1, entries=[Entry(3, 3, data=b"new3")]))
    assert _log_terms(follower) == [1, 1, 3]
    ready = follower.ready()
    assert [(e.index, e.term) for e in ready.entries] == [(3, 3)]
    assert ready.messages[0].index == 3 and not ready.messages[0].reject


def test_follower_keeps_entries_already_present_on_duplicate_or_stale_append() -> None:
    follower = _follower([1, 1, 1, 1])
    follower.step(_append(prev_index=1, prev_term=1, entries=[Entry(1, 2, data=b"old2")]))
    assert follower.last_index == 4, "an old append must not truncate entries after it"
    ready = follower.ready()
    assert not ready.entries and ready.messages[0].index == 2


def test_follower_commit_is_min_of_leader_commit_and_last_new_entry() -> None:
    follower = _follower([1, 1, 1])
    follower.step(_append(prev_index=1, prev_term=1, entries=[Entry(1, 2, data=b"old2")], commit=10))
    assert follower.commit_index == 2


def test_follower_never_commits_past_what_the_heartbeat_allows() -> None:
    follower = _follower([1, 1, 1])
    follower.step(Message(type=MessageType.HEARTBEAT, from_="n1", to="n2", term=1, commit=2))
    assert follower.commit_index == 2


def test_append_below_the_commit_index_is_answered_with_the_commit_index() -> None:
    follower = _follower([1, 1, 1], commit=2)
    follower.step(_append(prev_index=1, prev_term=1, entries=[Entry(2, 2)]))
    (response,) = follower.ready().messages
    assert (response.index, response.reject) == (2, False)
    assert _log_terms(follower) == [1, 1, 1]


def test_committed_entries_are_never_overwritten() -> None:
    storage = MemoryLogStorage(ConfState(voters=("n1",)))
    storage.append([Entry(1, 1), Entry(1, 2)])
    log = RaftLog(storage, committed=2, applied=0)
    with pytest.raises(LogInvariantError, match="committed"):
        log.maybe_append(1, 1, 2, [Entry(2, 2)])


def test_leader_repairs_a_divergent_follower_log() -> None:
    h = Harness(pre_vote=False)
    h.elect("n1")
    # n1 writes entries only it sees, then loses leadership.
    h.core("n1").propose_many([b"lost1", b"lost2", b"lost3"])
    h.process("n1")
    h.pending.clear()
    new_leader = None
    for _ in range(60):
        h.tick("n2")
        h.tick("n3")
        h.stabilize(keep=isolate("n1"))
        new_leader = next((n for n in ("n2", "n3") if h.core(n).role is Role.LEADER), None)
        if new_leader:
            break
    assert new_leader is not None
    h.core(new_leader).propose(b"kept")
    h.stabilize(keep=isolate("n1"))
    h.tick(new_leader)
    h.stabilize()
    assert h.core("n1").role is Role.FOLLOWER
    assert _log_terms(h.core("n1")) == _log_terms(h.core(new_leader))
    assert h.applied_data("n1") == [b"kept"]


def test_many_entries_travel_in_one_message_up_to_the_per_message_limit() -> None:
    h = Harness(max_entries_per_msg=100)
    h.elect("n1")
    h.core("n1").propose_many([b"x"] * 250)
    h.process("n1")
    sizes = [len(m.entries) for m in h.take(MessageType.APPEND) if m.to == "n2"]
    assert sizes == [100, 100, 50]


def test_message_size_limit_splits_batches() -> None:
    h = Harness(max_size_per_msg=1000)
    h.elect("n1")
    h.core("n1").propose_many([b"y" * 100] * 20)
    h.process("n1")
    sizes = [len(m.entries) for m in h.take(MessageType.APPEND) if m.to == "n2"]
    assert sum(sizes) == 20 and max(sizes) <= 1000 // 116 + 1 and len(sizes) > 1


def test_replicating_follower_pipelines_up_to_max_inflight_messages() -> None:
    h = Harness(max_entries_per_msg=1, max_inflight_msgs=3)
    h.elect("n1")
    leader = h.core("n1")
    assert leader.progress["n2"].state is ProgressState.REPLICATE
    leader.propose_many([b"a", b"b", b"c", b"d", b"e"])
    h.process("n1")
    to_n2 = [m for m in h.take(MessageType.APPEND) if m.to == "n2"]
    assert len(to_n2) == 3, "no more than max_inflight_msgs unacknowledged appends"
    assert leader.progress["n2"].is_paused()


def test_acknowledgements_open_the_pipeline_again() -> None:
    h = Harness(max_entries_per_msg=1, max_inflight_msgs=2)
    h.elect("n1")
    h.core("n1").propose_many([b"a", b"b", b"c", b"d"])
    h.stabilize()
    assert all(h.applied_data(n) == [b"a", b"b", b"c", b"d"] for n in h.nodes)


def test_probing_follower_gets_one_append_at_a_time() -> None:
    h = Harness(max_entries_per_msg=1)
    h.elect("n1")
    leader = h.core("n1")
    leader.report_unreachable("n2")
    assert leader.progress["n2"].state is ProgressState.PROBE
    leader.propose_many([b"a", b"b", b"c"])
    h.process("n1")
    assert len([m for m in h.take(MessageType.APPEND) if m.to == "n2"]) == 1


def test_lost_appends_are_recovered_through_heartbeats() -> None:
    h = Harness()
    h.elect("n1")
    h.core("n1").propose(b"lost-once")
    h.process("n1")
    h.take(MessageType.APPEND)  # dropped on the floor
    for _ in range(3):
        h.tick("n1")
        h.stabilize()
    assert all(h.applied_data(n) == [b"lost-once"] for n in h.nodes)


def test_reordered_appends_still_converge() -> None:
    h = Harness(max_entries_per_msg=1, max_inflight_msgs=8)
    h.elect("n1")
    h.core("n1").propose_many([b"%d" % i for i in range(6)])
    h.process("n1")
    h.pending.reverse()
    h.deliver()
    for _ in range(5):
        h.tick("n1")
        h.stabilize()
    assert all(h.applied_data(n) == [b"%d" % i for i in range(6)] for n in h.nodes)
