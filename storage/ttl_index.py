"""Per-message TTLs (ADR-43) of a store's live messages: which never age out, and when the others expire.

Both stores keep one. It holds only messages that carry a valid `Nats-TTL`
header (storage/msg_ttl.py), so a stream without them pays nothing:

- `never`: messages with `Nats-TTL: never`, which max_age skips;
- `deadlines`: sequence -> expiry time of each message with a positive TTL,
  kept whatever the config says (a stream may turn `allow_msg_ttl` on later);
- while `active` (the stream allows per-message TTLs), a min-heap of
  (deadline, sequence) answering "when is the next expiry" and "what is due".
  Removing a message leaves its heap entry behind; entries are checked
  against `deadlines` when read, dropped when they reach the top, and the
  heap is rebuilt once stale entries outnumber live ones.

It also keeps the age cursor: every live sequence below it is a `never`
message, so finding the first message max_age can remove does not walk over
the same never-expiring messages again each time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from storage.msg_ttl import TTL_NEVER, ttl_deadline_ns


class TtlIndex:
    __slots__ = ("_age_from", "_heap", "active", "deadlines", "never")

    def __init__(self, active: bool = False) -> None:
        self.active = active
        self.never: set[int] = set()
        self.deadlines: dict[int, int] = {}
        self._heap: list[tuple[int, int]] = []
        self._age_from = 0

    def __bool__(self) -> bool:
        return bool(self.never or self.deadlines)

    def __contains__(self, seq: int) -> bool:
        return seq in self.deadlines or seq in self.never

    def add(self, seq: int, ts_ns: int, ttl_s: int) -> None:
        """A stored message with TTL `ttl_s` (`TTL_NEVER` or positive seconds; 0 is ignored)."""
        if ttl_s == TTL_NEVER:
            self.never.add(seq)
        elif ttl_s > 0:
            self.add_deadline(seq, ttl_deadline_ns(ts_ns, ttl_s))

    def add_deadline(self, seq: int, deadline_ns: int) -> None:
        self.deadlines[seq] = deadline_ns
        if self.active:
            heapq.heappush(self._heap, (deadline_ns, seq))

    def discard(self, seq: int) -> None:
        self.never.discard(seq)
        if self.deadlines.pop(seq, None) is not None and len(self._heap) > 2 * len(self.deadlines) + 64:
            self._rebuild_heap()

    def clear(self) -> None:
        self.never.clear()
        self.deadlines.clear()
        self._heap = []
        self._age_from = 0

    def reset_age_cursor(self) -> None:
        """Sequences may be reused (a truncate): forget what the cursor knew."""
        self._age_from = 0

    def set_active(self, active: bool) -> None:
        if active != self.active:
            self.active = active
            self._rebuild_heap()

    def _rebuild_heap(self) -> None:
        self._heap = [(deadline, seq) for seq, deadline in self.deadlines.items()] if self.active else []
        heapq.heapify(self._heap)

    def next_deadline(self) -> int | None:
        """The earliest deadline while active, else None."""
        heap = self._heap
        while heap:
            deadline, seq = heap[0]
            if self.deadlines.get(seq) == deadline:
                return deadline
            heapq.heappop(heap)
        return None

    def due(self, now_ns: int) -> list[int]:
        """Sequences whose deadline is at or before `now_ns` (while active), unordered.

        The heap entries at or before `now_ns` form a subtree at the root, so
        this visits only them (and their stale neighbours), not the whole heap.
        """
        heap = self._heap
        found: list[int] = []
        pending = [0] if heap and heap[0][0] <= now_ns else []
        while pending:
            i = pending.pop()
            deadline, seq = heap[i]
            if self.deadlines.get(seq) == deadline:
                found.append(seq)
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(heap) and heap[child][0] <= now_ns:
                    pending.append(child)
        return found

    def first_aging(self, first_live: int | None, next_live: Callable[[int], int | None]) -> int | None:
        """The first live sequence that is not a `never` message; `next_live(s)`: first live >= s."""
        if first_live is None or not self.never:
            return first_live
        seq = first_live if first_live >= self._age_from else next_live(self._age_from)
        passed = self._age_from
        while seq is not None and seq in self.never:
            passed = seq + 1
            seq = next_live(passed)
        self._age_from = seq if seq is not None else max(passed, self._age_from)
        return seq
