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
