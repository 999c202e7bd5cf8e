"""nats-server's monitoring endpoints for one node: /varz, /connz, /subsz, /routez, /jsz, /healthz.

Each body has nats-server 2.15's keys and types (prometheus-nats-exporter and
the nats CLI read them), filled with this node's own figures. Where a field
has no meaning in jetraft it keeps nats-server's shape with a fixed value;
docs/monitoring.md lists those. Everything here reads state the node already
keeps; nothing here changes it.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from cluster.api.entry import ApiEntry
from cluster.consumer.api import ConsumerView, consumer_info
from cluster.consumer.delivery import num_pending
from cluster.consumer.replica import ConsumerReplica
from cluster.meta.service import MetaService
from cluster.node.config import NodeConfig
from cluster.node.go_format import go_duration, uptime_string
from cluster.node.http_server import QueryError
from cluster.runtime.context import CLUSTER_NAME, META_GROUP, SYSTEM_ACCOUNT
from cluster.stream.info import API_LEVEL, state_json
from cluster.stream.replica import StreamReplica
from gateway.connection import ClientConnection
from gateway.router import Router
from gateway.routes import RouteMesh
from gateway.server import GatewayServer
from raft.driver import RaftHost, RaftHostError
from raft.types import Role
from storage.nats_time import ZERO_TIME, format_rfc3339_nano
from subjects.grammar import subject_matches

# nats-server's defaults for what jetraft does not configure (reported as nats-server reports them)
MAX_CONNECTIONS = 65536
DEFAULT_LIST_LIMIT = 1024
WRITE_DEADLINE_NS = 10_000_000_000
TLS_TIMEOUT = 2
DEFAULT_MAX_CONSUMERS = 1000
# nats-server's "no reservation" (math.MaxUint64) for an account's reserved memory and storage
NO_RESERVATION = 2**64 - 1
GLOBAL_ACCOUNT = "$G"
# nats-server's sync_interval default: file stores fsync at most this often (jetraft's RocksDB
# stores sync per Raft write batch; the figure is reported for the shape's sake)
SYNC_INTERVAL_NS = 120_000_000_000


class MonitoredNode(Protocol):
    """The parts of a node the endpoints read (cluster.node.node.Node)."""

    config: NodeConfig
    server: GatewayServer
    router: Router
    mesh: RouteMesh
    host: RaftHost
    meta: MetaService | None
    api: ApiEntry | None


def _int_param(query: Mapping[str, str], name: str, default: int) -> int:
    text = query.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError as exc:
        raise QueryError(f"Error decoding int for '{name}': strconv.Atoi: parsing \"{text}\": invalid syntax") from exc


def _bool_param(query: Mapping[str, str], name: str) -> bool:
    text = query.get(name, "")
    if text in ("", "0", "false", "f", "F", "FALSE", "False"):
        return False
    if text in ("1", "true", "t", "T", "TRUE", "True", "detail"):
        return True
    raise QueryError(f"Error decoding boolean for '{name}': strconv.ParseBool: parsing \"{text}\": invalid syntax")


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

    def count(self, path: str) -> None:
        """An HTTP request on `path` (varz's http_req_stats)."""
        self._requests[path] = self._requests.get(path, 0) + 1

    # -- /varz ------------------------------------------------------------------------------

    def varz(self) -> dict[str, Any]:
        node, now = self._node, time.time_ns()
        server, config, limits = node.server, node.config, node.server.limits
        clients = server.clients
        links = [node.mesh.link_stats(peer) for peer in node.mesh.peers]
        route_in = sum(link.messages_received for link in links if link is not None)
        route_out = sum(link.messages_sent for link in links if link is not None)
        client_in = sum(c.in_msgs for c in clients)
        client_out = sum(c.out_msgs for c in clients)
        client_in_bytes = sum(c.in_bytes for c in clients)
        client_out_bytes = sum(c.out_bytes for c in clients)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        body: dict[str, Any] = {
            "server_id": server.server_id,
            "server_name": server.name,
            "version": server.version,
            "proto": 1,
            "git_commit": "",
            "go": f"python{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}",
            "host": server.host,
            "port": server.port,
            "max_connections": MAX_CONNECTIONS,
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
            "websocket": {},
            "jetstream": {
                "config": self._js_config(),
                "stats": self._js_stats(),
                **({"meta": meta} if (meta := self._meta_cluster()) is not None else {}),
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
            "subscriptions": node.router.sublist_stats().subscriptions,
            "http_req_stats": dict(self._requests),
            "config_load_time": format_rfc3339_nano(self._started_ns),
            "config_digest": "",
            # nats-server's feature switches: none of them name anything in jetraft
            "feature_flags": {},
            "system_account": SYSTEM_ACCOUNT,
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
        varz = self.varz()
        links = [self._node.mesh.link_stats(peer) for peer in sorted(self._node.mesh.peers)]
        connected = [link for link in links if link is not None and link.connected]
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
            "active_servers": 1 + len(connected),
        }
        if connected:
            out["routes"] = [
                {
                    "rid": index,
                    "name": link.peer,
                    "sent": {"msgs": link.messages_sent, "bytes": 0},
                    "received": {"msgs": link.messages_received, "bytes": 0},
                    "pending": link.queued_bytes,
                }
                for index, link in enumerate(connected, start=1)
            ]
        out["jetstream"] = varz["jetstream"]
        out["gomaxprocs"] = varz["gomaxprocs"]
        return out

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
        offset = max(_int_param(query, "offset", 0), 0)
        limit = _int_param(query, "limit", DEFAULT_LIST_LIMIT)
        if limit <= 0:
            limit = DEFAULT_LIST_LIMIT
        subs = _bool_param(query, "subs")
        sort = query.get("sort", "") or "cid"
        if sort not in _CONNZ_SORTS:
            raise QueryError(f"invalid sorting option: {sort}")
        cid = _int_param(query, "cid", 0)
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
            "connections": [self._connection(c, now, subs) for c in page],
        }

    def _connection(self, client: ClientConnection, now_ns: int, subs: bool) -> dict[str, Any]:
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
        if subs and client.subs:
            out["subscriptions_list"] = sorted(sub.subject for sub in client.subs.values())
        return out

    # -- /subsz -----------------------------------------------------------------------------

    def _sublist_stats(self) -> dict[str, Any]:
        stats = self._node.router.sublist_stats()
        return {
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
        offset = max(_int_param(query, "offset", 0), 0)
        limit = _int_param(query, "limit", DEFAULT_LIST_LIMIT)
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
        if _bool_param(query, "subs"):
            listed = [
                {
                    "account": GLOBAL_ACCOUNT,
                    "account_tag": GLOBAL_ACCOUNT,
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

    # -- /gatewayz, /leafz, /accountz, /accstatz -------------------------------------------------

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
        with_unused = _bool_param(query, "unused")

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

    # -- /jsz -------------------------------------------------------------------------------

    def _js_config(self) -> dict[str, Any]:
        store_dir = str(self._node.config.node_data_dir)
        try:
            disk = shutil.disk_usage(store_dir).free
        except OSError:
            disk = 0
        try:
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            memory = 0
        # nats-server's defaults when no limit is configured: 75% of memory and of the free disk
        return {
            "max_memory": memory * 3 // 4,
            "max_storage": disk * 3 // 4,
            "store_dir": store_dir,
            "sync_interval": SYNC_INTERVAL_NS,
            **({"domain": self._node.config.domain} if self._node.config.domain else {}),
            "strict": True,
        }

    def _replicas(self) -> list[StreamReplica]:
        meta = self._node.meta
        return [] if meta is None else sorted(meta.replicas.values(), key=lambda r: r.name)

    def _usage(self) -> tuple[int, int]:
        """(memory, storage) bytes of the streams this node holds a replica of."""
        memory = storage = 0
        for replica in self._replicas():
            size = replica.machine.store.state().bytes
            if replica.config.storage.value == "memory":
                memory += size
            else:
                storage += size
        return memory, storage

    def _js_stats(self) -> dict[str, Any]:
        memory, storage = self._usage()
        api = self._node.api
        ha_assets = 0
        for group in self._node.host.groups():
            try:
                if len(self._node.host.status(group).voters) > 1:
                    ha_assets += 1
            except RaftHostError:
                continue
        return {
            "memory": memory,
            "storage": storage,
            "reserved_memory": 0,
            "reserved_storage": 0,
            "accounts": 1,
            "ha_assets": ha_assets,
            "api": {
                "level": API_LEVEL,
                "total": api.requests if api is not None else 0,
                "errors": api.errors if api is not None else 0,
            },
        }

    def _meta_cluster(self) -> dict[str, Any] | None:
        node = self._node
        if not node.config.peers:
            return None
        try:
            status = node.host.status(META_GROUP)
        except RaftHostError:
            return None
        progress: dict[str, tuple[int, bool]] = {}
        if status.role is Role.LEADER:
            try:
                progress = node.host.peer_progress(META_GROUP)
            except RaftHostError:
                progress = {}
        try:
            silence = node.host.peer_silence_ns(META_GROUP)
        except RaftHostError:
            silence = {}
        replicas = []
        for peer in status.voters:
            if peer == node.config.name:
                continue
            match, active = progress.get(peer, (0, False))
            entry: dict[str, Any] = {"name": peer, "current": active and match >= status.last_index}
            entry["active"] = silence.get(peer, 0)  # ns since a message from it arrived; 0: never
            entry["peer"] = peer
            replicas.append(entry)
        size = len(status.voters)
        return {
            "name": CLUSTER_NAME,
            **({"leader": status.leader_id} if status.leader_id else {}),
            "peer": node.config.name,
            **({"replicas": replicas} if replicas else {}),
            "cluster_size": size,
            "quorum_needed": size // 2 + 1,
            "pending": max(status.last_index - status.applied_index, 0),
            "pending_requests": 0,
            "pending_infos": 0,
            "snapshot": {
                "pending_entries": max(status.last_index - status.snapshot_index, 0),
                "pending_size": 0,
                "last_time": ZERO_TIME,
            },
        }

    def jsz(self, query: Mapping[str, str]) -> dict[str, Any]:
        node, now = self._node, time.time_ns()
        with_streams = _bool_param(query, "streams")
        with_consumers = _bool_param(query, "consumers")
        with_config = _bool_param(query, "config")
        leader_only = _bool_param(query, "leader-only")
        accounts = _bool_param(query, "accounts")
        replicas = self._replicas()
        messages = sum(r.machine.store.state().messages for r in replicas)
        bytes_ = sum(r.machine.store.state().bytes for r in replicas)
        consumers = sum(len(r.consumers) for r in replicas)
        meta = self._meta_cluster()
        if leader_only and (meta is None or meta.get("leader") != node.config.name) and node.config.peers:
            raise QueryError("filtered response: not leader")
        body: dict[str, Any] = {
            **self._js_stats(),
            "server_id": node.server.server_id,
            "now": format_rfc3339_nano(now),
            "config": self._js_config(),
            "limits": {"default_max_consumers": DEFAULT_MAX_CONSUMERS},
            "streams": len(replicas),
            "consumers": consumers,
            "messages": messages,
            "bytes": bytes_,
        }
        if meta is not None:
            body["meta_cluster"] = meta
        if accounts or with_streams or with_consumers or with_config:
            memory, storage = self._usage()
            account: dict[str, Any] = {
                "name": GLOBAL_ACCOUNT,
                "id": GLOBAL_ACCOUNT,
                "memory": memory,
                "storage": storage,
                "reserved_memory": NO_RESERVATION,
                "reserved_storage": NO_RESERVATION,
                "accounts": 0,
                "ha_assets": 0,
                "api": {
                    "level": 0,
                    "total": node.api.requests if node.api is not None else 0,
                    "errors": node.api.errors if node.api is not None else 0,
                },
            }
            if with_streams or with_consumers:
                account["stream_detail"] = [
                    self._stream_detail(r, now, with_config, with_consumers) for r in replicas
                ]
            body["account_details"] = [account]
        body["total"] = 1
        return body

    def _stream_detail(
        self, replica: StreamReplica, now_ns: int, with_config: bool, with_consumers: bool
    ) -> dict[str, Any]:
        state = replica.machine.stream_state()
        out: dict[str, Any] = {
            "name": replica.name,
            "created": format_rfc3339_nano(replica.assignment.created_ns),
            "cluster": self._group_cluster(replica),
        }
        if with_config:
            out["config"] = replica.config.to_json(node_version(self._node))
        out["state"] = state_json(state, len(replica.consumers))
        if with_consumers and replica.consumers:
            out["consumer_detail"] = [
                self._consumer_detail(consumer, now_ns, with_config)
                for _, consumer in sorted(replica.consumers.items())
                if isinstance(consumer, ConsumerReplica)
            ]
        return out

    def _group_cluster(self, replica: StreamReplica | ConsumerReplica) -> dict[str, Any]:
        """A stream's or consumer's Raft group as jsz shows it from this node: the leader's view of
        its followers' lag where this node leads, else the other voters with nothing known of them.
        `system_account`/`traffic_account` say where nats-server sends Raft traffic (its system
        account); jetraft's goes over the gRPC cluster port, reported as nats-server's default."""
        host, me = self._node.host, self._node.config.name
        info: dict[str, Any] | None = None
        stream_leader = replica.leader if isinstance(replica, StreamReplica) else None
        # a group being removed while this runs: described as a follower would describe it
        with contextlib.suppress(RaftHostError):
            if stream_leader is not None:
                info = stream_leader.cluster_info().to_json()
            elif isinstance(replica, ConsumerReplica) and replica.leader is not None:
                info = dict(replica.leader.view().cluster or {})
        if info is None:
            try:
                status = host.status(replica.group)
            except RaftHostError:
                status = None
            leader = status.leader_id if status is not None else None
            info = {
                "name": CLUSTER_NAME,
                "raft_group": replica.group,
                **({"leader": leader} if leader else {}),
            }
            if status is not None:
                info["replicas"] = [
                    {"name": peer, "current": False, "active": 0, "peer": peer}
                    for peer in status.voters
                    if peer != me
                ]
        replicas = info.pop("replicas", None)
        info["system_account"] = True
        info["traffic_account"] = SYSTEM_ACCOUNT
        if replicas:
            info["replicas"] = replicas
        return info

    def _consumer_detail(self, consumer: ConsumerReplica, now_ns: int, with_config: bool) -> dict[str, Any]:
        view: ConsumerView | None = None
        if consumer.leader is not None:
            with contextlib.suppress(RaftHostError):
                view = consumer.leader.view()
        if view is None:
            view = ConsumerView(
                **consumer.info_view_args(),
                config=consumer.config,
                state=consumer.state,
                num_pending=num_pending(consumer.config, consumer.state, consumer.stream.store),
            )
        info = consumer_info(view, now_ns)
        info["cluster"] = self._group_cluster(consumer)
        if not with_config:
            info.pop("config", None)
        return info

    # -- /healthz ---------------------------------------------------------------------------

    def healthz(self, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body): nats-server's `status` (and `status_code`, `error` when unhealthy),
        plus jetraft's own `node`, `meta_leader` and `streams`, which jetraft's tools read."""
        js_enabled_only = _bool_param(query, "js-enabled-only")
        js_server_only = _bool_param(query, "js-server-only")
        meta = self._node.meta
        leader = meta.leader_id if meta is not None else None
        details = {
            "node": self._node.config.name,
            "meta_leader": leader,
            "streams": sorted(meta.replicas) if meta is not None else [],
        }
        if js_enabled_only:
            # JetStream is enabled on every jetraft node; this asks nothing more
            return 200, {"status": "ok", **details}
        if leader is None:
            error = "JetStream has not established contact with a meta leader"
            return 503, {"status": "unavailable", "status_code": 503, "error": error, **details}
        if not js_server_only and meta is not None:
            behind = [r.name for r in meta.replicas.values() if r.role is not Role.LEADER and not r.caught_up]
            if behind:
                error = f"JetStream stream '{GLOBAL_ACCOUNT} > {behind[0]}' is not current"
                return 503, {"status": "unavailable", "status_code": 503, "error": error, **details}
        return 200, {"status": "ok", **details}


def node_version(node: MonitoredNode) -> str:
    return node.server.version
