"""Node liveness: which peers this node has heard from lately, shared by every Raft group of the node.

Any frame from a peer (the keepalive an idle link sends every few ticks, or Raft traffic) is a sign of
life. A peer goes down after `timeout` seconds of silence; it comes back up with its next frame, and a
frame with a new incarnation is a restart, which counts as down-and-up even if too quick to be seen.
Silence is counted only while this node itself was running: after a stall of its own (its event loop
held up on an overloaded machine, a long pause), the peers' frames of that time are still waiting to be
read, and declaring every peer down at once would wake every quiesced group of the node together.
The host tells its cores (`RaftCore.peer_down`, `peer_up`): that is what wakes a quiesced group, whose
leader sends no heartbeats of its own. Sans-IO: the caller passes the time.
"""

from __future__ import annotations

from dataclasses import dataclass

from raft.types import NodeId

# a gap between two checks longer than this share of the timeout is this node's own stall
STALL_FRACTION = 0.5


@dataclass(slots=True)
class _Peer:
    last_heard: float
    incarnation: int
    up: bool = True


class NodeLiveness:
    def __init__(self, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError("the liveness timeout must be positive")
        self.timeout = timeout
        self._peers: dict[NodeId, _Peer] = {}
        # when `expired` last ran: a longer gap than STALL_FRACTION of the timeout is a stall of ours
        self._last_check: float | None = None

    def heard(self, peer: NodeId, incarnation: int, now: float) -> bool:
        """A frame from `peer`; True if that is news for the groups: it was down, or it restarted. The
        first frame ever is not: nothing here waited on a peer it never heard from."""
        known = self._peers.get(peer)
        if known is None:
            self._peers[peer] = _Peer(now, incarnation)
            return False
        known.last_heard = now
        news = not known.up or known.incarnation != incarnation
        known.up = True
        known.incarnation = incarnation
        return news

    def expired(self, now: float) -> list[NodeId]:
        """Peers silent for longer than the timeout since the last call; each is reported once. The
        caller checks often (every tick); a longer gap since its last check is this node's own stall,
        which does not count as the peers' silence."""
        last_check, self._last_check = self._last_check, now
        if last_check is not None and now - last_check > self.timeout * STALL_FRACTION:
            stalled = now - last_check
            for known in self._peers.values():
                known.last_heard += stalled
        gone = []
        for peer, known in self._peers.items():
            if known.up and now - known.last_heard > self.timeout:
                known.up = False
                gone.append(peer)
        return gone

    def down(self) -> list[NodeId]:
        return [peer for peer, known in self._peers.items() if not known.up]

    def is_up(self, peer: NodeId) -> bool:
        known = self._peers.get(peer)
        return known is not None and known.up
