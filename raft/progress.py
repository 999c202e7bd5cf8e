"""The leader's view of one follower's log, and its replication flow control.

PROBE: we do not know where the follower's log matches ours; send one append
at a time and wait for the answer. REPLICATE: appends are pipelined, bounded
by `Inflights`. SNAPSHOT: a snapshot is on its way; send nothing else.
"""

from __future__ import annotations

import enum
from collections import deque


class ProgressState(enum.Enum):
    PROBE = "probe"
    REPLICATE = "replicate"
    SNAPSHOT = "snapshot"


class Inflights:
    """Last indexes of the appends sent but not yet acknowledged, oldest first."""

    __slots__ = ("_capacity", "_queue")

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._queue: deque[int] = deque()

    def add(self, last_index: int) -> None:
        self._queue.append(last_index)

    def free_le(self, index: int) -> None:
        queue = self._queue
        while queue and queue[0] <= index:
            queue.popleft()

    def free_first_one(self) -> None:
        if self._queue:
            self._queue.popleft()

    def full(self) -> bool:
        return len(self._queue) >= self._capacity

    def reset(self) -> None:
        self._queue.clear()

    def __len__(self) -> int:
        return len(self._queue)


class Progress:
    __slots__ = (
        "commit_sent",
        "inflights",
        "is_learner",
        "match",
        "next",
        "pending_snapshot",
        "probe_sent",
        "recent_active",
        "state",
    )

    def __init__(self, next_index: int, max_inflight: int, is_learner: bool = False) -> None:
        self.match = 0
        # The highest commit index sent to this follower in a COMMIT notice.
        self.commit_sent = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.recent_active = False
        self.is_learner = is_learner
        self.inflights = Inflights(max_inflight)

    def __repr__(self) -> str:
        return (
            f"Progress({self.state.value} match={self.match} next={self.next} inflight={len(self.inflights)})"
        )

    def _reset_state(self, state: ProgressState) -> None:
        self.state = state
        self.probe_sent = False
        self.pending_snapshot = 0
        self.inflights.reset()

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            pending = self.pending_snapshot
            self._reset_state(ProgressState.PROBE)
            self.next = max(self.match + 1, pending + 1)
        else:
            self._reset_state(ProgressState.PROBE)
            self.next = self.match + 1

    def become_replicate(self) -> None:
        self._reset_state(ProgressState.REPLICATE)
        self.next = self.match + 1

    def become_snapshot(self, snapshot_index: int) -> None:
        self._reset_state(ProgressState.SNAPSHOT)
        self.pending_snapshot = snapshot_index

    def maybe_update(self, index: int) -> bool:
        """The follower acknowledged `index`; False if that is old news."""
        updated = False
        if self.match < index:
            self.match = index
            updated = True
            self.probe_sent = False
        self.next = max(self.next, index + 1)
        return updated

    def lost_entries(self, last_index: int) -> None:
        """The follower lost what it had acknowledged beyond `last_index`: probe it again from there."""
        self.match = min(self.match, last_index)
        self._reset_state(ProgressState.PROBE)
        self.next = last_index + 1

    def maybe_decrease_to(self, rejected: int, match_hint: int) -> bool:
        """The follower rejected an append at `rejected`; False if the rejection is stale."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, match_hint + 1), self.match + 1)
        self.probe_sent = False
        return True

    def is_paused(self) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.REPLICATE:
            return self.inflights.full()
        return True

    def sent_append(self, entry_count: int, last_index: int) -> None:
        if self.state is ProgressState.REPLICATE:
            if entry_count:
                self.next = last_index + 1
                self.inflights.add(last_index)
        elif self.state is ProgressState.PROBE:
            self.probe_sent = True
