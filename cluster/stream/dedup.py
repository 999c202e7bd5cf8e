"""The `Nats-Msg-Id` duplicate window, as replicated stream state.

The window holds, for each message still in the stream and stored within
`duplicate_window` of the stream's clock, its msg id and sequence. It is
a function of the store's contents, not a log of ids ever seen: an id whose
message was purged, deleted or trimmed by limits is forgotten (nats-server
keeps it until the window passes). That is what lets every replica hold the
same window without writing it on each apply: a replica that restarts, or
restores a snapshot, rebuilds it by reading its store, and ends up exactly
where the replicas that kept it in memory are. Time is the leader-chosen
timestamp of applied entries, so expiry agrees everywhere too.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable


class DedupWindow:
    """Message ids of stored messages, oldest first; a window of 0 disables deduplication."""

    __slots__ = ("_ids", "_seqs", "window_ns")

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self._ids: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._seqs: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def lookup(self, msg_id: str, now_ns: int) -> int | None:
        """The sequence stored under `msg_id` if it is still inside the window at `now_ns`."""
        found = self._ids.get(msg_id)
        if found is None:
            return None
        seq, stamped_ns = found
        if now_ns - stamped_ns >= self.window_ns:
            return None
        return seq

    def record(self, msg_id: str, seq: int, stamped_ns: int) -> None:
        if self.window_ns <= 0 or not msg_id:
            return
        previous = self._ids.pop(msg_id, None)
        if previous is not None:
            self._seqs.pop(previous[0], None)
        self._ids[msg_id] = (seq, stamped_ns)
        self._seqs[seq] = msg_id

    def forget_seqs(self, seqs: Iterable[int]) -> None:
        """Messages left the stream (limits, rollup, delete, expiry): their ids no longer dedup."""
        for seq in seqs:
            msg_id = self._seqs.pop(seq, None)
            if msg_id is not None:
                del self._ids[msg_id]

    def seqs(self) -> list[int]:
        return list(self._seqs)

    def expire(self, now_ns: int) -> None:
        """Forget ids older than the window at `now_ns` (an applied entry's timestamp)."""
        ids = self._ids
        while ids:
            _, (seq, stamped_ns) = next(iter(ids.items()))
            if now_ns - stamped_ns < self.window_ns:
                break
            ids.popitem(last=False)
            self._seqs.pop(seq, None)

    def reset(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self._ids.clear()
        self._seqs.clear()

    def items(self) -> list[tuple[str, int, int]]:
        """(msg id, seq, timestamp) oldest first, for comparing replicas."""
        return [(msg_id, seq, ts) for msg_id, (seq, ts) in self._ids.items()]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DedupWindow) and (self.window_ns, self.items()) == (
            other.window_ns,
            other.items(),
        )

    __hash__ = None  # type: ignore[assignment]
