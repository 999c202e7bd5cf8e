"""Node liveness as a host reports it to its cores (`RaftCore.peer_down`, `peer_up`), simulated.

Each node watches every other: a peer is up for an observer while the peer runs and its messages reach
the observer. The observer learns a change only after a delay (the host's liveness timeout), and a
restart is a change too (a new incarnation), even if too quick to be seen as down. Blips, a peer seen
down for a moment though it runs (a loaded node, a slow link), test that a false alarm costs at most
an election.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _View:
    up: bool
    incarnation: int
    differs_for: int = 0  # ticks the truth has differed from this view


class SimLiveness:
    def __init__(self, rng: random.Random, delay: int, p_blip: float) -> None:
        self._rng = rng
        self.delay = delay
        self.p_blip = p_blip
        self._views: dict[tuple[str, str], _View] = {}

    def forget(self, observer: str) -> None:
        """`observer` restarted: its host starts knowing nothing, and sees every peer as it is now."""
        for key in [key for key in self._views if key[0] == observer]:
            del self._views[key]

    def step(
        self,
        observers: list[str],
        peers: list[str],
        truth: Callable[[str, str], tuple[bool, int]],
        report: Callable[[str, str, bool], None],
    ) -> int:
        """One tick: compare each view with `truth(observer, peer)` (up, incarnation) and `report`
        (observer, peer, up) the changes that lasted `delay` ticks; returns how many were reported."""
        reported = 0
        for observer in observers:
            for peer in peers:
                if peer == observer:
                    continue
                up, incarnation = truth(observer, peer)
                view = self._views.get((observer, peer))
                if view is None:
                    # a host starting (or meeting a new peer) tells its cores of a peer it cannot reach
                    self._views[(observer, peer)] = _View(up, incarnation)
                    if not up:
                        report(observer, peer, False)
                        reported += 1
                    continue
                if view.up and self.p_blip and self._rng.random() < self.p_blip:
                    view.up = False  # a false alarm; the truth brings it back after the delay
                    report(observer, peer, False)
                    reported += 1
                    continue
                if view.up == up and (view.incarnation == incarnation or not up):
                    view.differs_for = 0
                    continue
                view.differs_for += 1
                if view.differs_for < self.delay:
                    continue
                view.differs_for = 0
                view.up = up
                view.incarnation = incarnation
                report(observer, peer, up)
                reported += 1
        return reported
