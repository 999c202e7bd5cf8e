"""Whether this node can serve its clients, for `/healthz` (sans-IO: the caller observes, this judges).

A node can be in its Raft groups, caught up, and still unable to serve: the
peer leading a stream it holds may not be reachable over the route mesh (no
publish or MSG.GET from this node's clients gets there), or most of its
routes may be down. Such problems are reported unhealthy once they have lasted
`grace` seconds without a break, so the moments every healthy cluster goes
through (an election, a route redialling after a peer's restart) do not make
healthy nodes flap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Longer than an election (1-2 s) plus a route's redial backoff (up to 2 s).
DEFAULT_GRACE = 5.0


@dataclass(frozen=True)
class StreamView:
    """What this node knows of one stream it holds a replica of."""

    name: str
    leader: str | None
    is_leader: bool


def observe(
    me: str,
    peers: Iterable[str],
    reachable: Mapping[str, bool],
    streams: Iterable[StreamView],
) -> list[str]:
    """This moment's problems, each a sentence; `reachable[peer]`: routes both ways are up."""
    problems = []
    peer_list = sorted(peers)
    members = 1 + len(peer_list)
    up = 1 + sum(1 for peer in peer_list if reachable.get(peer, False))
    if up <= members // 2:
        down = [peer for peer in peer_list if not reachable.get(peer, False)]
        problems.append(f"routes down to a majority of the cluster: {', '.join(down)}")
    for stream in streams:
        if stream.is_leader:
            continue
        if stream.leader is None:
            problems.append(f"stream {stream.name}: no leader")
        elif stream.leader != me and not reachable.get(stream.leader, False):
            problems.append(
                f"stream {stream.name}: its leader {stream.leader} is not reachable over the routes"
            )
    return problems


class HealthJudge:
    """Remembers since when each problem has been seen without a break; reports those older than `grace`."""

    def __init__(self, grace: float = DEFAULT_GRACE) -> None:
        self.grace = grace
        self._since: dict[str, float] = {}

    def judge(self, problems: Iterable[str], now: float) -> list[str]:
        seen = list(dict.fromkeys(problems))
        self._since = {problem: self._since.get(problem, now) for problem in seen}
        return [problem for problem in seen if now - self._since[problem] >= self.grace]
