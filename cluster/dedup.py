"""The `Nats-Msg-Id` duplicate window, as replicated stream state.

Every replica records ids when it applies a stored message, using the
leader-chosen timestamp carried by the entry, and forgets them by the same
timestamps, so all replicas hold the same window and a new leader dedups
exactly as the old one did. The window travels in stream snapshots.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class DedupWindow:
    """Message ids seen within `window_ns`, oldest first; 0 disables deduplication."""

    __slots__ = ("_ids", "window_ns")

    def __init__(self, window_ns: int) -> None:
        self.window_ns = window_ns
        self._ids: OrderedDict[str, tuple[int, int]] = OrderedDict()

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
        self._ids.pop(msg_id, None)
        self._ids[msg_id] = (seq, stamped_ns)

    def expire(self, now_ns: int) -> None:
        """Forget ids older than the window at `now_ns` (an applied entry's timestamp)."""
        ids = self._ids
        while ids:
            _, (_, stamped_ns) = next(iter(ids.items()))
            if now_ns - stamped_ns < self.window_ns:
                break
            ids.popitem(last=False)

    def resize(self, window_ns: int) -> None:
        """A config update changed `duplicate_window`; 0 drops everything."""
        self.window_ns = window_ns
        if window_ns <= 0:
            self._ids.clear()

    def to_json(self) -> dict[str, Any]:
        return {"window": self.window_ns, "ids": [[k, seq, ts] for k, (seq, ts) in self._ids.items()]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DedupWindow:
        window = cls(int(data.get("window", 0)))
        for msg_id, seq, stamped_ns in data.get("ids", []):
            window._ids[str(msg_id)] = (int(seq), int(stamped_ns))
        return window

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DedupWindow) and (self.window_ns, list(self._ids.items())) == (
            other.window_ns,
            list(other._ids.items()),
        )

    __hash__ = None  # type: ignore[assignment]
