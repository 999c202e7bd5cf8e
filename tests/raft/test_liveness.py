"""Node liveness (raft/liveness.py): silence beyond the timeout is down, once; the next frame is up
again; a new incarnation is a restart even without a silence; the first frame is no news."""

from __future__ import annotations

import pytest

from raft.liveness import NodeLiveness


def test_first_frame_is_no_news_and_a_peer_stays_up_while_it_speaks() -> None:
    live = NodeLiveness(timeout=1.0)
    assert live.heard("n2", 7, now=0.0) is False
    for t in (0.5, 1.2, 2.0):
        assert live.heard("n2", 7, now=t) is False
        assert live.expired(now=t + 0.9) == []
    assert live.is_up("n2")


def test_silence_beyond_the_timeout_is_down_once_and_the_next_frame_is_up() -> None:
    live = NodeLiveness(timeout=1.0)
    live.heard("n2", 7, now=0.0)
    assert live.expired(now=1.0) == []
    assert live.expired(now=1.01) == ["n2"]
    assert live.expired(now=5.0) == []  # reported once
    assert live.down() == ["n2"]
    assert live.heard("n2", 7, now=5.0) is True
    assert live.down() == [] and live.is_up("n2")


def test_a_new_incarnation_is_news_without_any_silence() -> None:
    live = NodeLiveness(timeout=1.0)
    live.heard("n2", 7, now=0.0)
    assert live.heard("n2", 8, now=0.1) is True
    assert live.heard("n2", 8, now=0.2) is False


def test_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError):
        NodeLiveness(timeout=0)


def test_a_stall_of_our_own_is_not_the_peers_silence() -> None:
    """The node's loop held up for 3 s (an overloaded machine): its peers' frames of that time wait to be
    read, so none is declared down on the first check after it; one that stays silent is, a timeout later."""
    live = NodeLiveness(timeout=1.0)
    live.heard("n2", 7, now=0.0)
    live.heard("n3", 7, now=0.0)
    assert live.expired(now=0.05) == []
    assert live.expired(now=3.05) == []  # we were stalled from 0.05 to 3.05
    assert live.heard("n2", 7, now=3.06) is False  # n2's waiting frames: never down
    gone: list[tuple[str, float]] = []
    for tick in range(1, 25):  # checked every 50 ms from then on
        now = 3.05 + tick * 0.05
        if tick % 5 == 0:
            live.heard("n2", 7, now=now)
        gone += [(peer, round(now, 2)) for peer in live.expired(now=now)]
    assert gone == [("n3", 4.05)]  # silent for a timeout of our running time after the stall: down, once
    assert live.is_up("n2")


def test_regular_checks_count_silence_in_full() -> None:
    live = NodeLiveness(timeout=1.0)
    live.heard("n2", 7, now=0.0)
    for tick in range(1, 21):
        assert live.expired(now=tick * 0.05) == []
    assert live.expired(now=1.05) == ["n2"]
