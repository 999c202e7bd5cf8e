"""The simulated network: a heap of (deliver_tick, seq, message) with seeded faults.

Delay, loss and duplication are drawn per message from the simulation's one
random generator; a random delay per message is what reorders them. Links
are directed, so a partition can be one-way. A blocked link drops a message
when it is due for delivery, as a cut cable would.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable
from dataclasses import dataclass

from raft.types import Message


@dataclass(slots=True)
class NetworkFaults:
    drop: float = 0.0
    duplicate: float = 0.0
    min_delay: int = 1
    max_delay: int = 3


class SimNetwork:
    def __init__(self, rng: random.Random, faults: NetworkFaults) -> None:
        self._rng = rng
        self.faults = faults
        self._queue: list[tuple[int, int, Message]] = []
        self._seq = 0
        self._blocked: set[tuple[str, str]] = set()
        self.sent = 0
        self.dropped = 0
        self.duplicated = 0

    def __len__(self) -> int:
        return len(self._queue)

    def send(self, now: int, msg: Message) -> bool:
        """Queue `msg`; False if the network lost it at once."""
        self.sent += 1
        faults = self.faults
        if faults.drop and self._rng.random() < faults.drop:
            self.dropped += 1
            return False
        copies = 2 if faults.duplicate and self._rng.random() < faults.duplicate else 1
        self.duplicated += copies - 1
        for _ in range(copies):
            delay = self._rng.randint(faults.min_delay, faults.max_delay)
            self._seq += 1
            heapq.heappush(self._queue, (now + delay, self._seq, msg))
        return True

    def due(self, now: int) -> list[tuple[Message, bool]]:
        """Messages whose delivery tick has come, each with whether its link is cut (then it is lost)."""
        out: list[tuple[Message, bool]] = []
        queue = self._queue
        while queue and queue[0][0] <= now:
            msg = heapq.heappop(queue)[2]
            blocked = (msg.from_, msg.to) in self._blocked
            self.dropped += blocked
            out.append((msg, blocked))
        return out

    def is_blocked(self, from_: str, to: str) -> bool:
        return (from_, to) in self._blocked

    @property
    def partitioned(self) -> bool:
        return bool(self._blocked)

    def partition(self, groups: Iterable[Iterable[str]], one_way: bool = False) -> None:
        """Cut every link between different groups (only from earlier to later groups if one_way)."""
        group_list = [sorted(g) for g in groups]
        for i, left in enumerate(group_list):
            for j, right in enumerate(group_list):
                if i == j or (one_way and j < i):
                    continue
                for a in left:
                    for b in right:
                        self._blocked.add((a, b))

    def heal(self) -> None:
        self._blocked.clear()
