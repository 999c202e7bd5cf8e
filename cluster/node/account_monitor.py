"""The account and inter-cluster endpoints: /accountz, /accstatz, /gatewayz, /leafz. The accounts are
those of the node's configuration (`$G`, nats-server's global one, when none is; `$SYS` is only named),
each with its own clients; jetraft has no gateways or leaf nodes, so those two give nats-server's shapes
without any."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from cluster.node.http_server import QueryError, bool_param
from cluster.node.monitored_node import GLOBAL_ACCOUNT, MonitoredNode
from gateway.connection import ClientConnection
from gateway.limits import Traffic
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

    def _account_names(self) -> list[str]:
        """Every account nats-server lists: the configured ones, the global and the system account."""
        accounts = self._node.config.accounts
        configured = set(accounts.accounts) if accounts is not None else set()
        return sorted(configured | {GLOBAL_ACCOUNT, self._node.config.system_account_name})

    def _with_jetstream(self) -> tuple[str, ...]:
        accounts = self._node.config.accounts
        return accounts.jetstream_accounts if accounts is not None else (GLOBAL_ACCOUNT,)

    def _clients_of(self, account: str) -> list[ClientConnection]:
        return [client for client in self._node.server.clients if client.account_name == account]

    def accountz(self, query: Mapping[str, str]) -> dict[str, Any]:
        """The configured accounts (or the global one), and the system account nats-server names ($SYS)."""
        node, now = self._node, time.time_ns()
        body: dict[str, Any] = {
            "server_id": node.server.server_id,
            "now": format_rfc3339_nano(now),
            "system_account": node.config.system_account_name,
        }
        account = query.get("acc", "")
        names = self._account_names()
        if not account:
            body["accounts"] = names
            return body
        if account not in names:
            raise QueryError(f"Account {account} does not exist")
        clients = self._clients_of(account)
        body["account_detail"] = {
            "account_name": account,
            "update_time": format_rfc3339_nano(self._started_ns),
            "expired": False,
            "complete": True,
            "jetstream_enabled": account in self._with_jetstream(),
            "leafnode_connections": 0,
            "client_connections": len(clients),
            "subscriptions": sum(len(c.subs) for c in clients),
            # nats-server wires its JetStream API and $SYS requests into each account by imports;
            # jetraft answers them directly in each account: nothing is imported
            "imports": [],
            "name_tag": account,
        }
        accounts = node.config.accounts
        if account == (accounts.home if accounts is not None else GLOBAL_ACCOUNT):
            # the router's one subject space holds every account's: its figures are reported once, with
            # the account whose subjects it holds un-prefixed
            body["account_detail"]["sublist_stats"] = self._sublist_stats()
        return body

    def accstatz(self, query: Mapping[str, str]) -> dict[str, Any]:
        """Each account's traffic, of the accounts with clients; with `unused`, the idle ones too."""
        node = self._node
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
            traffic = node.server.stats.closed_traffic_by_account.get(name, Traffic()).with_clients(members)
            return {
                "acc": name,
                "name": name,
                "conns": len(members),
                "leafnodes": 0,
                "total_conns": len(members),
                "num_subscriptions": sum(len(c.subs) for c in members),
                "sent": flows(traffic.out_msgs, traffic.out_bytes),
                "received": flows(traffic.in_msgs, traffic.in_bytes),
                "slow_consumers": node.server.stats.slow_consumers_by_account.get(name, 0),
            }

        statz = []
        for name in self._account_names():
            members = self._clients_of(name)
            if members or with_unused:
                statz.append(entry(name, members))
        return {
            "server_id": node.server.server_id,
            "now": format_rfc3339_nano(time.time_ns()),
            "account_statz": statz,
        }
