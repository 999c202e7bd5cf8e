"""How stale a copy of a stream may be, from where its source said it was, and when.

A copy that has applied everything its source had at time T is at most
`now - T` behind; it keeps the recent positions and takes the newest one it
has caught up with. A follower learns its leader's positions from the nodes'
beacons (positions.py: one per node every 500 ms, every 50 ms when a
staleness bound is set); a mirror's leader learns its origin's from the
fetch answers (cluster/stream/fetch.py), with `StalenessTracker`. (Clocks
are assumed synchronized, as on one machine or with NTP.)

With no position it has caught up with, or none at all within the window,
the copy counts as at least as stale as the window: the safe side.
"""

from __future__ import annotations

from collections import deque

FAST_INTERVAL = 0.05
SLOW_INTERVAL = 0.5
WINDOW_NS = 10_000_000_000


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
