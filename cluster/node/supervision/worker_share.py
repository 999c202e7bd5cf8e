"""What one worker of a several-worker node shares with the rest of its node, through what its supervisor
handed it at start (in its environment): the node's connection count (connection_slots.py), what the
node's replicas hold (shared_holdings.py), and the node's merged monitoring (node_endpoints.py)."""

from __future__ import annotations

from dataclasses import dataclass

from cluster.node.supervision.connection_slots import NodeConnectionCount
from cluster.node.supervision.node_endpoints import NodeEndpoints, NodeSettings
from cluster.node.supervision.shared_holdings import WorkerHoldings
from cluster.runtime.workers import node_of


@dataclass(slots=True)
class NodeShare:
    """Each part None where the supervisor gave none (a worker started by hand)."""

    connections: NodeConnectionCount | None
    holdings: WorkerHoldings | None
    endpoints: NodeEndpoints | None

    @classmethod
    def from_environment(cls, member: str, index: int, workers: int) -> NodeShare:
        """For worker `index` of `workers`, cluster member `member` (`n1/w0`)."""
        settings = NodeSettings.from_environment()
        return cls(
            connections=NodeConnectionCount.from_environment(index, workers),
            holdings=WorkerHoldings.from_environment(index, workers),
            endpoints=NodeEndpoints(node_of(member), settings) if settings is not None else None,
        )

    async def close(self) -> None:
        """The HTTP session; the shared memory stays mapped while the process lives (a client closing or a
        replica's last change may still count in it as the node stops)."""
        if self.endpoints is not None:
            await self.endpoints.close()
