"""JetStream as nats-server's monitoring shows it from one node: /jsz, /healthz and the JetStream parts
of /varz (config, usage, the meta group), from the replicas this node holds."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster.api.entry import ApiEntry
from cluster.consumer.api import ConsumerView, consumer_info
from cluster.consumer.delivery import num_pending
from cluster.consumer.replica import ConsumerReplica
from cluster.meta.account_limits import reserved_bytes
from cluster.meta.service import MetaService
from cluster.node.http_server import QueryError, bool_param
from cluster.node.monitored_node import MonitoredNode
from cluster.runtime.account_limits import JetStreamAccountLimits
from cluster.runtime.context import CLUSTER_NAME, META_GROUP
from cluster.stream.info import API_LEVEL, state_json
from cluster.stream.replica import StreamReplica
from raft.driver import RaftHostError
from raft.types import Role
from storage.nats_time import ZERO_TIME, format_rfc3339_nano

DEFAULT_MAX_CONSUMERS = 1000
# nats-server's "no reservation" (math.MaxUint64) for an account's reserved memory and storage
NO_RESERVATION = 2**64 - 1
# nats-server's sync_interval default, which it also reports beside `sync_always: true` when configured
# to fsync every write: what a jetraft node does (each Raft log write is synced before it is acknowledged;
# a stream's `persist_mode: async` excepted, as on nats-server)
SYNC_INTERVAL_NS = 120_000_000_000


@dataclass(frozen=True, slots=True)
class _AccountView:
    """One JetStream account's services on this node, as the endpoints read them."""

    name: str
    meta: MetaService
    api: ApiEntry | None
    limits: JetStreamAccountLimits


class JetStreamMonitor:
    """Builds /jsz and /healthz, and /varz's `jetstream` object, from this node's replicas and groups."""

    def __init__(self, node: MonitoredNode) -> None:
        self._node = node

    def config(self) -> dict[str, Any]:
        """The `config` object: limits, store directory, sync interval, domain."""
        # the node's own `jetstream { max_memory_store, max_file_store }`, else nats-server's defaults (75% of
        # memory and of the disk available at start), which it enforces as nats-server does
        limits = self._node.config.server_limits
        return {
            "max_memory": limits.max_memory,
            "max_storage": limits.max_storage,
            "store_dir": str(self._node.config.node_data_dir),
            "sync_interval": SYNC_INTERVAL_NS,
            "sync_always": True,
            **({"domain": self._node.config.domain} if self._node.config.domain else {}),
            "strict": True,
        }

    def _accounts(self) -> list[_AccountView]:
        """Every JetStream account's services on this node, by name (the home account's among them)."""
        node = self._node
        if node.meta is None:
            return []
        accounts = [
            _AccountView(other.account, other.meta, other.api, other.ctx.account_limits)
            for other in node.account_jetstreams
        ]
        if node.home_jetstream:
            accounts.append(_AccountView(node.meta.ctx.account, node.meta, node.api, node.config.jetstream_limits))
        return sorted(accounts, key=lambda account: account.name)

    def _replicas(self, account: _AccountView | None = None) -> list[StreamReplica]:
        """The replicas this node holds of `account`'s streams, or of every account's."""
        accounts = self._accounts() if account is None else [account]
        return [r for a in accounts for r in sorted(a.meta.replicas.values(), key=lambda r: r.name)]

    def _usage(self, account: _AccountView | None = None) -> tuple[int, int]:
        """(memory, storage) bytes of the streams this node holds a replica of."""
        memory = storage = 0
        for replica in self._replicas(account):
            size = replica.machine.store.state().bytes
            if replica.config.storage.value == "memory":
                memory += size
            else:
                storage += size
        return memory, storage

    def _reserved(self) -> tuple[int, int]:
        """(memory, storage) the streams this node holds a replica of set aside: their max_bytes."""
        return reserved_bytes(replica.config for replica in self._replicas())

    def stats(self) -> dict[str, Any]:
        memory, storage = self._usage()
        reserved_memory, reserved_storage = self._reserved()
        apis = [account.api for account in self._accounts() if account.api is not None]
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
            "reserved_memory": reserved_memory,
            "reserved_storage": reserved_storage,
            "accounts": len(self._accounts()),
            "ha_assets": ha_assets,
            "api": {
                "level": API_LEVEL,
                "total": sum(api.requests for api in apis),
                "errors": sum(api.errors for api in apis),
            },
        }

    def meta_cluster(self) -> dict[str, Any] | None:
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
        with_streams = bool_param(query, "streams")
        with_consumers = bool_param(query, "consumers")
        with_config = bool_param(query, "config")
        leader_only = bool_param(query, "leader-only")
        accounts = bool_param(query, "accounts")
        replicas = self._replicas()
        messages = sum(r.machine.store.state().messages for r in replicas)
        bytes_ = sum(r.machine.store.state().bytes for r in replicas)
        consumers = sum(len(r.consumers) for r in replicas)
        meta = self.meta_cluster()
        if leader_only and (meta is None or meta.get("leader") != node.config.name) and node.config.peers:
            raise QueryError("filtered response: not leader")
        body: dict[str, Any] = {
            **self.stats(),
            "server_id": node.server.server_id,
            "now": format_rfc3339_nano(now),
            "config": self.config(),
            "limits": {"default_max_consumers": DEFAULT_MAX_CONSUMERS},
            "streams": len(replicas),
            "consumers": consumers,
            "messages": messages,
            "bytes": bytes_,
        }
        if meta is not None:
            body["meta_cluster"] = meta
        if accounts or with_streams or with_consumers or with_config:
            body["account_details"] = [
                self._account_detail(account, now, with_streams, with_consumers, with_config)
                for account in self._accounts()
            ]
        body["total"] = len(self._accounts())
        return body

    def _account_detail(
        self, account: _AccountView, now: int, with_streams: bool, with_consumers: bool, with_config: bool
    ) -> dict[str, Any]:
        memory, storage = self._usage(account)
        limits = account.limits
        # the account's API answers, from every node (as ACCOUNT INFO)
        api_total, api_errors = account.meta.ctx.api_counts.cluster_totals()
        detail: dict[str, Any] = {
            "name": account.name,
            "id": account.name,
            "memory": memory,
            "storage": storage,
            # as nats-server: the account's limits, written as unsigned (no limit: math.MaxUint64)
            "reserved_memory": limits.max_memory & NO_RESERVATION,
            "reserved_storage": limits.max_storage & NO_RESERVATION,
            "accounts": 0,
            "ha_assets": 0,
            "api": {"level": 0, "total": api_total, "errors": api_errors},
        }
        if with_streams or with_consumers:
            detail["stream_detail"] = [
                self._stream_detail(r, now, with_config, with_consumers) for r in self._replicas(account)
            ]
        return detail

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
            out["config"] = replica.config.to_json(self._node.server.version)
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
        info["traffic_account"] = self._node.config.system_account_name
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
        js_enabled_only = bool_param(query, "js-enabled-only")
        js_server_only = bool_param(query, "js-server-only")
        meta = self._node.meta
        leader = meta.leader_id if meta is not None else None
        problems, routes = self._node.serving_problems()
        details = {
            "node": self._node.config.name,
            "meta_leader": leader,
            "streams": sorted(meta.replicas) if meta is not None else [],
            "routes": routes,
            "problems": problems,
        }
        if js_enabled_only:
            # JetStream is enabled on every jetraft node; this asks nothing more
            return 200, {"status": "ok", **details}
        metas = [meta, *(account.meta for account in self._node.account_jetstreams)] if meta is not None else []
        if leader is None or any(other.leader_id is None for other in metas):
            error = "JetStream has not established contact with a meta leader"
            return 503, {"status": "unavailable", "status_code": 503, "error": error, **details}
        if any(not other.current for other in metas):
            # before, this node's streams are not all known: healthy now, it would report a stream it
            # has not caught up with as soon as it learns of it
            error = "JetStream is not current with the meta leader"
            return 503, {"status": "unavailable", "status_code": 503, "error": error, **details}
        if problems:
            # what keeps this node's clients from being served, for longer than the health grace
            return 503, {"status": "unavailable", "status_code": 503, "error": problems[0], **details}
        if not js_server_only:
            # every account's streams, each named with its account as nats-server names them
            behind = [
                (other.ctx.account, r.name)
                for other in metas
                for r in other.replicas.values()
                if r.role is not Role.LEADER and not r.caught_up
            ]
            if behind:
                error = f"JetStream stream '{behind[0][0]} > {behind[0][1]}' is not current"
                return 503, {"status": "unavailable", "status_code": 503, "error": error, **details}
        return 200, {"status": "ok", **details}
