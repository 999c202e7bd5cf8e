"""Node liveness: which peers this node has heard from lately, shared by every Raft group of the node.

Any frame from a peer (the keepalive an idle link sends every few ticks, or Raft traffic) is a sign of
life. A peer goes down after `timeout` seconds of silence; it comes back up with its next frame, and a
frame with a new incarnation is a restart, which counts as down-and-up even if too quick to be seen.
The host tells its cores (`RaftCore.peer_down`, `peer_up`): that is what wakes a quiesced group, whose
leader sends no heartbeats of its own. Sans-IO: the caller passes the time.
"""

from __future__ import annotations

from dataclasses import dataclass

from raft.types import NodeId


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
        """Peers silent for longer than the timeout since the last call; each is reported once."""
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
