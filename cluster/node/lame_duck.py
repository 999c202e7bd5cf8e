"""Lame duck mode: how a node leaves without dropping its clients all at once (SIGUSR2, as nats-server).

Operators take a node down for an upgrade with `kill -USR2 <pid>` (nats-server's `--signal ldm`). In
nats-server's order:
1. the client port (and the WebSocket port) stops taking new clients (the connected ones stay);
2. every Raft group this node leads hands its leadership to its most caught-up voter, so streams,
   consumers and the meta group keep answering without waiting out an election; one second for that
   when any moved;
3. every client is sent an INFO with `ldm: true` (clients call their lame duck callback and may move
   on; nats-py and nats.js do);
4. after `lame_duck_grace_period` (10 s) the clients are closed one by one over the rest of
   `lame_duck_duration` (2 min), at most a second apart, so they do not all reconnect to the other
   nodes at the same moment;
5. the node stops as on SIGTERM. A node with no client left stops at once.

Unlike nats-server, the node keeps its replicas running as a follower until it stops (nats-server shuts
JetStream down at step 2): they stay current, which a restart soon after wants.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import structlog

from gateway.server import GatewayServer
from raft.driver import RaftHost, RaftHostError

if TYPE_CHECKING:  # the listener (and wsproto) is imported only by a node with a WebSocket port
    from gateway.transports.websocket import WebSocketListener

log = structlog.get_logger()

# nats-server waits this long after asking its leaders to step down, before it tells its clients
LEADERSHIP_SETTLE_S = 1.0
# the longest pause between two clients closed (nats-server's cap)
MAX_CLOSE_INTERVAL_S = 1.0


class LameDuckNode(Protocol):
    server: GatewayServer
    websocket: WebSocketListener | None
    host: RaftHost


def close_interval(clients: int, duration_s: float, grace_s: float) -> float:
    """Seconds between two clients closed: the rest of the duration after the grace period spread over
    the clients (a second if nothing is left of it), at most MAX_CLOSE_INTERVAL_S."""
    spread = duration_s - grace_s
    if spread <= 0:
        spread = 1.0
    return min(spread / max(clients, 1), MAX_CLOSE_INTERVAL_S)


async def hand_over_leaderships(host: RaftHost) -> int:
    """Every group this node leads with other voters asks its most caught-up voter to take over; how
    many moved. A group whose transfer fails or times out is logged and left (it elects a leader when
    this node stops)."""

    async def hand_over(group: str) -> bool:
        others = [peer for peer in host.voters(group) if peer != host.node_id]
        if not others:
            return False
        try:
            progress = host.peer_progress(group)
            target = max(others, key=lambda peer: progress.get(peer, (0, False)))
            await host.transfer_leadership(group, target)
        except (RaftHostError, TimeoutError) as exc:
            log.warning("lame_duck_transfer_failed", group=group, error=repr(exc))
            return False
        return True

    led = [group for group in host.groups() if host.is_leader(group)]
    moved = await asyncio.gather(*(hand_over(group) for group in led))
    return sum(moved)


async def run_lame_duck(
    node: LameDuckNode, duration_s: float, grace_s: float, stop: Callable[[], None]
) -> None:
    """Lame duck mode from its start to the node's stop (`stop` is called last)."""
    server = node.server
    log.info("lame_duck_entered", duration_s=duration_s, grace_s=grace_s)
    server.stop_accepting()
    if node.websocket is not None:
        await node.websocket.stop_accepting()
    moved = await hand_over_leaderships(node.host)
    if moved:
        log.info("lame_duck_leaderships_moved", groups=moved)
        await asyncio.sleep(LEADERSHIP_SETTLE_S)
    clients = server.clients
    if clients:
        server.announce_lame_duck()
        await asyncio.sleep(grace_s)
        interval = close_interval(len(clients), duration_s, grace_s)
        log.info("lame_duck_closing_clients", clients=len(clients), interval_s=round(interval, 3))
        for index, client in enumerate(clients):
            client.close()
            if index < len(clients) - 1:
                # as nats-server: a random pause of at least half the interval
                await asyncio.sleep(random.uniform(interval / 2, interval))
    stop()
