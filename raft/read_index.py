"""ReadIndex bookkeeping on the leader (Raft thesis §6.4).

A read request records the commit index when it arrives; it may be answered
once a quorum has acknowledged a heartbeat sent after it arrived, which
proves no newer leader had been elected at that moment. An acknowledgement
of a later request's heartbeat also confirms every earlier request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from raft.types import NodeId


@dataclass(slots=True)
class PendingRead:
    index: int
    ctx: bytes
    requester: NodeId
    acks: set[NodeId] = field(default_factory=set)


class ReadIndexQueue:
    def __init__(self) -> None:
        self._pending: dict[bytes, PendingRead] = {}  # insertion order is arrival order

    def add(self, index: int, ctx: bytes, requester: NodeId) -> bool:
        """Queue a request; False if a request with the same ctx is already pending."""
        if ctx in self._pending:
            return False
        self._pending[ctx] = PendingRead(index, ctx, requester)
        return True

    def ack(self, ctx: bytes, from_: NodeId) -> set[NodeId] | None:
        """Record `from_`'s acknowledgement of the heartbeat for `ctx`; the ackers so far."""
        pending = self._pending.get(ctx)
        if pending is None:
            return None
        pending.acks.add(from_)
        return pending.acks

    def release_through(self, ctx: bytes) -> list[PendingRead]:
        """Remove and return every request up to and including `ctx`, oldest first."""
        if ctx not in self._pending:
            return []
        released: list[PendingRead] = []
        for key in list(self._pending):
            released.append(self._pending.pop(key))
            if key == ctx:
                break
        return released

    def newest_confirmed(self, is_quorum: Callable[[set[NodeId]], bool]) -> bytes | None:
        """The ctx of the newest request whose acknowledgements `is_quorum` accepts (it confirms every
        earlier request too), or None."""
        for pending in reversed(self._pending.values()):
            if is_quorum(pending.acks):
                return pending.ctx
        return None

    def last_ctx(self) -> bytes:
        """The newest pending request's ctx (b"" if none), carried by heartbeats."""
        return next(reversed(self._pending), b"")

    def clear(self) -> None:
        self._pending.clear()

    def __len__(self) -> int:
        return len(self._pending)
