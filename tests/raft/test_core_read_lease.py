"""Leader leases (Raft thesis §6.4.1, RaftConfig.read_lease): after a quorum answered a ReadIndex round that
began at host time t, the leader answers reads at once until t + read_lease, and never when another leader
may have been elected meanwhile. Before, every read waited for its own round (a heartbeat to a quorum)."""

from __future__ import annotations

import pytest

from raft.core import RaftConfig
from raft.types import ConfChange, ConfChangeType, MessageType, Role

from .harness import Harness, isolate

ET = 10
LEASE = 8.0


def leased(**config: object) -> Harness:
    h = Harness(check_quorum=True, pre_vote=True, election_tick=ET, read_lease=LEASE, **config)
    h.elect("n1")
    h.core("n1").propose(b"w")
    h.stabilize()
    return h


def read(h: Harness, node: str, ctx: bytes, now: float) -> bool:
    """Ask `node` for a read at host time `now`; whether it was answered without any message."""
    before = len(h.nodes[node].read_states)
    h.core(node).read_index(ctx, now)
    h.process(node)
    answered = len(h.nodes[node].read_states) > before
    return answered and not [m for m in h.pending if m.context == ctx]


def round_trip(h: Harness, ctx: bytes, now: float) -> None:
    """A read that takes its round (and so starts a lease at `now`)."""
    assert not read(h, "n1", ctx, now)
    h.stabilize()
    assert h.nodes["n1"].read_states[-1].request_ctx == ctx


def test_a_read_inside_the_lease_is_answered_at_once_with_the_commit_index() -> None:
    h = leased()
    round_trip(h, b"r1", now=100.0)
    assert read(h, "n1", b"r2", now=107.9)
    state = h.nodes["n1"].read_states[-1]
    assert (state.request_ctx, state.index) == (b"r2", h.core("n1").commit_index)
    assert h.core("n1").lease_reads == 1


def test_the_lease_ends_read_lease_after_the_round_began_and_a_round_renews_it() -> None:
    h = leased()
    round_trip(h, b"r1", now=100.0)
    assert not read(h, "n1", b"r2", now=108.0)  # from the round's start, not its answer
    h.stabilize()
    assert read(h, "n1", b"r3", now=115.9)  # r2's round began at 108


def test_without_a_time_or_without_read_lease_every_read_takes_a_round() -> None:
    h = leased()
    round_trip(h, b"r1", now=100.0)
    assert not read(h, "n1", b"r2", now=-1.0)
    plain = Harness(check_quorum=True, election_tick=ET)
    plain.elect("n1")
    plain.core("n1").propose(b"w")
    plain.stabilize()
    round_trip(plain, b"r1", now=100.0)
    assert not read(plain, "n1", b"r2", now=100.5)


def test_no_lease_after_telling_a_follower_to_take_over_even_if_the_transfer_fails() -> None:
    """TimeoutNow lets its target win inside everyone's lease: a leader that sent it must not trust its
    lease again in that term, though the transfer was abandoned and it still leads."""
    h = leased()
    h.core("n1").transfer_leader("n2")
    h.process("n1")
    h.take(MessageType.TIMEOUT_NOW)  # lost
    h.tick("n1", ET)  # the transfer is abandoned
    assert h.core("n1").role is Role.LEADER
    h.stabilize()
    round_trip(h, b"r1", now=200.0)
    assert not read(h, "n1", b"r2", now=200.5)


def test_a_membership_change_ends_the_lease() -> None:
    h = leased()
    round_trip(h, b"r1", now=100.0)
    h.core("n1").propose_conf_change(ConfChange(ConfChangeType.REMOVE_NODE, "n3"))
    h.stabilize()
    assert not read(h, "n1", b"r2", now=101.0)


def test_quiescing_ends_the_lease() -> None:
    h = leased(quiesce=True, heartbeat_tick=1)
    round_trip(h, b"r1", now=100.0)
    for _ in range(3 * ET):  # reads kept it awake for an election timeout; then it is idle
        for node in h.nodes:
            h.tick(node)
        h.stabilize()
    assert h.core("n1").quiesced
    assert not read(h, "n1", b"r2", now=101.0)


def test_a_quiesced_voter_told_its_leader_is_down_stays_in_its_lease_until_its_end() -> None:
    """The host's liveness report may come sooner than an election timeout after the voter last heard its
    leader (a false alarm, a short liveness timeout): it used to end the voter's lease at once, so n3
    could be elected while n1 still answered reads from its lease."""
    h = leased(quiesce=True, heartbeat_tick=1)
    for _ in range(3 * ET):
        for node in h.nodes:
            h.tick(node)
        h.stabilize()
    assert all(h.core(n).quiesced for n in h.nodes)
    round_trip(h, b"r1", now=100.0)  # n1 wakes for it; n2 and n3 answer without waking
    h.core("n2").peer_down("n1")
    h.core("n3").peer_down("n1")
    for _ in range(ET - 2):
        h.tick("n2")
        h.tick("n3")
        h.stabilize(keep=isolate("n1"))
    assert h.core("n2").role is not Role.LEADER and h.core("n3").role is not Role.LEADER
    for _ in range(3 * ET):  # once the leases are over, they elect one of them
        h.tick("n2")
        h.tick("n3")
        h.stabilize(keep=isolate("n1"))
    assert Role.LEADER in (h.core("n2").role, h.core("n3").role)


def test_a_restarted_voter_grants_no_vote_for_an_election_timeout() -> None:
    """It may have answered a lease round just before it stopped, and has forgotten it."""
    h = leased()
    h.restart("n2")
    h.tick("n3", 3 * ET)  # n3 campaigns; n1 is cut off, so only n2's vote can elect it
    h.stabilize(keep=isolate("n1"))
    assert h.core("n3").role is not Role.LEADER
    h.tick("n2", ET)
    h.tick("n3", 3 * ET)
    h.stabilize(keep=isolate("n1"))
    assert h.core("n3").role is Role.LEADER


def test_read_lease_needs_check_quorum() -> None:
    with pytest.raises(ValueError, match="check_quorum"):
        RaftConfig(id="n1", check_quorum=False, read_lease=1.0)


def test_lease_read_gives_the_read_point_at_once_only_inside_the_lease() -> None:
    """The host's fast path (RaftHost.read_index_nowait) asks `lease_read` before queueing a read."""
    h = leased()
    leader = h.core("n1")
    assert leader.lease_read(100.0) == -1  # no round answered yet
    round_trip(h, b"r1", now=100.0)
    assert leader.lease_read(107.5) == leader.commit_index
    assert leader.lease_read(108.0) == -1
    assert h.core("n2").lease_read(101.0) == -1  # a follower never
    leader.transfer_leader("n2")
    h.process("n1")
    assert leader.lease_read(101.0) == -1


def test_a_single_voter_answers_at_once_and_keeps_nothing_per_read() -> None:
    """Nobody else can lead a group of one: no round, no lease to keep, and no record of when each read began
    (those records grew by one per read of an R1 stream, never answered by a quorum)."""
    h = Harness(("n1",), check_quorum=True, election_tick=ET, read_lease=LEASE)
    h.elect("n1")
    leader = h.core("n1")
    assert leader.lease_read(5.0) == leader.commit_index
    for index in range(50):
        leader.read_index(b"solo-%d" % index, float(index))
    h.process("n1")
    assert len(h.nodes["n1"].read_states) == 50
    assert not leader._read_started
