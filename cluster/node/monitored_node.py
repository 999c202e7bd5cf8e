"""What the monitoring endpoints read of a node: a protocol, so the modules that build the bodies
need not import the node that composes them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cluster.api.entry import ApiEntry
from cluster.meta.service import MetaService
from cluster.node.account_jetstream import AccountJetStream
from cluster.node.config import NodeConfig
from gateway.router import Router
from gateway.routes import RouteMesh
from gateway.server import GatewayServer
from raft.driver import RaftHost

if TYPE_CHECKING:  # the listener (and wsproto) is imported only by a node with a WebSocket port
    from gateway.transports.websocket import WebSocketListener

GLOBAL_ACCOUNT = "$G"


class MonitoredNode(Protocol):
    """The parts of a node the endpoints read (cluster.node.node.Node)."""

    config: NodeConfig
    server: GatewayServer
    # the WebSocket port's listener, when one is configured
    websocket: WebSocketListener | None
    router: Router
    mesh: RouteMesh
    host: RaftHost
    meta: MetaService | None
    api: ApiEntry | None
    # the JetStream of every account but the home one (whose services are meta and api)
    account_jetstreams: list[AccountJetStream]
    # whether the home account has JetStream (not when accounts are configured and none enables it)
    home_jetstream: bool

    def serving_problems(self) -> tuple[list[str], dict[str, bool]]:
        """What keeps this node's clients from being served (past the health grace), and which
        peers its routes reach (cluster/node/health.py)."""
        ...
