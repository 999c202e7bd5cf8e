"""The account and inter-cluster endpoints: /accountz, /accstatz, /gatewayz, /leafz. jetraft has one
account (`$G`, nats-server's global one; `$SYS` is only named) and no gateways or leaf nodes, so these
give nats-server's shapes with the one account's real figures and nothing else."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from cluster.node.http_server import QueryError, bool_param
from cluster.node.monitored_node import GLOBAL_ACCOUNT, MonitoredNode
from cluster.runtime.context import SYSTEM_ACCOUNT
from gateway.connection import ClientConnection
from storage.nats_time import format_rfc3339_nano


class AccountMonitor:
    """Builds /accountz, /accstatz, /gatewayz and /leafz."""

    def __init__(
        self, node: MonitoredNode, started_ns: int, sublist_stats: Callable[[], dict[str, Any]]
    ) -> None:
        self._node = node
        self._started_ns = started_ns
        self._sublist_stats = sublist_stats

    def gatewayz(self) -> dict[str, Any]:
        """jetraft has no gateways (superclusters): nats-server's answer without any."""
        now = format_rfc3339_nano(time.time_ns())
        return {
            "server_id": self._node.server.server_id,
            "now": now,
            "outbound_gateways": {},
            "inbound_gateways": {},
        }

    def leafz(self) -> dict[str, Any]:
        """jetraft has no leaf node connections: nats-server's answer without any."""
        now = format_rfc3339_nano(time.time_ns())
        return {"server_id": self._node.server.server_id, "now": now, "leafnodes": 0, "leafs": []}

    def accountz(self, query: Mapping[str, str]) -> dict[str, Any]:
        """One account clients use ($G) and the system account nats-server names ($SYS)."""
        node, now = self._node, time.time_ns()
        body: dict[str, Any] = {
            "server_id": node.server.server_id,
            "now": format_rfc3339_nano(now),
            "system_account": SYSTEM_ACCOUNT,
        }
        account = query.get("acc", "")
        if not account:
            body["accounts"] = [SYSTEM_ACCOUNT, GLOBAL_ACCOUNT]
            return body
        if account not in (SYSTEM_ACCOUNT, GLOBAL_ACCOUNT):
            raise QueryError(f"Account {account} does not exist")
        clients = node.server.clients if account == GLOBAL_ACCOUNT else []
        body["account_detail"] = {
            "account_name": account,
            "update_time": format_rfc3339_nano(self._started_ns),
            "expired": False,
            "complete": True,
            "jetstream_enabled": account == GLOBAL_ACCOUNT,
            "leafnode_connections": 0,
            "client_connections": len(clients),
            "subscriptions": sum(len(c.subs) for c in clients),
            # nats-server wires its JetStream API and $SYS requests into each account by imports;
            # jetraft answers them directly, in its one account: nothing is imported
            "imports": [],
            "name_tag": account,
        }
        if account == GLOBAL_ACCOUNT:
            body["account_detail"]["sublist_stats"] = self._sublist_stats()
        return body

    def accstatz(self, query: Mapping[str, str]) -> dict[str, Any]:
        """$G's traffic (every client is in it); with `unused`, the idle $SYS too, as nats-server lists it."""
        node = self._node
        clients = node.server.clients
        with_unused = bool_param(query, "unused")

        def flows(msgs: int, bytes_: int) -> dict[str, Any]:
            nothing = {"msgs": 0, "bytes": 0}
            return {
                "msgs": msgs,
                "bytes": bytes_,
                "gateways": nothing,
                "routes": dict(nothing),
                "leafs": dict(nothing),
            }

        def entry(name: str, members: list[ClientConnection]) -> dict[str, Any]:
            return {
                "acc": name,
                "name": name,
                "conns": len(members),
                "leafnodes": 0,
                "total_conns": len(members),
                "num_subscriptions": sum(len(c.subs) for c in members),
                "sent": flows(sum(c.out_msgs for c in members), sum(c.out_bytes for c in members)),
                "received": flows(sum(c.in_msgs for c in members), sum(c.in_bytes for c in members)),
                "slow_consumers": node.server.stats.slow_consumers if members else 0,
            }

        statz = []
        if with_unused:
            statz.append(entry(SYSTEM_ACCOUNT, []))
        if clients or with_unused:
            statz.append(entry(GLOBAL_ACCOUNT, clients))
        return {
            "server_id": node.server.server_id,
            "now": format_rfc3339_nano(time.time_ns()),
            "account_statz": statz,
        }
