"""One jetraft node: the gateway, the Raft host, the JetStream services and the HTTP side, composed.

    clients ── GatewayServer ── Router ── RouteMesh ──┐
                                  │                   ├── one grpc.aio server (cluster port)
    ApiEntry / MetaService / StreamReplicas ── RaftHost ── RaftTransport ──┘   one channel per peer

Start order matters only in one place: the Raft host and the route mesh need
the gRPC server listening before peers dial in, and the meta group starts
once every piece it may call exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING

import grpc
import structlog

from cluster.api.audit import API_AUDIT_SUBJECT, API_PREFIX, UNAUDITED_API_TAILS
from cluster.api.entry import ApiEntry
from cluster.api.no_jetstream import NO_JETSTREAM_QUEUE, NoJetStreamResponder
from cluster.api.prefixes import PREFIX_QUEUE, PrefixMapper, domain_prefix
from cluster.api.subjects import API_QUEUE
from cluster.direct_get.responder import DIRECT_GET_QUEUE
from cluster.meta.service import MetaService
from cluster.node.account_jetstream import AccountJetStream, api_entry_for, claim_home_account
from cluster.node.cluster_auth import call_metadata, cluster_server_interceptors
from cluster.node.cluster_tls import peer_channel, server_credentials
from cluster.node.config import NodeConfig
from cluster.node.damage import mark_clean_stop, open_node_state
from cluster.node.health import HealthJudge, StreamView, observe
from cluster.node.http_server import NodeHttpServer
from cluster.node.monitoring import NodeMonitor
from cluster.node.supervision.worker_share import NodeShare
from cluster.node.sys_requests import USER_INFO_QUEUE, SystemResponder
from cluster.runtime.account_limits import UNLIMITED
from cluster.runtime.context import (
    CLUSTER_NAME,
    INTERNAL_SUBJECT_PREFIXES,
    STREAM_GROUP_OPTIONS,
    NodeContext,
)
from cluster.runtime.internal_requests import InternalRequester
from cluster.runtime.metrics import NodeMetrics
from cluster.runtime.publish_hold import PublishHold
from cluster.runtime.server_limits import NodeHoldings, limit_labels
from cluster.runtime.workers import node_of
from cluster.stream.leader import replica_progress
from gateway.accounts import GLOBAL_ACCOUNT
from gateway.auth import make_authenticator
from gateway.connect_options import RequestInfoPolicy
from gateway.jwt.authenticator import OperatorAuthenticator
from gateway.limits import Limits
from gateway.router import Router
from gateway.routes import RouteMesh, add_route_servicer
from gateway.server import GatewayServer
from gateway.transports.listen import EarlyListeners
from raft.driver import RaftHost, RaftHostError
from raft.transport import add_raft_servicer, grpc_channel_options, grpc_server_options
from raft.types import NodeId, Role

if TYPE_CHECKING:  # imported in start() by a node with a WebSocket port: wsproto is for those alone
    from gateway.transports.websocket import WebSocketListener

log = structlog.get_logger(__name__)

# how often a node recovering from damaged files looks whether it may retire its recovery ledger
RECOVERY_CHECK_INTERVAL = 1.0


def _cluster_info(config: NodeConfig) -> dict[str, str] | None:
    """INFO's `cluster`: the config file's cluster name, else jetraft's, when the node has routes."""
    if config.cluster_name:
        return {"cluster": config.cluster_name}
    return {"cluster": CLUSTER_NAME} if config.peers else None


def _other_api_prefixes(config: NodeConfig) -> list[str]:
    """The prefixes the API is also reached under: the domain's (ADR-19). Prefixes of other accounts come
    from their imports (`accounts { ... }`), mapped by the gateway."""
    return [domain_prefix(config.domain)] if config.domain else []


class Node:
    def __init__(
        self, config: NodeConfig, share: NodeShare | None = None, listeners: EarlyListeners | None = None
    ) -> None:
        """`share`: when this process is one worker of a node, what it shares with the node's other workers
        (cluster/node/supervision/worker_share.py): the count max_connections holds for the whole node,
        what the node's replicas hold for its JetStream limits, and the node's merged monitoring, which
        its `$SYS` answers give. `listeners`: the client and WebSocket ports, if bound before the node's
        imports (gateway/transports/listen.py)."""
        self.config = config
        self.share = share
        self.listeners = listeners or EarlyListeners()
        self.metrics = NodeMetrics(config.name)
        # The API (and its prefixed forms) is answered where the client is connected: one hop to the
        # leader, on the same link as the client's reply interest (see Router.pass_on).
        self.router = Router(
            config.queue_policy,
            local_queues=(API_QUEUE, PREFIX_QUEUE, USER_INFO_QUEUE, NO_JETSTREAM_QUEUE),
            group_policies={DIRECT_GET_QUEUE: config.direct_get_policy},
            same_machine=lambda peer: node_of(peer) == node_of(config.name),
            internal_prefixes=INTERNAL_SUBJECT_PREFIXES,
        )
        # nats-server's `websocket { }` port, when configured (gateway/transports/websocket.py)
        self.websocket: WebSocketListener | None = None
        self.server = GatewayServer(
            self.router,
            name=config.name,
            host=config.host,
            port=config.client_port,
            auth=(
                OperatorAuthenticator(config.jwt_accounts)
                if config.jwt_accounts is not None
                else make_authenticator(config.user, config.password, config.token, config.users, config.no_auth_user)
            ),
            advertise=config.advertise,
            limits=Limits(
                max_payload=config.max_payload,
                auth_timeout=config.auth_timeout,
                max_connections=config.max_connections,
                max_subscriptions=config.max_subscriptions,
            ),
            # nats-server names its cluster in INFO when it has routes (`nats account info` shows it)
            info_extra=_cluster_info(config),
            tls=config.tls,
            accounts=config.accounts,
            reuse_port=config.workers > 1,
            # cids unique across the node's workers, so /connz?cid= and advisories name one client
            client_ids=((config.worker_index or 0) + 1, config.workers),
            shared_connections=share.connections if share is not None else None,
        )
        self.server.system_account = config.system_account
        # a client's JetStream API requests carry its details to the node answering them, for its audit
        self.server.request_info = RequestInfoPolicy(
            prefixes=(API_PREFIX, *(prefix.rstrip(".") + "." for prefix in _other_api_prefixes(config))),
            server=config.name,
            cluster=(_cluster_info(config) or {}).get("cluster", ""),
            unaudited=UNAUDITED_API_TAILS,
            watched=API_AUDIT_SUBJECT,
        )
        self.mesh = RouteMesh(
            self.router,
            config.name,
            config.client_url,
            on_peers_changed=self._peers_changed,
            # its placement tags and its JetStream limits, for the meta leader's placement
            labels=(*config.tags, *limit_labels(config.server_limits)),
        )
        self.grpc_server = grpc.aio.server(
            options=grpc_server_options(), interceptors=cluster_server_interceptors(config.cluster_secret)
        )
        self.channels: dict[str, grpc.aio.Channel] = {}
        # the Raft logs and every file stream's store (per-stream databases of the old layout under streams/
        # move in when opened), checked as they open: damaged ones are set aside and the node recovers
        # from its peers (cluster/node/damage.py)
        state = open_node_state(config.node_data_dir)
        self.engine = state.raft
        self.stream_stores = state.streams
        self.metrics.count_raft_log_writes(lambda: (self.engine.batches, self.engine.fsyncs))
        # group -> (commit, applied, term) as last exported (see refresh_metrics)
        self._exported_positions: dict[str, tuple[int, int, int]] = {}
        # the host's groups_generation at the last scrape that looked for groups gone
        self._exported_generation = -1
        self.host = RaftHost(
            config.name, self.engine, on_leader_change=self._leader_changed, recovery=state.recovery
        )
        self._health_judge = HealthJudge()
        self.monitor = NodeMonitor(self, lambda: self.http.port)
        self.http = NodeHttpServer(
            config.host, config.http_port, self.metrics.registry, self.monitor, before_metrics=self.refresh_metrics
        )
        self.system = SystemResponder(
            self.router,
            self.monitor,
            self.monitor.identity,
            self.server.server_id,
            config.user or "",
            tuple(config.accounts.prefixes.values()) if config.accounts is not None else ("",),
            node=share.endpoints if share is not None else None,
            system_prefix=(
                config.accounts.prefixes[config.system_account]
                if config.accounts is not None and config.system_account is not None
                else ""
            ),
        )
        self.ctx: NodeContext | None = None
        self.meta: MetaService | None = None
        self.api: ApiEntry | None = None
        self.prefixes: PrefixMapper | None = None
        # the other accounts' JetStream API, which answers that they have none
        self.no_jetstream: NoJetStreamResponder | None = None
        # the JetStream of every other account that enables it (the home account's is ctx, meta and api)
        self.account_jetstreams: list[AccountJetStream] = []
        # whether the home account has JetStream: not when accounts are configured and none enables it
        self.home_jetstream = config.accounts is None or config.accounts.home in config.accounts.jetstream_accounts
        # series that exist from the start, so dashboards show 0 rather than no data
        self._slow_consumer_counter = self.metrics.slow_consumers.labels(config.name)
        self._slow_consumers_seen = 0
        self.metrics.route_connections.labels(config.name).set(0)
        self._recovery_task: asyncio.Task[None] | None = None

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(sorted({self.config.name, *self.config.peers}))

    async def start(self) -> None:
        config = self.config
        if self.home_jetstream:
            claim_home_account(config.node_data_dir, config.accounts.home if config.accounts is not None else GLOBAL_ACCOUNT)
        add_raft_servicer(self.grpc_server, self.host.transport)
        add_route_servicer(self.grpc_server, self.mesh)
        listen = f"{config.host}:{config.cluster_port}"
        if config.cluster_tls is None:
            bound = self.grpc_server.add_insecure_port(listen)
        else:
            bound = self.grpc_server.add_secure_port(listen, server_credentials(config.cluster_tls))
        if not bound:
            raise OSError(f"cannot listen on {listen}")
        await self.grpc_server.start()
        await self.server.start(self.listeners.take_client())
        if config.websocket is not None:
            from gateway.transports.websocket import WebSocketListener

            self.websocket = WebSocketListener(self.server, config.websocket, config.host)
            await self.websocket.start(self.listeners.take_websocket())
        for peer, address in sorted(config.peers.items()):
            channel = peer_channel(address, peer, grpc_channel_options(), config.cluster_tls)
            self.channels[peer] = channel
            proof = call_metadata(config.cluster_secret)
            self.host.transport.add_peer(peer, channel, call_metadata=proof)
            self.mesh.add_peer(peer, channel, call_metadata=proof)
        self.ctx = NodeContext(
            name=config.name,
            router=self.router,
            host=self.host,
            metrics=self.metrics,
            requester=InternalRequester(self.router, config.name),
            data_dir=config.node_data_dir,
            members=self.members,
            tags=tuple(config.tags),
            domain=config.domain or "",
            account=config.accounts.home if config.accounts is not None else GLOBAL_ACCOUNT,
            account_limits=config.jetstream_limits,
            server_limits=config.server_limits,
            holdings=NodeHoldings(self.share.holdings if self.share is not None else None),
            stream_group_options=dataclasses.replace(
                STREAM_GROUP_OPTIONS,
                snapshot_interval=config.stream_snapshot_interval,
                compact_keep=config.stream_compact_keep,
            ),
            quiesce=config.quiesce,
            stream_stores=self.stream_stores,
            # off by default: a publish that meets no leader is answered 503 at once, as by nats-server
            publish_hold=(
                PublishHold(self.router, wait=config.publish_hold, metrics=self.metrics)
                if config.publish_hold > 0
                else None
            ),
        )
        self.meta = MetaService(self.ctx)
        self.api = api_entry_for(self.ctx, self.meta)
        accounts = config.accounts
        if accounts is not None:
            # the longest tag first: a group is the account's whose tag its name begins with
            self.account_jetstreams = [
                AccountJetStream(
                    self.ctx,
                    self.router,
                    account,
                    config.jetstream_account_limits.get(account, UNLIMITED),
                    accounts.home,
                    [domain_prefix(config.domain)] if config.domain else [],
                )
                for account in sorted(accounts.jetstream_accounts, key=len, reverse=True)
                if account != accounts.home
            ]
        await self.host.start()
        # The home account's meta group runs even when the account has no JetStream (its API is then the
        # no-JetStream responder's): /healthz and the monitoring endpoints read it.
        self.meta.start()
        if self.home_jetstream:
            self.api.open()
        for account_jetstream in self.account_jetstreams:
            account_jetstream.start()
        if self.home_jetstream:
            self.prefixes = PrefixMapper(self.ctx, _other_api_prefixes(config))
            self.prefixes.open()
        if accounts is not None and (len(accounts.accounts) > 1 or not self.home_jetstream):
            self.no_jetstream = NoJetStreamResponder(
                self.ctx, accounts.jetstream_accounts, home=None if self.home_jetstream else accounts.home
            )
            self.no_jetstream.open()
        await self.http.start()
        self.system.open()
        if self.host.recovery is not None:
            self._recovery_task = asyncio.get_running_loop().create_task(self._retire_recovery())
        log.info(
            "node_started",
            node=config.name,
            client=self.server.client_url,
            cluster_port=config.cluster_port,
            http_port=self.http.port,
            peers=sorted(config.peers),
            cluster_authenticated=config.cluster_secret is not None,
            cluster_tls=config.cluster_tls is not None,
        )

    async def stop(self) -> None:
        log.info("node_stopping", node=self.config.name)
        if self._recovery_task is not None:
            self._recovery_task.cancel()
        await self.server.stop()  # its clients, the WebSocket port's too
        if self.websocket is not None:
            await self.websocket.stop()
        self.system.close()
        if self.api is not None:
            self.api.close()
        if self.prefixes is not None:
            self.prefixes.close()
        if self.no_jetstream is not None:
            self.no_jetstream.close()
        for account_jetstream in self.account_jetstreams:
            await account_jetstream.stop()
        if self.meta is not None:
            await self.meta.stop()
        if self.ctx is not None:
            await self.ctx.cancel_tasks()
            self.ctx.requester.close()
        await self.host.stop()
        await self.mesh.close()
        await self.grpc_server.stop(grace=0.5)
        for channel in self.channels.values():
            await channel.close()
        self.engine.close()
        # after the replicas closed their stores (meta.stop); one still opening is closed with it
        await asyncio.to_thread(self.stream_stores.close)
        if self.stream_stores.damage_seen is None:
            # damage met while running: the next start reads every store and repairs from the peers
            mark_clean_stop(self.config.node_data_dir)
        await self.http.stop()
        if self.share is not None:
            await self.share.close()

    # -- callbacks ---------------------------------------------------------------------------

    def _peers_changed(self, urls: dict[str, str]) -> None:
        self.server.set_cluster_urls(urls.values())
        self.metrics.route_connections.labels(self.config.name).set(len(urls))

    def _leader_changed(self, group: str, leader: NodeId | None, role: Role, term: int) -> None:
        meta = self.meta
        if meta is None:
            return
        for account_jetstream in self.account_jetstreams:
            if group.startswith(account_jetstream.tag):
                account_jetstream.leader_changed(group, leader, role, term)
                return
        meta.group_leader_changed(group, leader, role, term)

    def serving_problems(self) -> tuple[list[str], dict[str, bool]]:
        """What keeps this node's clients from being served (routes to most peers down, a stream here
        without a reachable leader) for longer than the health grace (cluster/node/health.py), and
        which peers the routes reach; /healthz reports them (cluster/node/jetstream_monitor.py)."""
        meta = self.meta
        replicas = list(meta.replicas.values()) if meta is not None else []
        for account_jetstream in self.account_jetstreams:  # every account's streams are served from here
            replicas += account_jetstream.meta.replicas.values()
        peers = sorted(self.config.peers)
        reachable = {peer: self.mesh.reachable(peer) for peer in peers}
        views = [
            StreamView(replica.assignment.tag + replica.name, replica.leader_id, replica.role is Role.LEADER)
            for replica in replicas
            if not replica.stopped
        ]
        problems = self._health_judge.judge(
            observe(self.config.name, peers, reachable, views), time.monotonic()
        )
        damage = self.stream_stores.damage_seen
        if damage is not None:
            problems.append(f"{damage}; restart the node to repair it from its peers")
        # not a passing moment: until caught up this node cannot vote, so it cannot stand in for a peer
        problems += [
            f"raft group {group}: recovering from damaged files, not voting until its leader has caught it up"
            for group in self.host.recovering_groups()
        ]
        return problems, reachable

    def refresh_metrics(self) -> None:
        """The gauges read from the node's state (connections, each group's indexes, each replica's lag
        and staleness), set when /metrics is scraped: nothing runs for them in between, so idle groups
        cost nothing here."""
        metrics, node = self.metrics, self.config.name
        metrics.client_connections.labels(node).set(len(self.server.clients))
        slow = self.server.stats.slow_consumers
        if slow > self._slow_consumers_seen:
            self._slow_consumer_counter.inc(slow - self._slow_consumers_seen)
            self._slow_consumers_seen = slow
        # only what moved since the last scrape: with thousands of groups, building each one's status and
        # looking up three gauges' labels took tens of ms of the loop
        exported = self._exported_positions
        for group, commit, applied, term in self.host.positions():
            if exported.get(group) != (commit, applied, term):
                exported[group] = (commit, applied, term)
                metrics.raft_commit_index.labels(group, node).set(commit)
                metrics.raft_applied_index.labels(group, node).set(applied)
                metrics.raft_term.labels(group, node).set(term)
        if self.host.groups_generation != self._exported_generation:
            # groups started or stopped since the last scrape: the series of those gone go with them
            self._exported_generation = self.host.groups_generation
            live = set(self.host.groups())
            for gone in [group for group in exported if group not in live]:
                del exported[gone]
            metrics.forget_groups_except(live)
        if self.meta is None:
            return
        now = time.time_ns()
        replicas = list(self.meta.replicas.values())
        for account_jetstream in self.account_jetstreams:
            replicas += account_jetstream.meta.replicas.values()
        for replica in replicas:
            replica.report_staleness()
            replica.report_metrics()
            # a replica's lag is exported by its leader, for each follower: a stream of one has none
            if replica.role is not Role.LEADER or replica.stopped or len(replica.assignment.peers) < 2:
                continue
            with contextlib.suppress(RaftHostError):
                last = self.host.status(replica.group).last_index
                for peer, (match, _active) in replica_progress(replica).items():
                    if peer == node:
                        continue
                    lag = max(last - match, 0)
                    metrics.replica_lag_messages.labels(replica.metric_label, peer, "follower").set(lag)
                    last_ts = replica.machine.store.state().last_ts_ns if lag else now
                    metrics.replica_lag_seconds.labels(replica.metric_label, peer, "follower").set(
                        0 if lag == 0 else max(now - last_ts, 0) / 1e9
                    )

    async def _retire_recovery(self) -> None:
        """While the node recovers from damaged files: once it is current with the meta leader (every
        replica assigned here started, so these are all the groups it had) and every group has caught
        up, retire the recovery ledger, so that groups created later vote at once."""
        node = self.config.name
        while self.host.recovery is not None:
            await asyncio.sleep(RECOVERY_CHECK_INTERVAL)
            every_meta_current = all(account.meta.current for account in self.account_jetstreams)
            if self.meta is not None and self.meta.current and every_meta_current and self.host.retire_recovery():
                log.info("raft_recovery_complete", node=node)
