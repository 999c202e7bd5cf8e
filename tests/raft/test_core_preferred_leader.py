"""A preferred leader (placement's choice, to spread leaders over nodes): the leader hands over to it by
leadership transfer (§3.10) once it is caught up and answering, and backs off when that fails."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from raft.types import Message, MessageType

from .harness import Harness, isolate

ET = 10
HB = 1


def _heartbeat_round(h: Harness, node_id: str, keep: Callable[[Message], bool] = lambda m: True) -> None:
    h.tick(node_id)
    h.stabilize(keep=keep)


def test_leader_hands_over_to_the_preferred_member_at_the_next_election_timeout() -> None:
    h = Harness(election_tick=ET, heartbeat_tick=HB)
    h.elect("n1")
    term = h.core("n1").term
    for node_id in h.nodes:
        h.core(node_id).set_preferred_leader("n2")
    for _ in range(ET - 1):
        _heartbeat_round(h, "n1")
        assert h.leader() == "n1"  # never before an election timeout has passed
    _heartbeat_round(h, "n1")
    assert h.leader() == "n2" and h.core("n2").term == term + 1
    # the preferred leader stays: nothing moves on later timeouts
    for _ in range(3 * ET):
        _heartbeat_round(h, "n2")
    assert h.leader() == "n2"


def test_no_hand_over_to_a_preferred_member_that_is_not_answering() -> None:
    h = Harness(election_tick=ET, heartbeat_tick=HB, check_quorum=True)
    h.elect("n1")
    h.core("n1").set_preferred_leader("n3")
    h.core("n1").propose(b"while n3 is away")
    for _ in range(3 * ET):
        _heartbeat_round(h, "n1", keep=isolate("n3"))
        assert not [m for m in h.pending if m.type is MessageType.TIMEOUT_NOW]
    assert h.leader() == "n1"
    # once it is back and caught up, it takes over
    for _ in range(2 * ET):
        _heartbeat_round(h, "n1")
    assert h.leader() == "n3"
    assert h.applied_data("n3") == [b"while n3 is away"]


def test_a_failed_hand_over_backs_off_before_trying_again() -> None:
    h = Harness(election_tick=ET, heartbeat_tick=HB, check_quorum=False)
    h.elect("n1")
    h.core("n1").set_preferred_leader("n2")
    attempts = []
    # n2 answers heartbeats but its TimeoutNow is lost every time
    for tick in range(20 * ET):
        h.tick("n1")
        h.process_all()
        if h.take(MessageType.TIMEOUT_NOW):
            attempts.append(tick)
        h.stabilize()
    assert h.leader() == "n1"
    # without a backoff it would try at every one of the 20 election timeouts; the gaps double
    assert 2 <= len(attempts) <= 4, attempts
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    assert gaps == sorted(gaps) and gaps[0] > ET, attempts
    h.core("n1").propose(b"proposals are accepted between attempts")


def test_preferred_member_that_is_not_a_voter_is_ignored() -> None:
    h = Harness(election_tick=ET, heartbeat_tick=HB)
    h.elect("n1")
    h.core("n1").set_preferred_leader("n9")
    for _ in range(3 * ET):
        _heartbeat_round(h, "n1")
    assert h.leader() == "n1"


def test_an_explicit_transfer_away_from_the_preferred_member_sticks_until_the_next_election() -> None:
    """A stream STEPDOWN on its preferred leader moves leadership; handing it straight back would undo it."""
    h = Harness(election_tick=ET, heartbeat_tick=HB, check_quorum=True)
    h.elect("n1")
    for node_id in h.nodes:
        h.core(node_id).set_preferred_leader("n1")
    h.core("n1").transfer_leader("n2")
    h.stabilize()
    assert h.leader() == "n2"
    for _ in range(5 * ET):
        _heartbeat_round(h, "n2")
    assert h.leader() == "n2"
    # an ordinary election (n2 cut off until the others elect without it) ends the stickiness
    for _ in range(3 * ET):
        for node_id in h.nodes:
            h.tick(node_id)
        h.stabilize(keep=isolate("n2"))
        if h.leader() not in (None, "n2"):
            break
    new = h.leader()
    assert new == "n3" or new == "n1", new
    for _ in range(3 * ET):
        _heartbeat_round(h, new)
        new = h.leader()
    assert h.leader() == "n1"
