"""Membership change under load: STREAM.PEER.REMOVE, asked of whichever node answers first."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from chaos.run.clients import PinnedClient, outcome_of
from cluster.runtime.workers import node_of


async def remove_peer(clients: list[PinnedClient], stream: str, peer: str, timeout: float = 5.0) -> str:
    """Ask the meta leader to replace `peer` among the stream's replicas; its answer (or the last error)."""
    request = json.dumps({"peer": peer}).encode()
    last_error = "no client"
    for client in clients:
        try:
            reply = await client.nc.request(f"$JS.API.STREAM.PEER.REMOVE.{stream}", request, timeout=timeout)
        except Exception as exc:  # that node cannot reach the meta leader now; ask the next
            last_error = outcome_of(exc)[1]
            continue
        return f"peer-remove {peer}: {reply.data.decode(errors='replace')}"
    return f"peer-remove {peer}: {last_error}"


@dataclass(slots=True)
class Placement:
    """Where a stream lives, as STREAM.INFO names its peers: cluster members, each a node or one worker
    of a several-worker node (`n2/w1`). Faults hit nodes (processes, links), so the schedule is given
    nodes; a peer removal names the member."""

    leader: str | None = None
    members: list[str] = field(default_factory=list)  # the leader first

    @property
    def leader_node(self) -> str | None:
        return node_of(self.leader) if self.leader else None

    @property
    def nodes(self) -> list[str]:
        return [node_of(member) for member in self.members]

    def member_on(self, node: str) -> str:
        """The stream's peer on `node` (no two share a node), or `node` itself when it holds none."""
        return next((member for member in self.members if node_of(member) == node), node)


async def stream_placement(clients: list[PinnedClient], stream: str) -> Placement:
    """The stream's leader and its replicas (leader first), as the first node that answers STREAM.INFO says."""
    for client in clients:
        try:
            info = await client.js.stream_info(stream)
        except Exception:  # that node cannot say now; ask the next
            continue
        cluster = info.cluster
        if cluster is None:
            continue
        replicas = [peer.name for peer in (cluster.replicas or []) if peer.name]
        leader = cluster.leader or None
        return Placement(leader, ([leader] if leader else []) + replicas)
    return Placement()
