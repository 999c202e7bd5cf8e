"""What a client port allows each connection, and what it counts of them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from gateway.protocol import DEFAULT_MAX_CONTROL_LINE, DEFAULT_MAX_PAYLOAD

# nats-server's max_pending default: bytes queued to one client before it is cut off as a slow consumer;
# max_payload may not be higher.
DEFAULT_MAX_PENDING = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """nats-server's defaults, except where a test needs them short."""

    max_payload: int = DEFAULT_MAX_PAYLOAD
    max_control_line: int = DEFAULT_MAX_CONTROL_LINE
    # Bytes queued to one client before it is cut off as a slow consumer.
    max_pending: int = DEFAULT_MAX_PENDING
    ping_interval: float = 120.0
    max_pings_out: int = 2
    auth_timeout: float = 2.0
    # nats-server's max_connections (0: no limit; below 0: none at all) and max_subscriptions per
    # connection (0 or below: no limit)
    max_connections: int = 0
    max_subscriptions: int = 0


class Moved(Protocol):
    """What a client connection (or a sum of them) took in and gave out."""

    in_msgs: int
    in_bytes: int
    out_msgs: int
    out_bytes: int


@dataclass(slots=True)
class Traffic:
    """Messages and bytes a server took from clients (in) and gave them (out)."""

    in_msgs: int = 0
    in_bytes: int = 0
    out_msgs: int = 0
    out_bytes: int = 0

    def add(self, moved: Moved) -> None:
        self.in_msgs += moved.in_msgs
        self.in_bytes += moved.in_bytes
        self.out_msgs += moved.out_msgs
        self.out_bytes += moved.out_bytes

    def with_clients(self, clients: Iterable[Moved]) -> Traffic:
        """This traffic (the closed clients') plus what `clients` have moved so far."""
        total = Traffic(self.in_msgs, self.in_bytes, self.out_msgs, self.out_bytes)
        for client in clients:
            total.add(client)
        return total


@dataclass(slots=True)
class ServerStats:
    connections_total: int = 0
    slow_consumers: int = 0
    # the same, by the account of the client cut off (/accstatz)
    slow_consumers_by_account: dict[str, int] = field(default_factory=dict)
    # what closed connections moved, in all and by account: nats-server's in_msgs, out_bytes, ... and an
    # account's sent/received only ever grow, so a client's counts stay when it goes
    closed_traffic: Traffic = field(default_factory=Traffic)
    closed_traffic_by_account: dict[str, Traffic] = field(default_factory=dict)

    def add_closed(self, account: str, client: Moved) -> None:
        self.closed_traffic.add(client)
        self.closed_traffic_by_account.setdefault(account, Traffic()).add(client)


class SharedConnectionCount(Protocol):
    """The count `max_connections` holds against when several processes share one client port (a node's
    workers): nats-server refuses a client only when the server as a whole is full, and so must they."""

    def try_add(self, limit: int) -> bool:
        """Count one more connection of this process if fewer than `limit` are counted in all; whether it was."""
        ...

    def remove(self) -> None:
        """A connection this process counted has closed."""
        ...
