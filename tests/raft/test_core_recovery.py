"""A member that lost state it had acknowledged (RaftConfig.recovering): no vote, no campaign, until caught up."""

from __future__ import annotations

import random

from raft.core import RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.progress import ProgressState
from raft.types import CAMPAIGN_TRANSFER, LOST_ENTRIES, ConfState, HardState, Message, MessageType, Role

from .harness import Harness, Node, isolate


def _wipe(h: Harness, node_id: str) -> RaftCore:
    """`node_id` restarts with its disk discarded (log, term and vote gone), recovering."""
    storage = MemoryLogStorage(h.conf)
    core = RaftCore(RaftConfig(id=node_id, recovering=True), storage, random.Random(f"{node_id}-wiped"))
    h.nodes[node_id] = Node(core, storage)
    return core


def _committed_on_n1_and_n2_only() -> Harness:
    h = Harness()
    h.elect("n1")
    for data in (b"a", b"b", b"c"):
        h.core("n1").propose(data)
    h.stabilize(isolate("n3"))
    assert h.core("n1").commit_index == 4 and h.core("n3").last_index == 1
    return h


def test_a_recovering_member_refuses_votes_and_pre_votes() -> None:
    core = RaftCore(
        RaftConfig(id="n1", recovering=True),
        MemoryLogStorage(ConfState(voters=("n1", "n2", "n3"))),
        random.Random(1),
    )
    assert core.recovering
    for vote_type in (MessageType.PRE_VOTE, MessageType.VOTE):
        core.step(Message(type=vote_type, from_="n2", to="n1", term=5, index=10, log_term=4))
    answers = core.ready().messages
    assert [(m.type, m.reject) for m in answers] == [
        (MessageType.PRE_VOTE_RESP, True),
        (MessageType.VOTE_RESP, True),
    ]
    assert core.vote is None


def test_a_recovering_member_does_not_campaign() -> None:
    core = RaftCore(
        RaftConfig(id="n1", recovering=True),
        MemoryLogStorage(ConfState(voters=("n1", "n2", "n3"))),
        random.Random(1),
    )
    for _ in range(100):
        core.tick()
    core.campaign()
    assert core.role is Role.FOLLOWER and not core.ready().messages


def test_the_lone_voter_of_a_group_has_no_one_to_recover_from() -> None:
    core = RaftCore(
        RaftConfig(id="n1", recovering=True), MemoryLogStorage(ConfState(voters=("n1",))), random.Random(1)
    )
    assert not core.recovering


def test_a_wiped_member_does_not_help_elect_a_leader_missing_what_it_acknowledged() -> None:
    """n2 acknowledged entries 2-4, which committed with n1's copy; it loses them and its vote. With n1 gone,
    n3 (without them) must not win with n2's vote: the committed entries would be lost."""
    h = _committed_on_n1_and_n2_only()
    _wipe(h, "n2")
    h.core("n3").campaign()
    h.stabilize(isolate("n1"))
    assert h.core("n3").role is not Role.LEADER
    assert h.core("n2").vote is None


def test_the_leader_probes_a_member_that_lost_entries_from_its_real_log_and_it_votes_again_once_caught_up() -> (
    None
):
    h = _committed_on_n1_and_n2_only()
    assert h.core("n1").progress["n2"].match == 4
    _wipe(h, "n2")
    h.core("n1").propose(b"d")  # the leader believes n2 holds 1..4 and sends it only entry 5
    h.process("n1")
    h.deliver(lambda m: m.to == "n2")
    h.process("n2")
    # n2 cannot take 5 (nothing before it): an ordinary rejection below its acknowledged match is ignored as
    # stale, so the leader must be told the entries are gone: at the next heartbeat
    h.core("n1").tick()
    h.process("n1")
    h.deliver(lambda m: m.to == "n2")
    h.process("n2")
    lost = [m for m in h.pending if m.context == LOST_ENTRIES]
    assert lost and lost[0].reject and lost[0].reject_hint == 0
    h.deliver(lambda m: m.to == "n1")
    assert h.core("n1").progress["n2"].match == 0
    h.stabilize(isolate("n3"))
    assert not h.core("n2").recovering
    assert h.applied_data("n2") == [b"a", b"b", b"c", b"d"]
    # caught up, it votes again (a transfer's campaign, which its leader lease does not hold back)
    n2 = h.core("n2")
    n2.step(
        Message(
            type=MessageType.VOTE,
            from_="n3",
            to="n2",
            term=n2.term + 1,
            index=n2.last_index,
            log_term=n2.entry_term(n2.last_index),
            context=CAMPAIGN_TRANSFER,
        )
    )
    (answer,) = n2.ready().messages
    assert answer.type is MessageType.VOTE_RESP and not answer.reject and n2.vote == "n3"


def test_a_late_lost_entries_notice_only_lowers_the_match_it_never_loses_commits() -> None:
    h = _committed_on_n1_and_n2_only()
    leader = h.core("n1")
    leader.step(
        Message(
            type=MessageType.APPEND_RESP,
            from_="n2",
            to="n1",
            term=leader.term,
            index=2,
            reject=True,
            reject_hint=2,
            context=LOST_ENTRIES,
        )
    )
    assert leader.progress["n2"].match == 2 and leader.commit_index == 4
    h.stabilize()
    assert leader.progress["n2"].match == leader.last_index


def test_a_lost_entries_notice_does_not_send_a_second_snapshot_while_one_is_on_its_way() -> None:
    h = _committed_on_n1_and_n2_only()
    leader = h.core("n1")
    progress = leader.progress["n2"]
    progress.become_snapshot(4)
    h.pending.clear()
    leader.step(
        Message(
            type=MessageType.APPEND_RESP,
            from_="n2",
            to="n1",
            term=leader.term,
            index=0,
            reject=True,
            reject_hint=0,
            context=LOST_ENTRIES,
        )
    )
    assert progress.state is ProgressState.SNAPSHOT and progress.match == 4
    assert not [m for m in leader.ready().messages if m.to == "n2"]


def _restart_with_log_cut_to(h: Harness, node_id: str, last: int) -> RaftCore:
    """`node_id` restarts from a log cut back to `last` (its hard state cut with it), not knowing it lost
    anything: a write-ahead log truncated inside synced records looks like a torn last write."""
    old = h.nodes[node_id].storage
    storage = MemoryLogStorage(h.conf)
    storage.append(old.entries(1, last + 1))
    hard = old.hard_state
    storage.set_hard_state(HardState(term=hard.term, vote=hard.vote, commit=min(hard.commit, last)))
    core = RaftCore(RaftConfig(id=node_id), storage, random.Random(f"{node_id}-cut"))
    h.nodes[node_id] = Node(core, storage)
    return core


def test_a_follower_whose_log_was_cut_below_what_it_acknowledged_is_caught_up_by_the_same_leader() -> None:
    """n2 acknowledged 1..4 and comes back holding 1..2, not recovering (it cannot tell). Its rejections are
    below the match the leader recorded; were they taken as stale, the leader would probe it at 4 for ever
    and it would only catch up under the next leader."""
    h = _committed_on_n1_and_n2_only()
    h.stabilize()  # n3 catches up too: only n2 is behind after the cut
    assert h.core("n1").progress["n2"].match == 4
    n2 = _restart_with_log_cut_to(h, "n2", 2)
    assert not n2.recovering and n2.last_index == 2
    h.core("n1").propose(b"d")
    h.stabilize()
    assert h.leader() == "n1" and h.core("n1").term == n2.term
    assert n2.last_index == h.core("n1").last_index
    assert h.core("n1").progress["n2"].match == h.core("n1").last_index
