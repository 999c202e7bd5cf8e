"""What every JetStream service of a node shares: its name, router, Raft host, metrics, task set."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog

from cluster.runtime.account_limits import UNLIMITED, JetStreamAccountLimits
from cluster.runtime.account_router import AccountRouter, ServiceRouter
from cluster.runtime.account_usage import AccountUsage, ApiCounts
from cluster.runtime.accounts_placement import AccountsPlacement
from cluster.runtime.internal_requests import INTERNAL_INBOX_PREFIX, InternalRequester
from cluster.runtime.meta_progress import MetaProgress
from cluster.runtime.metrics import NodeMetrics
from cluster.runtime.publish_hold import PublishHold
from cluster.runtime.server_limits import NO_SERVER_LIMITS, NodeHoldings, ServerJetStreamLimits
from cluster.runtime.workers import node_count
from gateway.server import NATS_COMPAT_VERSION
from raft.driver import GroupOptions, RaftHost
from storage.rocks_engine import StreamStoreEngine

log = structlog.get_logger(__name__)

META_GROUP = "_meta_"
# 20 ticks of 50 ms: a node misses a leader only after 1-2 s of silence, so a busy
# event loop on a loaded 2-core machine does not set off needless elections.
# Heartbeats every 4 ticks (200 ms), five per election timeout: every gRPC frame
# costs a few hundred microseconds of CPU on each side, and a heartbeat at every
# tick kept an idle node with three streams at ~7% CPU (under 3% now, with the
# heartbeats of all groups on the same ticks: RaftConfig.tick_phase). Nothing waits
# for one: appends and commit notices carry the commit index, and a ReadIndex
# sends its own round at once.
HEARTBEAT_TICK = 4
# Leader leases (raft/core.py RaftConfig.read_lease): a stream leader answers STREAM.MSG.GET (and every
# other ReadIndex) at once for 0.9 s after a quorum answered a round, instead of a heartbeat round per read,
# which cost a coherent read about 1.3 ms here (bench/README.md). Linearizable unless one host's clock runs
# faster than another's by more than a tenth (LEASE_MARGIN_TICKS of the election timeout).
GROUP_OPTIONS = GroupOptions(election_tick=20, heartbeat_tick=HEARTBEAT_TICK, read_lease=True)
# A stream group applies at most this much of its committed entries per loop iteration: under load the
# PubAcks of one slice reach their clients while the next is applied, so clients and the leader work
# side by side instead of in turns (pub_async, 256 in flight: ~4.6k -> ~5.5k msgs/s, bench/README.md).
# Not for every group: with no client waiting on the results (raft_bench) smaller slices only cost more
# iterations and fsyncs.
STREAM_APPLY_SLICE_BYTES = 16 * 1024
# Stream groups differ from the others only in that and in how they snapshot: derived, so a timing
# option cannot be left out.
STREAM_GROUP_OPTIONS = replace(
    GROUP_OPTIONS,
    snapshot_interval=20_000,
    compact_keep=5_000,
    max_committed_size_per_ready=STREAM_APPLY_SLICE_BYTES,
)
# A memory stream's snapshot is its whole store (0.2 s per 50,000 messages here, on the event loop),
# so those groups snapshot and compact rarely; their logs are cheap to keep.
MEMORY_STREAM_GROUP_OPTIONS = replace(STREAM_GROUP_OPTIONS, snapshot_interval=100_000, compact_keep=10_000)
CLUSTER_NAME = "jetraft"
# The subjects of the nodes' own traffic (leaders' requests, replicas' beacons, internal inboxes): the
# router keeps clients out of them, as nats-server keeps them in its system account (gateway/router.py).
INTERNAL_SUBJECT_PREFIXES = ("$JSR.", INTERNAL_INBOX_PREFIX)
# the account nats-server carries Raft traffic in; STREAM.INFO and /jsz name it (see ClusterInfo)
SYSTEM_ACCOUNT = "$SYS"


@dataclass
class NodeContext:
    name: str
    # the home account's services use the router itself, another JetStream account's its view of it
    router: ServiceRouter
    host: RaftHost
    metrics: NodeMetrics
    requester: InternalRequester
    data_dir: Path
    # every member of the cluster (this one included), sorted: nodes, or their workers (runtime/workers.py)
    members: tuple[str, ...]
    tags: tuple[str, ...] = ()
    domain: str = ""
    # what the JetStream account may use (the same on every node: each reads the same config file)
    account_limits: JetStreamAccountLimits = UNLIMITED
    # what the account's streams hold, as the nodes leading them last said (checked against those limits)
    account_usage: AccountUsage = field(default_factory=AccountUsage)
    api_counts: ApiCounts = field(default_factory=ApiCounts)
    # what this node's JetStream may hold (its own config's `jetstream { max_memory_store, ... }`), and
    # what its replicas hold now (runtime/server_limits.py)
    server_limits: ServerJetStreamLimits = NO_SERVER_LIMITS
    holdings: NodeHoldings = field(default_factory=NodeHoldings)
    # A file-stored stream's snapshot is a marker after a store sync (cluster/stream/snapshot_marker.py), cheap
    # enough to take often, which keeps its Raft log short (NodeConfig.stream_snapshot_interval).
    stream_group_options: GroupOptions = STREAM_GROUP_OPTIONS
    # Idle groups quiesce (raft/core.py `quiesced`, NodeConfig.quiesce): a thousand idle streams then
    # cost the keepalive frames between each pair of nodes, not a thousand groups' heartbeats.
    quiesce: bool = True
    server_version: str = NATS_COMPAT_VERSION
    # The one RocksDB database of every file-storage stream replica on this node (storage/rocks_engine.py);
    # the node closes it on stop, after its replicas. None where a node has no file storage (unit tests).
    stream_stores: StreamStoreEngine | None = None
    # how far this node's replicas have been given the meta group's assignments (meta_progress.py)
    meta_progress: MetaProgress = field(default_factory=MetaProgress)
    # The JetStream account these services serve (gateway/accounts.py), and what its Raft groups' and
    # stores' names begin with: nothing for the home account (so one-account data opens as before),
    # `<account>/` for another, so two accounts' streams of one name never share a group or a store.
    account: str = "$G"
    account_tag: str = ""
    # every account's streams on this node, for placement and the node's byte limits (shared by the
    # accounts' contexts: each is a copy of the home context)
    accounts_placement: AccountsPlacement = field(default_factory=AccountsPlacement)
    # the node's one hold for clients' publishes on a stream's subject that meet no leader yet
    # (runtime/publish_hold.py): every account's meta service tells it its streams' subjects.
    # None unless the node runs with `--publish-hold`: such a publish is then answered 503 at once.
    publish_hold: PublishHold | None = None
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    # (base options, quiescence) -> the same with that quiescence (see group_options): a handful of bases
    _options_with_quiesce: dict[tuple[GroupOptions, bool], GroupOptions] = field(default_factory=dict)

    @property
    def standalone(self) -> bool:
        """A node without peers: it answers as a nats-server without a `cluster` block does (no
        `cluster` object in create, update and list replies, nor in a consumer's). A several-worker node
        alone is one too: its workers are members of a cluster among themselves, but a client sees one
        server on one machine, as with one worker."""
        return node_count(self.members) == 1

    @property
    def meta_group(self) -> str:
        """The Raft group of this account's meta assignments."""
        return self.account_tag + META_GROUP

    def group_options(self, base: GroupOptions) -> GroupOptions:
        """`base` with this node's quiescence setting (made once per base: every group a node starts asks)."""
        if base.quiesce == self.quiesce:
            return base
        key = (base, self.quiesce)
        options = self._options_with_quiesce.get(key)
        if options is None:
            options = self._options_with_quiesce[key] = replace(base, quiesce=self.quiesce)
        return options

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run `coro` in the background; its failure is logged, never lost, never fatal."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background_task_failed", task=task.get_name(), exc_info=task.exception())

    async def cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def router_subject(self, subject: str) -> str:
        """`subject` as the router holds it: as it is for the home account, in the account's space else."""
        router = self.router
        return router.to_router(subject) if isinstance(router, AccountRouter) else subject

    def reply(self, subject: str | None, payload: bytes, headers: bytes | None = None) -> None:
        if subject:
            self.router.publish(subject, payload, None, headers)

    def advise(self, subject: str, build: Callable[[], bytes]) -> None:
        """Publish the advisory `build()` makes on `subject`, if anyone here or on a peer listens: as
        nats-server's publishAdvisory, which does not encode one nobody would receive (each stream
        create's STREAM.CREATED cost the meta leader ~20 us of JSON for no one)."""
        router = self.router
        if router.has_interest(subject):
            router.publish(subject, build())

    def api_reply(self, subject: str | None, payload: bytes) -> None:
        """A JetStream API response: counted for ACCOUNT INFO when it goes to a client (not to one of
        this cluster's own requests, whose asker answers the client and counts it then)."""
        if subject and not subject.startswith(INTERNAL_INBOX_PREFIX):
            self.api_counts.count(payload)
        self.reply(subject, payload)
