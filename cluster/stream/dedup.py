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

The rebuild is lazy, as nats-server's (`rebuildDedupe` runs when the stream
first needs the table, not while it recovers): reading every message of the
window (2 minutes of a busy stream can be hundreds of thousands) made a
restart wait seconds before the stream answered anything. `rebuild_later`
marks the table stale; the first question asked of it (a publish or an
applied entry that carries a msg id, or a comparison) reads the store then.
Changes while it is stale are not tracked: the store holds them, and since
the table is a function of the store at any point of the log, reading it
later gives what tracking them would have.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

# (msg id, sequence, timestamp) of each stored message inside the window, oldest first
WindowItems = Iterable[tuple[str, int, int]]


class DedupWindow:
    """Message ids of stored messages, oldest first; a window of 0 disables deduplication."""

    __slots__ = ("_ids", "_load", "_seqs", "window_ns")

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self._ids: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._seqs: dict[int, str] = {}
        # set while stale: reads the window's messages from the store
        self._load: Callable[[], WindowItems] | None = None

    @property
    def stale(self) -> bool:
        return self._load is not None

    def rebuild_later(self, window_ns: int, load: Callable[[], WindowItems]) -> None:
        """Empty the table and fill it from `load()` when it is first asked something."""
        self.reset(window_ns)
        if window_ns > 0:
            self._load = load

    def _ensure_built(self) -> None:
        load = self._load
        if load is not None:
            self._load = None
            try:
                for msg_id, seq, stamped_ns in load():
                    self.record(msg_id, seq, stamped_ns)
            except BaseException:
                self.rebuild_later(self.window_ns, load)  # a half-read window must not answer
                raise

    def __len__(self) -> int:
        self._ensure_built()
        return len(self._ids)

    def lookup(self, msg_id: str, now_ns: int) -> int | None:
        """The sequence stored under `msg_id` if it is still inside the window at `now_ns`."""
        self._ensure_built()
        found = self._ids.get(msg_id)
        if found is None:
            return None
        seq, stamped_ns = found
        if now_ns - stamped_ns >= self.window_ns:
            return None
        return seq

    def record(self, msg_id: str, seq: int, stamped_ns: int) -> None:
        if self.window_ns <= 0 or not msg_id or self._load is not None:
            return
        previous = self._ids.pop(msg_id, None)
        if previous is not None:
            self._seqs.pop(previous[0], None)
        self._ids[msg_id] = (seq, stamped_ns)
        self._seqs[seq] = msg_id

    def forget_seqs(self, seqs: Iterable[int]) -> None:
        """Messages left the stream (limits, rollup, delete, expiry): their ids no longer dedup."""
        if self._load is not None:
            return
        for seq in seqs:
            msg_id = self._seqs.pop(seq, None)
            if msg_id is not None:
                del self._ids[msg_id]

    def seqs(self) -> list[int]:
        self._ensure_built()
        return list(self._seqs)

    def expire(self, now_ns: int) -> None:
        """Forget ids older than the window at `now_ns` (an applied entry's timestamp)."""
        if self._load is not None:
            return
        ids = self._ids
        while ids:
            _, (seq, stamped_ns) = next(iter(ids.items()))
            if now_ns - stamped_ns < self.window_ns:
                break
            ids.popitem(last=False)
            self._seqs.pop(seq, None)

    def reset(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self._load = None
        self._ids.clear()
        self._seqs.clear()

    def items(self) -> list[tuple[str, int, int]]:
        """(msg id, seq, timestamp) oldest first, for comparing replicas."""
        self._ensure_built()
        return [(msg_id, seq, ts) for msg_id, (seq, ts) in self._ids.items()]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DedupWindow) and (self.window_ns, self.items()) == (
            other.window_ns,
            other.items(),
        )

    __hash__ = None  # type: ignore[assignment]
