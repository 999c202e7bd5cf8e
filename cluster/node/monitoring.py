"""nats-server's monitoring endpoints for one node: /varz, /connz, /subsz, /routez here; /jsz and
/healthz in jetstream_monitor.py, /accountz, /accstatz, /gatewayz, /leafz in account_monitor.py.

Each body has nats-server 2.15's keys and types (prometheus-nats-exporter and
the nats CLI read them), filled with this node's own figures. Where a field
has no meaning in jetraft it keeps nats-server's shape with a fixed value;
docs/monitoring.md lists those. Everything here reads state the node already
keeps; nothing here changes it.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from cluster.node.account_monitor import AccountMonitor
from cluster.node.go_format import go_duration, uptime_string
from cluster.node.http_server import QueryError, bool_param, int_param
from cluster.node.jetstream_monitor import DEFAULT_MAX_CONSUMERS, JetStreamMonitor
from cluster.node.monitored_node import GLOBAL_ACCOUNT, MonitoredNode
from cluster.node.supervision.merged_bodies import WORKER_INTEREST_KEY
from cluster.runtime.context import CLUSTER_NAME
from cluster.runtime.workers import node_of
from gateway.connection import ClientConnection
from gateway.router import SublistStats
from storage.nats_time import format_rfc3339_nano
from subjects.grammar import subject_matches

# nats-server's defaults for what jetraft does not configure (reported as nats-server reports them)
MAX_CONNECTIONS = 65536
DEFAULT_LIST_LIMIT = 1024
WRITE_DEADLINE_NS = 10_000_000_000
TLS_TIMEOUT = 2


# connz's sort options, as nats-server names them, and how each orders the connections
_CONNZ_SORTS: dict[str, tuple[Callable[[ClientConnection], Any], bool]] = {
    "cid": (lambda c: c.client_id, False),
    "start": (lambda c: c.started_ns, False),
    "subs": (lambda c: len(c.subs), True),
    "pending": (lambda c: c.pending_bytes, True),
    "msgs_to": (lambda c: c.out_msgs, True),
    "msgs_from": (lambda c: c.in_msgs, True),
    "bytes_to": (lambda c: c.out_bytes, True),
    "bytes_from": (lambda c: c.in_bytes, True),
    "last": (lambda c: c.last_activity_ns, True),
    "idle": (lambda c: -c.last_activity_ns, True),
    "uptime": (lambda c: -c.started_ns, True),
}


class NodeMonitor:
    """Builds each endpoint's body from the node's live state."""

    def __init__(self, node: MonitoredNode, http_port: Callable[[], int]) -> None:
        self._node = node
        self._http_port = http_port
        self._started_ns = time.time_ns()
        self._requests: dict[str, int] = {}
        self.jetstream = JetStreamMonitor(node)
        self.accounts = AccountMonitor(node, self._started_ns, self._sublist_stats)

    def count(self, path: str) -> None:
        """An HTTP request on `path` (varz's http_req_stats)."""
        self._requests[path] = self._requests.get(path, 0) + 1

    # -- /varz ------------------------------------------------------------------------------

    def _websocket_opts(self) -> dict[str, Any]:
        """nats-server's varz `websocket`: {} without the port; its address and the flags it sets."""
        settings, listener = self._node.config.websocket, self._node.websocket
        if settings is None or listener is None:
            return {}
        opts: dict[str, Any] = {"host": settings.host or self._node.config.host, "port": listener.port}
        if settings.handshake_timeout:
            opts["handshake_timeout"] = int(settings.handshake_timeout * 1e9)  # Go's Duration: nanoseconds
        if settings.no_tls:
            opts["no_tls"] = True
        if settings.same_origin:
            opts["same_origin"] = True
        if settings.allowed_origins:
            opts["allowed_origins"] = list(settings.allowed_origins)
        if settings.compression:
            opts["compression"] = True
        return opts

    def varz(self) -> dict[str, Any]:
        node, now = self._node, time.time_ns()
        server, config, limits = node.server, node.config, node.server.limits
        clients = server.clients
        links = [node.mesh.link_stats(peer) for peer in node.mesh.peers]
        route_in = sum(link.messages_received for link in links if link is not None)
        route_out = sum(link.messages_sent for link in links if link is not None)
        # counters only grow: a client's counts stay when it closes
        traffic = server.stats.closed_traffic.with_clients(clients)
        client_in, client_out = traffic.in_msgs, traffic.out_msgs
        client_in_bytes, client_out_bytes = traffic.in_bytes, traffic.out_bytes
        usage = resource.getrusage(resource.RUSAGE_SELF)
        sublist = node.router.sublist_stats()
        body: dict[str, Any] = {
            "server_id": server.server_id,
            "server_name": server.name,
            "version": server.version,
            "proto": 1,
            "git_commit": "",
            "go": f"python{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}",
            "host": server.host,
            "port": server.port,
            # nats-server shows the setting, its default (65536) where it is 0
            "max_connections": limits.max_connections or MAX_CONNECTIONS,
            "ping_interval": int(limits.ping_interval * 1e9),
            "ping_max": limits.max_pings_out,
            "http_host": config.host,
            "http_port": self._http_port(),
            "http_base_path": "",
            "https_port": 0,
            "auth_timeout": int(limits.auth_timeout),
            "max_control_line": limits.max_control_line,
            "max_payload": limits.max_payload,
            "max_pending": limits.max_pending,
            **({"connect_urls": server.connect_urls} if server.connect_urls else {}),
            "cluster": self._cluster_opts(),
            "gateway": {},
            "leaf": {},
            "mqtt": {},
            "websocket": self._websocket_opts(),
            "jetstream": {
                "config": self.jetstream.config(),
                "stats": self.jetstream.stats(),
                **({"meta": meta} if (meta := self.jetstream.meta_cluster()) is not None else {}),
                "limits": {"default_max_consumers": DEFAULT_MAX_CONSUMERS},
            },
            "tls_timeout": TLS_TIMEOUT,
            "write_deadline": WRITE_DEADLINE_NS,
            "start": format_rfc3339_nano(self._started_ns),
            "now": format_rfc3339_nano(now),
            "uptime": uptime_string((now - self._started_ns) / 1e9),
            "mem": usage.ru_maxrss * 1024,
            "cores": os.cpu_count() or 1,
            "gomaxprocs": os.cpu_count() or 1,
            "cpu": self._cpu_percent(usage, now),
            "connections": len(clients),
            "total_connections": server.stats.connections_total,
            "routes": sum(1 for link in links if link is not None and link.connected),
            "remotes": sum(1 for link in links if link is not None and link.connected),
            "leafnodes": 0,
            "in_msgs": client_in + route_in,
            "in_bytes": client_in_bytes,
            "in_client_msgs": client_in,
            "in_client_bytes": client_in_bytes,
            "out_msgs": client_out + route_out,
            "out_bytes": client_out_bytes,
            "out_client_msgs": client_out,
            "out_client_bytes": client_out_bytes,
            "slow_consumers": server.stats.slow_consumers,
            "stale_connections": 0,
            "stalled_clients": 0,
            "subscriptions": sublist.subscriptions,
            **self._worker_interest(sublist),
            "http_req_stats": dict(self._requests),
            "config_load_time": format_rfc3339_nano(self._started_ns),
            "config_digest": "",
            # nats-server's feature switches: none of them name anything in jetraft
            "feature_flags": {},
            "system_account": node.config.system_account_name,
            "slow_consumer_stats": {
                "clients": server.stats.slow_consumers,
                "routes": 0,
                "gateways": 0,
                "leafs": 0,
            },
            "stale_connection_stats": {"clients": 0, "routes": 0, "gateways": 0, "leafs": 0},
            "disk_io_wait_stats": {"waiters": 0, "waits": 0, "wait_time": 0, "max_wait_time": 0},
        }
        return body

    def identity(self) -> dict[str, Any]:
        """Who answers a `$SYS` request: the `server` object of nats-server's replies."""
        node = self._node
        out: dict[str, Any] = {
            "name": node.server.name,
            "host": node.server.host,
            "id": node.server.server_id,
        }
        if node.config.peers:
            out["cluster"] = CLUSTER_NAME
        if node.config.domain:
            out["domain"] = node.config.domain
        out["ver"] = node.server.version
        if node.config.tags:
            out["tags"] = list(node.config.tags)
        return out

    def statsz(self) -> dict[str, Any]:
        """`$SYS.REQ.SERVER.PING`'s statsz: what `nats server ls` tabulates."""
        return statsz_of(self.varz(), self.routez()["routes"])

    def _cpu_percent(self, usage: resource.struct_rusage, now_ns: int) -> float:
        """Average CPU use since start, in percent of one core (nats-server samples it; this is the mean)."""
        elapsed = max((now_ns - self._started_ns) / 1e9, 1e-9)
        return round(100.0 * (usage.ru_utime + usage.ru_stime) / elapsed, 2)

    def _cluster_opts(self) -> dict[str, Any]:
        config = self._node.config
        if not config.peers:
            return {}
        return {
            "name": CLUSTER_NAME,
            "addr": config.host,
            "cluster_port": config.cluster_port,
            "auth_timeout": int(self._node.server.limits.auth_timeout),
            "urls": sorted(config.peers.values()),
            "tls_timeout": TLS_TIMEOUT,
            "pool_size": 1,
        }

    # -- /connz -----------------------------------------------------------------------------

    def connz(self, query: Mapping[str, str]) -> dict[str, Any]:
        server, now = self._node.server, time.time_ns()
        offset = max(int_param(query, "offset", 0), 0)
        limit = int_param(query, "limit", DEFAULT_LIST_LIMIT)
        if limit <= 0:
            limit = DEFAULT_LIST_LIMIT
        subs = bool_param(query, "subs")
        auth = bool_param(query, "auth")
        sort = query.get("sort", "") or "cid"
        if sort not in _CONNZ_SORTS:
            raise QueryError(f"invalid sorting option: {sort}")
        cid = int_param(query, "cid", 0)
        key, descending = _CONNZ_SORTS[sort]
        clients = sorted(server.clients, key=key, reverse=descending)
        if cid:
            clients = [c for c in clients if c.client_id == cid]
        page = clients[offset : offset + limit]
        return {
            "server_id": server.server_id,
            "now": format_rfc3339_nano(now),
            "num_connections": len(page),
            "total": len(clients),
            "offset": offset,
            "limit": limit,
            "connections": [self._connection(c, now, subs, auth) for c in page],
        }

    def _connection(self, client: ClientConnection, now_ns: int, subs: bool, auth: bool) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cid": client.client_id,
            "kind": "Client",
            "type": "nats",
            "ip": client.remote_ip,
            "port": client.remote_port,
            "start": format_rfc3339_nano(client.started_ns),
            "last_activity": format_rfc3339_nano(client.last_activity_ns),
            # jetraft does not time a PING round trip to each client
            "rtt": "0s",
            "uptime": uptime_string((now_ns - client.started_ns) / 1e9),
            "idle": uptime_string((now_ns - client.last_activity_ns) / 1e9),
            "pending_bytes": client.pending_bytes,
            "in_msgs": client.in_msgs,
            "out_msgs": client.out_msgs,
            "in_bytes": client.in_bytes,
            "out_bytes": client.out_bytes,
            "subscriptions": len(client.subs),
        }
        options = client.options
        for key, value in (("name", options.name), ("lang", options.lang), ("version", options.version)):
            if value:
                out[key] = value
        if auth:
            # nats-server names the user a client authenticated as, and the account's tag; the
            # global account's own name it leaves out
            if options.user:
                out["authorized_user"] = options.user
            if client.account_name != GLOBAL_ACCOUNT:
                out["account"] = client.account_name
            out["name_tag"] = client.account_name
        if subs and client.subs:
            out["subscriptions_list"] = sorted(sub.subject for sub in client.subs.values())
        return out

    # -- /subsz -----------------------------------------------------------------------------

    def _worker_interest(self, stats: SublistStats) -> dict[str, Any]:
        """On one worker of a several-worker node, its index's entries told apart, for its supervisor to
        count the node's subscriptions as one server's (merged_bodies.node_subscriptions); nothing on a
        node of one process, whose bodies clients read."""
        config = self._node.config
        if config.worker_index is None:
            return {}
        node = node_of(config.name)
        return {
            WORKER_INTEREST_KEY: {
                "own": stats.subscriptions - sum(stats.peer_interest.values()),
                "peers": {peer: n for peer, n in sorted(stats.peer_interest.items()) if node_of(peer) != node},
            }
        }

    def _sublist_stats(self) -> dict[str, Any]:
        stats = self._node.router.sublist_stats()
        return {
            **self._worker_interest(stats),
            "num_subscriptions": stats.subscriptions,
            "num_cache": stats.cache_entries,
            "num_inserts": stats.inserts,
            "num_removes": stats.removes,
            "num_matches": stats.matches,
            "cache_hit_rate": stats.cache_hits / stats.matches if stats.matches else 0.0,
            # fan-out is not tracked per match here; nats-server reports its mean and maximum
            "max_fanout": 0,
            "avg_fanout": 0.0,
        }

    def subsz(self, query: Mapping[str, str]) -> dict[str, Any]:
        offset = max(int_param(query, "offset", 0), 0)
        limit = int_param(query, "limit", DEFAULT_LIST_LIMIT)
        if limit <= 0:
            limit = DEFAULT_LIST_LIMIT
        body: dict[str, Any] = {
            "server_id": self._node.server.server_id,
            "now": format_rfc3339_nano(time.time_ns()),
            **self._sublist_stats(),
            "total": 0,
            "offset": offset,
            "limit": limit,
        }
        if bool_param(query, "subs"):
            listed = [
                {
                    "account": client.account_name,
                    "account_tag": client.account_name,
                    "subject": sub.subject,
                    **({"qgroup": sub.queue} if sub.queue else {}),
                    "sid": sid,
                    "msgs": sub.delivered,
                    "cid": client.client_id,
                }
                for client in sorted(self._node.server.clients, key=lambda c: c.client_id)
                for sid, sub in client.subs.items()
            ]
            test = query.get("test")
            if test:
                listed = [entry for entry in listed if subject_matches(entry["subject"], test)]
            body["total"] = len(listed)
            body["subscriptions_list"] = listed[offset : offset + limit]
        return body

    # -- delegated: JetStream (jetstream_monitor.py) and accounts (account_monitor.py) -------------

    def jsz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return self.jetstream.jsz(query)

    def healthz(self, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        return self.jetstream.healthz(query)

    def gatewayz(self) -> dict[str, Any]:
        return self.accounts.gatewayz()

    def leafz(self) -> dict[str, Any]:
        return self.accounts.leafz()

    def accountz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return self.accounts.accountz(query)

    def accstatz(self, query: Mapping[str, str]) -> dict[str, Any]:
        return self.accounts.accstatz(query)

    # -- /routez ----------------------------------------------------------------------------

    def routez(self) -> dict[str, Any]:
        node, now = self._node, time.time_ns()
        routes = []
        for index, peer in enumerate(sorted(node.mesh.peers), start=1):
            link = node.mesh.link_stats(peer)
            if link is None or not link.connected:
                continue
            address = node.config.peers.get(peer, "")
            host, _, port = address.rpartition(":")
            routes.append(
                {
                    "rid": index,
                    "remote_id": peer,
                    "remote_name": peer,
                    "did_solicit": True,
                    "is_configured": True,
                    "ip": host,
                    "port": int(port) if port.isdigit() else 0,
                    "start": format_rfc3339_nano(self._started_ns),
                    "last_activity": format_rfc3339_nano(now),
                    "rtt": go_duration(int(link.rtt * 1e9)) if link.rtt is not None else "0s",
                    "uptime": uptime_string((now - self._started_ns) / 1e9),
                    "idle": "0s",
                    "pending_size": link.queued_bytes,
                    "in_msgs": link.messages_received,
                    "out_msgs": link.messages_sent,
                    "in_bytes": 0,
                    "out_bytes": 0,
                    "subscriptions": link.interest,
                    "compression": "off",
                }
            )
        return {
            "server_id": node.server.server_id,
            "server_name": node.server.name,
            "now": format_rfc3339_nano(now),
            "num_routes": len(routes),
            "routes": routes,
        }


def statsz_of(varz: dict[str, Any], routes: list[dict[str, Any]]) -> dict[str, Any]:
    """nats-server's statsz from a /varz body and the connected routes of a /routez body (one node's, or a
    several-worker node's merged by its supervisor)."""
    out: dict[str, Any] = {
        "start": varz["start"],
        "mem": varz["mem"],
        "cores": varz["cores"],
        "cpu": varz["cpu"],
        "connections": varz["connections"],
        "total_connections": varz["total_connections"],
        "active_accounts": 1,
        "subscriptions": varz["subscriptions"],
        "sent": {"msgs": varz["out_msgs"], "bytes": varz["out_bytes"]},
        "sent_to_clients": {"msgs": varz["out_client_msgs"], "bytes": varz["out_client_bytes"]},
        "received": {"msgs": varz["in_msgs"], "bytes": varz["in_bytes"]},
        "received_from_clients": {"msgs": varz["in_client_msgs"], "bytes": varz["in_client_bytes"]},
        "slow_consumers": varz["slow_consumers"],
        "active_servers": 1 + len(routes),
    }
    if routes:
        out["routes"] = [
            {
                "rid": index,
                "name": route["remote_name"],
                "sent": {"msgs": route["out_msgs"], "bytes": 0},
                "received": {"msgs": route["in_msgs"], "bytes": 0},
                "pending": route["pending_size"],
            }
            for index, route in enumerate(routes, start=1)
        ]
    out["jetstream"] = varz["jetstream"]
    out["gomaxprocs"] = varz["gomaxprocs"]
    return out
