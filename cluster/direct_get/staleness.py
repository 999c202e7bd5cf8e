"""How stale a replica's copy of a stream may be, from the leader's position beacons.

The leader of a stream with more than one replica publishes its last applied
sequence and its wall clock on `$JSR.POS.<stream>` (every 50 ms when a
staleness bound is set, every 500 ms otherwise). A replica that has applied everything the leader had at time T
is at most `now - T` behind; it keeps the recent beacons and takes the
newest one it has caught up with. Beacons travel the same link as the Raft
appends, so injected latency on a follower's link shows up here as
staleness, which is exactly what a client reading from it would see. (Clocks
are assumed synchronized, as on one machine or with NTP.)

With no beacon it has caught up with, or none at all within the window,
the replica counts as at least as stale as the window: the safe side.
"""

from __future__ import annotations

import struct
from collections import deque

POSITION_PREFIX = "$JSR.POS."
BEACON = struct.Struct(">QQ")
FAST_INTERVAL = 0.05
SLOW_INTERVAL = 0.5
WINDOW_NS = 10_000_000_000


def position_subject(stream: str) -> str:
    return POSITION_PREFIX + stream


def encode_beacon(last_seq: int, sent_ns: int) -> bytes:
    return BEACON.pack(last_seq, sent_ns)


def decode_beacon(payload: bytes) -> tuple[int, int] | None:
    if len(payload) != BEACON.size:
        return None
    last_seq, sent_ns = BEACON.unpack(payload)
    return last_seq, sent_ns


class StalenessTracker:
    def __init__(self, started_ns: int) -> None:
        self._beacons: deque[tuple[int, int]] = deque()  # (sent_ns, leader last_seq), oldest first
        self._started_ns = started_ns

    def observe(self, last_seq: int, sent_ns: int) -> None:
        if self._beacons and sent_ns <= self._beacons[-1][0]:
            return  # late or duplicate beacon
        self._beacons.append((sent_ns, last_seq))

    def staleness_ns(self, applied_seq: int, now_ns: int) -> int:
        """An upper bound on how far behind the leader this replica's data is."""
        while len(self._beacons) > 1 and self._beacons[0][0] < now_ns - WINDOW_NS:
            self._beacons.popleft()
        for sent_ns, leader_seq in reversed(self._beacons):
            if leader_seq <= applied_seq:
                return max(now_ns - sent_ns, 0)
        oldest = self._beacons[0][0] if self._beacons else self._started_ns
        return max(now_ns - oldest, 0) + WINDOW_NS
