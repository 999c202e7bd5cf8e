"""The nodes' position beacons (cluster/direct_get/positions.py): one per node, only what moved, and the
follower staleness a board derives from them, the same as one beacon per stream every interval gave."""

import random

from cluster.direct_get.positions import (
    NOT_LED,
    Beacon,
    LedStream,
    Position,
    PositionBoard,
    PositionSender,
    decode_beacon,
    encode_beacon,
)
from cluster.direct_get.staleness import WINDOW_NS, StalenessTracker

MS = 1_000_000


def test_beacon_codec_round_trips_and_rejects_garbage() -> None:
    beacon = Beacon(
        "n1/w0", 7, 3, 123_456, False, (Position("ORDERS", 42), Position("M", 5, 99), Position("OLD", NOT_LED))
    )
    assert decode_beacon(encode_beacon(beacon)) == beacon
    assert decode_beacon(b"short") is None
    assert decode_beacon(encode_beacon(beacon)[:-1]) is None
    assert decode_beacon(encode_beacon(beacon) + b"x") is None


def test_an_idle_leader_sends_nothing_per_stream_after_its_first_beacon() -> None:
    seqs = {f"S{i}": i for i in range(100)}
    sender = PositionSender("n1", epoch=1)
    for name in seqs:
        sender.lead(name, LedStream(last_seq=lambda name=name: seqs[name]))
    first = sender.next_beacon(1_000 * MS)
    assert first.full and len(first.positions) == 100 and first.number == 1
    for number in range(2, 12):
        idle = sender.next_beacon(number * 500 * MS)
        assert idle.positions == () and idle.number == number and not idle.full
    seqs["S3"] = 77
    sender.moved("S3")
    sender.moved("S3")
    assert sender.next_beacon(7_000 * MS).positions == (Position("S3", 77),)
    sender.unlead("S4")
    sender.moved("S4")  # no longer led here: not a position any more
    assert sender.next_beacon(7_500 * MS).positions == (Position("S4", NOT_LED),)
    sender.resync()
    full = sender.next_beacon(8_000 * MS)
    assert full.full and len(full.positions) == 99


def test_a_copy_is_sent_in_every_beacon_with_its_own_freshness() -> None:
    sender = PositionSender("n1", epoch=1)
    sender.lead("M", LedStream(last_seq=lambda: 9, behind_ns=lambda: 300 * MS))
    sender.next_beacon(1_000 * MS)
    assert sender.next_beacon(1_500 * MS).positions == (Position("M", 9, 1_200 * MS),)
    assert not sender.bounded()
    sender.lead("B", LedStream(last_seq=lambda: 1, bounded=True))
    assert sender.bounded()
    sender.unlead("B")
    assert not sender.bounded()


def _beacon(number: int, at_ms: int, *positions: Position, full: bool = False, sender: str = "n1") -> Beacon:
    return Beacon(sender, 1, number, at_ms * MS, full, positions)


def test_an_idle_follower_stays_as_fresh_as_its_leaders_latest_beacon() -> None:
    board = PositionBoard("n2")
    assert not board.receive(_beacon(1, 1_000, Position("S", 5), full=True))
    assert not board.receive(_beacon(2, 1_500))
    assert board.staleness_ns("S", 5, 1_510 * MS, started_ns=0) == 10 * MS
    # behind what the leader had: no better than the window
    assert board.staleness_ns("S", 4, 1_510 * MS, started_ns=0) >= WINDOW_NS
    board.receive(_beacon(3, 2_000, Position("S", 7)))
    # at 5, the follower has what the leader had at its last beacon before it moved on
    assert board.staleness_ns("S", 5, 2_010 * MS, started_ns=0) == 510 * MS
    assert board.staleness_ns("S", 7, 2_010 * MS, started_ns=0) == 10 * MS
    # the leader goes silent (cut off): staleness grows with nothing received
    assert board.staleness_ns("S", 7, 4_000 * MS, started_ns=0) == 2_000 * MS
    # never heard of: as stale as the window, counted from the replica's start
    assert board.staleness_ns("T", 0, 1_000 * MS, started_ns=900 * MS) == 100 * MS + WINDOW_NS


def test_a_missed_beacon_ends_the_senders_claims_until_a_full_one() -> None:
    board = PositionBoard("n2")
    board.receive(_beacon(1, 1_000, Position("S", 5), Position("T", 1), full=True))
    board.receive(_beacon(2, 1_500))
    # beacon 3 (S moved to 7) is lost: 5 is known to be the leader's only as of beacon 2
    assert board.receive(_beacon(4, 2_500, Position("T", 2)))
    assert board.staleness_ns("S", 5, 2_510 * MS, started_ns=0) == 1_010 * MS
    # what the beacon after the gap says is a claim again
    assert board.receive(_beacon(5, 3_000))
    assert board.staleness_ns("T", 2, 3_010 * MS, started_ns=0) == 10 * MS
    assert board.staleness_ns("S", 5, 3_010 * MS, started_ns=0) == 1_510 * MS
    # the full beacon asked for makes every stream of the sender current again
    assert not board.receive(_beacon(6, 3_500, Position("S", 7), Position("T", 2), full=True))
    assert board.staleness_ns("S", 7, 3_510 * MS, started_ns=0) == 10 * MS
    # a repeated or late beacon changes nothing
    assert not board.receive(_beacon(5, 3_600, Position("S", 1)))
    assert board.staleness_ns("S", 7, 3_610 * MS, started_ns=0) == 110 * MS


def test_a_restarted_sender_and_a_new_leader() -> None:
    board = PositionBoard("n3")
    board.receive(_beacon(1, 1_000, Position("S", 5), full=True))
    # n1 restarted (a new epoch): what it claimed held as of its last beacon before
    board.receive(Beacon("n1", 2, 1, 2_000 * MS, True, ()))
    assert board.staleness_ns("S", 5, 2_010 * MS, started_ns=0) == 1_010 * MS
    # n2 now leads S: its claims make the follower fresh again
    board.receive(_beacon(1, 2_100, Position("S", 6), full=True, sender="n2"))
    board.receive(_beacon(2, 2_600, sender="n2"))
    assert board.staleness_ns("S", 6, 2_610 * MS, started_ns=0) == 10 * MS
    assert board.staleness_ns("S", 5, 2_610 * MS, started_ns=0) == 1_610 * MS
    # n2 stops leading it: its claim holds as of its last beacon, no later
    board.receive(_beacon(3, 3_100, Position("S", NOT_LED), sender="n2"))
    assert board.staleness_ns("S", 6, 3_110 * MS, started_ns=0) == 510 * MS
    # this node's own beacons are not positions it learns
    assert not board.receive(_beacon(1, 3_200, Position("S", 9), full=True, sender="n3"))
    assert board.staleness_ns("S", 6, 3_210 * MS, started_ns=0) == 610 * MS


def test_a_copy_s_followers_inherit_its_freshness() -> None:
    board = PositionBoard("n2")
    board.receive(_beacon(1, 1_000, Position("M", 9, 700 * MS), full=True))
    assert board.staleness_ns("M", 9, 1_010 * MS, started_ns=0) == 310 * MS
    board.receive(_beacon(2, 1_500, Position("M", 9, 1_450 * MS)))
    assert board.staleness_ns("M", 9, 1_510 * MS, started_ns=0) == 60 * MS


def test_streams_nobody_here_follows_are_forgotten_once_unclaimed_and_old() -> None:
    board = PositionBoard("n2")
    board.watch("KEPT")
    board.receive(_beacon(1, 1_000, Position("GONE", 5), Position("KEPT", 5), Position("LED", 1), full=True))
    board.receive(_beacon(2, 1_500, Position("GONE", NOT_LED), Position("KEPT", NOT_LED)))
    board.sweep(1_600 * MS)
    assert board.known_streams() == 3
    board.sweep(1_600 * MS + WINDOW_NS)
    assert board.known_streams() == 2  # LED is still claimed, KEPT has a replica here
    # the leader had 5 as of its beacon before the one saying it stopped leading
    assert board.staleness_ns("KEPT", 5, 1_600 * MS + WINDOW_NS, started_ns=0) == 600 * MS + WINDOW_NS


def test_the_same_staleness_as_one_beacon_per_stream_every_interval() -> None:
    """A leader whose stream moves at random, seen by the old per-stream tracker (a beacon of it every
    interval) and by a board (one node beacon every interval, with the stream only when it moved): a
    follower at any sequence reads the same staleness from both, whenever it asks."""
    rng = random.Random(21)
    for _ in range(20):
        tracker, board, sender = StalenessTracker(started_ns=0), PositionBoard("n2"), PositionSender("n1", 1)
        seq = rng.randrange(0, 5)
        leader_seq = [seq]
        sender.lead("S", LedStream(last_seq=lambda leader_seq=leader_seq: leader_seq[0]))
        for tick in range(1, 60):
            now = tick * 500 * MS
            if rng.random() < 0.4:
                seq += rng.randrange(1, 4)
                leader_seq[0] = seq
                sender.moved("S")
            beacon = sender.next_beacon(now)
            tracker.observe(seq, now)
            delivered = now + rng.randrange(0, 5) * MS
            board.receive(decode_beacon(encode_beacon(beacon)) or beacon)
            for applied in range(max(seq - 8, 0), seq + 1):
                asked = delivered + rng.randrange(0, 400) * MS
                old = tracker.staleness_ns(applied, asked)
                new = board.staleness_ns("S", applied, asked, started_ns=0)
                assert (new >= WINDOW_NS) if old >= WINDOW_NS else new == old, (tick, applied, old, new)
