"""One stream's replica on this node: store, state machine, Raft group, and the duties of its role.

Every replica applies committed entries to its own StreamStore and, once it
has caught up after (re)start, answers Direct Gets from it. The replica that
leads the group also takes publishes and the per-stream API (see
`cluster/stream/leader.py`).

The replica is the driver's `StateMachine` for its group: it wraps the
deterministic `StreamStateMachine` and, after each apply, wakes
read-your-writes waiters and updates the metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import structlog

from cluster.api.subjects import ApiOp, stream_subject
from cluster.direct_get.answer import ResponderRole
from cluster.direct_get.beacons import PositionBeacons
from cluster.direct_get.positions import LedStream, presence_subject
from cluster.direct_get.responder import DirectGetResponder
from cluster.runtime.catch_up import caught_up
from cluster.runtime.context import MEMORY_STREAM_GROUP_OPTIONS, NodeContext
from cluster.runtime.metrics import LabelledChildren
from cluster.stream.assignment import StreamAssignment
from cluster.stream.config import PersistMode, Retention, StorageType, StreamConfig, stream_config_from_json
from cluster.stream.entries import DeleteMsg, Purge
from cluster.stream.leader import CopierFactory, StreamLeader
from cluster.stream.machine import (
    BatchStored,
    ConfigApplied,
    Deleted,
    Expired,
    PurgeDone,
    Stored,
    StreamStateMachine,
    store_config_for,
)
from cluster.stream.retention import Interest, interest_removals, workqueue_removals
from cluster.stream.snapshot_marker import is_store_marker, store_marker
from gateway.router import Message, Subscription
from raft.driver import GroupNotFoundError, GroupOptions, NotLeaderError, RaftHostError
from raft.types import Entry, NodeId, Role, Snapshot
from storage.errors import MsgNotFoundError
from storage.interface import StreamStore
from storage.memory import MemoryStreamStore
from storage.rocks import RocksStreamStore

log = structlog.get_logger(__name__)

# How long one catch-up attempt (a ReadIndex through the leader) may take before retrying.
CATCH_UP_ATTEMPT_TIMEOUT = 2.0
# messages read at a time when a consumer leaves an interest stream and what it alone wanted goes
INTEREST_SCAN_BATCH = 1000


def group_options_for(config: StreamConfig, base: GroupOptions) -> GroupOptions:
    """The stream's Raft group options: `persist_mode: async` (an R1 file stream, as nats-server
    allows it) acknowledges a write once it is in the OS's page cache, without waiting for an fsync,
    as nats-server's async flushing does: a power loss can take acknowledged writes with it."""
    if config.persist_mode is PersistMode.ASYNC:
        return dataclasses.replace(base, sync=False)
    return base


class AttachedConsumer(Protocol):
    """A consumer's replica on this node, as its stream's replica sees it (cluster/consumer/replica.py)."""

    def stream_stored(self) -> None:
        """The stream applied new entries: a leader may have messages to deliver."""

    def stream_purged(self, purge: PurgeDone) -> None:
        """The stream applied a purge: a leader moves its consumer's positions past it."""

    def stream_removed(self, seqs: list[int]) -> None:
        """The stream removed these messages one by one (a delete, limits, expiry): a leader drops
        those still waiting for an ack."""

    async def stop(self, delete: bool) -> None: ...

    def interest(self) -> Interest:
        """Which messages it still needs, for interest retention."""


def removed_by(results: Sequence[Any]) -> list[int]:
    """The messages that applied entries removed one at a time: deleted, or taken by limits (with a
    store, a rollup, an expiry or a config update). Purges are told apart (`take_purges`)."""
    removed: list[int] = []
    for result in results:
        kind = type(result)
        if kind is Stored or kind is Expired or kind is ConfigApplied:
            removed.extend(result.removed)
        elif kind is Deleted:
            removed.append(result.seq)
        elif kind is BatchStored:
            for stored in result.stored:
                removed.extend(stored.removed)
    return removed


def store_name_for(assignment: StreamAssignment) -> str:
    """The replica's store in the node's engine: a stream deleted and created again gets a new one."""
    return f"{assignment.tag}{assignment.name}-{assignment.created_ns}"


def open_store(ctx: NodeContext, assignment: StreamAssignment, config: StreamConfig | None = None) -> StreamStore:
    """The replica's store, opened (for file storage, read from the node's RocksDB database: blocking).
    `config`: the assignment's config already parsed, if the caller has it."""
    if config is None:
        config = stream_config_from_json(assignment.config)
    store_config = store_config_for(config)
    if config.storage is StorageType.MEMORY:
        return MemoryStreamStore(store_config)
    if ctx.stream_stores is None:
        raise RuntimeError(f"stream {assignment.name}: file storage, but this node has no stream store engine")
    return RocksStreamStore(ctx.stream_stores, store_name_for(assignment), store_config)


def store_is_new(ctx: NodeContext, assignment: StreamAssignment) -> bool:
    """Whether the replica's store holds nothing yet, so opening it reads nothing (quick enough for the
    event loop): a file store this node never wrote, or a memory store (never in the engine)."""
    return ctx.stream_stores is None or not ctx.stream_stores.holds(store_name_for(assignment))


class StreamReplica:
    def __init__(
        self,
        ctx: NodeContext,
        assignment: StreamAssignment,
        copiers: CopierFactory,
        positions: PositionBeacons,
        store: StreamStore | None = None,
        config: StreamConfig | None = None,
    ) -> None:
        """`store`: opened already by `open_store`, off the event loop (the meta service does that).
        `positions`: the node's beacons, which carry this stream's position while it leads here and
        give its staleness while it follows. `config`: `assignment.config` already parsed, if the
        caller has it (a create parses it once, where it took five parses)."""
        self.ctx = ctx
        self.positions = positions
        # what copies an origin into this stream while it leads, if it is a mirror or has sources
        self.copiers = copiers
        self.assignment = assignment
        self.name = assignment.name
        # its `stream` label in /metrics: the name, after the account's tag for an account not home, so two
        # accounts' streams of one name are two series
        self.metric_label = assignment.tag + assignment.name
        self.group = assignment.group
        if config is None:
            config = stream_config_from_json(assignment.config)
        # the assignment's config dict and its parse (see assigned_config)
        self._assigned: tuple[dict[str, Any], StreamConfig] = (assignment.config, config)
        self.config: StreamConfig = config
        self.store_name = store_name_for(assignment)
        self.store: StreamStore = store if store is not None else open_store(ctx, assignment, config)
        # Applying needs no fsync of its own: the Raft log is durable, and a store write group
        # lost in a crash takes its applied index with it, so the entries replay. The one thing
        # that must not happen, compacting the log past what the store durably holds, is
        # prevented in `snapshot`, which syncs the store before the driver compacts.
        self.machine = StreamStateMachine(self.store, self.config, sync_writes=False)
        self.role = Role.FOLLOWER
        self.leader_id: NodeId | None = None
        self._seq_waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._leader: StreamLeader | None = None
        self._catch_up: asyncio.Task[Any] | None = None
        self.stopped = False
        self.consumers: dict[str, AttachedConsumer] = {}
        self.expected_consumers = 0
        # The group's Raft role series and the stream's last sequence are kept in plain numbers and
        # exported when /metrics is scraped (`report_metrics`): a new stream creates no series until
        # then (their label lookups were a twentieth of a stream create's CPU), and an apply sets none.
        self._leader_changes = 0
        self._elections = 0
        # what the last scrape exported: (role, leader changes, elections, responder role, last seq)
        self._reported: tuple[Role, int, int, ResponderRole, int] | None = None
        self._raft_children: tuple[Any, Any] | None = None
        self._elections_child: Any = None
        self._last_seq_children = LabelledChildren(ctx.metrics.stream_last_seq, self.metric_label, ctx.name)
        self._caught_up = False
        # jetraft.max_direct_lag: a follower further behind than this stops answering Direct Gets
        self._started_ns = time.time_ns()
        self._too_stale = False
        self._lag_gauge = LabelledChildren(ctx.metrics.replica_lag_seconds, self.metric_label, ctx.name)
        self._bound_watched = False
        self._presence_sub: Subscription | None = None
        self.responder = DirectGetResponder(
            ctx,
            answers_for=self.name,
            store=lambda: self.store,
            last_seq=lambda: self.machine.last_seq,
            wait_for_seq=self.wait_for_seq,
            role=self.responder_role,
            reply_stream=self.name,
        )
        # A mirror_direct mirror also answers its origin's Direct Gets (naming itself in the replies).
        self.origin_responder: DirectGetResponder | None = None
        if self.config.mirror is not None and self.config.mirror_direct:
            self.origin_responder = DirectGetResponder(
                ctx,
                answers_for=self.config.mirror.name,
                store=lambda: self.store,
                last_seq=lambda: self.machine.last_seq,
                wait_for_seq=self.wait_for_seq,
                role=self.responder_role,
                reply_stream=self.name,
            )

    # -- the driver's StateMachine -------------------------------------------------------

    @property
    def applied_index(self) -> int:
        return self.machine.applied_index

    def apply(self, entries: Sequence[Entry]) -> Sequence[Any]:
        results = self.machine.apply(entries)
        if self.machine.purges:
            for purge in self.machine.take_purges():
                for consumer in self.consumers.values():
                    consumer.stream_purged(purge)
        if self.consumers:
            removed = removed_by(results)
            if removed:
                for consumer in self.consumers.values():
                    consumer.stream_removed(removed)
        if self._leader is not None:
            self._leader.applied(results)
        self._after_apply()
        return results

    def snapshot(self) -> bytes:
        if isinstance(self.store, RocksStreamStore):
            # The store is durable once synced, so the log may be compacted behind it and the snapshot
            # need not copy it: a follower that needs the data gets an image built when it is sent
            # (`snapshot_image`). Copying a store of a million messages here stalled the loop for
            # seconds, long enough for followers to call elections.
            self.store.sync()
            return store_marker(self.machine.applied_index)
        return self.machine.snapshot()

    def snapshot_image(self) -> Callable[[], bytes] | None:
        if not isinstance(self.store, RocksStreamStore):
            return None
        frozen = self.store.frozen_snapshot()
        return lambda: b"".join(frozen())

    def restore(self, snapshot: Snapshot) -> None:
        if is_store_marker(snapshot.data):
            # Only this node's own marker, read back at start, can get here: its store lost writes it
            # had synced before the marker was taken. Refuse rather than serve a store with a hole.
            raise RuntimeError(
                f"stream {self.name}: its store {self.store_name} is behind its own Raft snapshot "
                f"({self.machine.applied_index} < {snapshot.index}); remove the replica to resync it"
            )
        self.machine.restore(snapshot.data)
        self.ctx.metrics.raft_snapshot_installs.labels(self.group, self.ctx.name).inc()
        self._after_apply()

    def _after_apply(self) -> None:
        self.config = self.machine.config
        self.ctx.holdings.changed(self, self._held_bytes)
        for consumer in self.consumers.values():
            consumer.stream_stored()
        last_seq = self.machine.last_seq
        if self._seq_waiters:
            still = []
            for seq, future in self._seq_waiters:
                if future.done():
                    continue
                if last_seq >= seq:
                    future.set_result(True)
                else:
                    still.append((seq, future))
            self._seq_waiters = still
        self._watch_bound()
        self._update_responders()
        if self._leader is not None:
            self.positions.moved(self.name)
            self._leader.expiry_check()

    def _held_bytes(self) -> tuple[bool, int]:
        """(in memory, bytes) of this replica's store: what it counts against the node's limit."""
        return self.config.storage is StorageType.MEMORY, self.store.state().bytes

    def _update_responders(self) -> None:
        """Join the Direct Get groups the config asks for, once caught up; leave those it no longer does."""
        wanted = [(self.responder, self.config.allow_direct and not self._too_stale)]
        if self.origin_responder is not None:
            wanted.append((self.origin_responder, self.config.mirror_direct and not self._too_stale))
        for responder, enabled in wanted:
            if responder.joined and not enabled:
                responder.leave()
            elif not responder.joined and enabled and self._caught_up and not self.stopped:
                responder.join()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        self.ctx.holdings.changed(self, self._held_bytes)  # a store opened with data counts at once
        # A replica placed at creation starts with the whole peer set; one placed later (a
        # replacement) starts with none and waits for the leader to add it, so it can never
        # campaign on a membership the group does not have.
        voters = self.assignment.peers if self.assignment.epoch == 1 else ()
        host = self.ctx.host
        rocks = isinstance(self.store, RocksStreamStore)
        options = self.ctx.group_options(
            group_options_for(
                self.config, self.ctx.stream_group_options if rocks else MEMORY_STREAM_GROUP_OPTIONS
            )
        )
        host.add_group(self.group, self, voters=voters, options=options)
        # placement lists first the node that should lead, so leaders spread over the nodes
        host.set_preferred_leader(self.group, self.assignment.peers[0] if self.assignment.peers else None)
        if voters and voters[0] == self.ctx.name and host.last_index(self.group) == 0:
            # a brand-new group: its first peer stands at once instead of waiting out an election timeout.
            # It usually leads at once, and a first leader has nothing to catch up on (on_leader_change):
            # its catch-up starts only if another role comes first (a ReadIndex asked and dropped again
            # cost each one-node stream create a task, a timer and a read round)
            host.campaign(self.group)
        else:
            self._start_catch_up()
        self._presence_sub = self.ctx.router.subscribe(presence_subject(self.name), _never_published)
        self.positions.board.watch(self.name)
        self._watch_bound()

    def _watch_bound(self) -> None:
        """A replica with a staleness bound is checked against it by the node's beacon task (beacons
        stop coming when the leader is cut off, and staleness must still grow); one without is never
        woken, and its staleness is computed when asked."""
        bounded = self.config.max_direct_lag is not None and not self.stopped
        if bounded == self._bound_watched:
            return
        self._bound_watched = bounded
        if bounded:
            self.positions.watch_bound(self.name, self._check_staleness)
        else:
            self.positions.unwatch_bound(self.name)
            self._check_staleness()
        if self._leader is not None:
            self._lead_positions()

    def _lead_positions(self) -> None:
        """This node's beacons carry the stream's position while it leads here."""
        leader = self._leader
        copy = leader is not None and leader.mirror is not None
        self.positions.lead(
            self.name,
            LedStream(
                last_seq=lambda: self.machine.last_seq,
                behind_ns=self.leader_staleness_ns if copy else None,
                bounded=self.config.max_direct_lag is not None,
            ),
        )

    def leader_staleness_ns(self) -> int:
        """How far this node's data is behind where it comes from, while it leads: 0, except for a
        mirror, whose leader copies its origin (over a link that may lag)."""
        leader = self._leader
        if leader is None or leader.mirror is None:
            return 0
        return leader.mirror.staleness_ns(time.time_ns())

    def staleness_ns(self) -> int:
        """An upper bound on how far this replica's data is behind its source: a follower's behind its
        leader's, from the beacons (cluster/direct_get/positions.py); a mirror leader's behind its origin."""
        if self.stopped:
            return 0
        if self.role is Role.LEADER:
            return self.leader_staleness_ns()
        return self.positions.staleness_ns(self.name, self.machine.last_seq, self._started_ns)

    def report_staleness(self) -> None:
        """Sets `jetraft_replica_lag_seconds` (a scrape asks, and each bound check)."""
        if not self.stopped:
            self._check_staleness()

    def report_metrics(self) -> None:
        """Export what changed since the last scrape (a scrape asks): the group's `jetraft_raft_is_leader`,
        `jetraft_raft_leader_changes_total` and `jetraft_raft_elections_total`, and the stream's
        `jetraft_stream_last_seq` in its current role. (`jetraft_raft_term` the node exports for every
        group from the Raft host.)"""
        if self.stopped:
            return
        responder_role = self.responder_role()
        now = (self.role, self._leader_changes, self._elections, responder_role, self.machine.last_seq)
        before = self._reported
        if now == before:
            return
        self._reported = now
        metrics, node = self.ctx.metrics, self.ctx.name
        if self._raft_children is None:
            self._raft_children = (
                metrics.raft_is_leader.labels(self.group, node),
                metrics.raft_leader_changes.labels(self.group, node),
            )
        is_leader, changes = self._raft_children
        is_leader.set(1 if self.role is Role.LEADER else 0)
        changes.inc(self._leader_changes - (before[1] if before is not None else 0))
        if self._elections:
            if self._elections_child is None:
                self._elections_child = metrics.raft_elections.labels(self.group, node)
            self._elections_child.inc(self._elections - (before[2] if before is not None else 0))
        self._last_seq_children(responder_role.value).set(self.machine.last_seq)

    def _check_staleness(self) -> None:
        stale_ns = self.staleness_ns()
        self._lag_gauge(self.responder_role().value).set(stale_ns / 1e9)
        bound_ms = self.config.max_direct_lag
        too_stale = bound_ms is not None and stale_ns > bound_ms * 1_000_000
        if too_stale != self._too_stale:
            self._too_stale = too_stale
            log.info(
                "direct_get_staleness",
                stream=self.name,
                node=self.ctx.name,
                group=self.group,
                too_stale=too_stale,
                staleness_ms=stale_ns // 1_000_000,
                bound_ms=bound_ms,
            )
            self._update_responders()

    async def stop(self, delete: bool) -> None:
        # Out of `_sys_` before anything else, then the position subscription: the meta leader
        # acknowledges a stream's delete once no node has that subscription left, and a node's
        # interest changes reach each peer in order, so by then no replica answers Direct Gets.
        self.stopped = True
        self.ctx.holdings.gone(self)
        self.responder.leave()
        if self.origin_responder is not None:
            self.origin_responder.leave()
        if self._presence_sub is not None:
            self.ctx.router.unsubscribe(self._presence_sub)
        self.positions.board.unwatch(self.name)
        self._watch_bound()
        for consumer in list(self.consumers.values()):
            await consumer.stop(delete)
        self.consumers.clear()
        if self._leader is not None:
            self._leader.close()
            self._leader = None
            self.positions.unlead(self.name)
        if self._catch_up is not None:
            self._catch_up.cancel()
        for _, future in self._seq_waiters:
            if not future.done():
                future.set_result(False)
        self._seq_waiters = []
        with contextlib.suppress(GroupNotFoundError):
            await self.ctx.host.remove_group(self.group, delete_data=delete)
        # off the event loop: closing a RocksDB store (which saves its index) takes milliseconds
        if delete and isinstance(self.store, RocksStreamStore):
            # its keys go by range from the node's database; compaction reclaims the space
            await asyncio.to_thread(self.store.delete)
        else:
            await asyncio.to_thread(self.store.close)

    def _start_catch_up(self) -> None:
        self._catch_up = self.ctx.spawn(self._join_when_caught_up(), f"catch-up-{self.name}")

    async def _join_when_caught_up(self) -> None:
        """Answer Direct Gets only once this replica holds everything committed when it started."""
        if await caught_up(self.ctx.host, self.group, lambda: self.stopped, CATCH_UP_ATTEMPT_TIMEOUT):
            self._caught_up = True
            self._update_responders()

    def wait_for_seq(self, seq: int, timeout: float) -> asyncio.Future[bool]:
        """A future that is True once this replica applied `seq`, False after `timeout` or on stop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        if self.machine.last_seq >= seq:
            future.set_result(True)
            return future
        self._seq_waiters.append((seq, future))
        loop.call_later(timeout, lambda: future.done() or future.set_result(False))
        return future

    # -- roles -----------------------------------------------------------------------------

    @property
    def leader(self) -> StreamLeader | None:
        """This node's leader of the stream while it leads it."""
        return self._leader

    @property
    def caught_up(self) -> bool:
        """Whether this replica has applied up to its group's commit index once since it started."""
        return self._caught_up

    def responder_role(self) -> ResponderRole:
        if self.config.mirror is not None:
            return ResponderRole.MIRROR
        return ResponderRole.LEADER if self.role is Role.LEADER else ResponderRole.FOLLOWER

    def on_leader_change(self, leader: NodeId | None, role: Role, term: int) -> None:
        was_leader = self.role is Role.LEADER
        self.role, self.leader_id = role, leader
        self._leader_changes += 1
        if role is Role.CANDIDATE:
            self._elections += 1
        if role is Role.LEADER and not was_leader and not self.stopped:
            if not self._caught_up and self.ctx.host.leads_with_nothing_before_term(self.group):
                # a new stream's first leader: nothing was committed before, so no ReadIndex to wait for
                self._caught_up = True
                if self._catch_up is not None:
                    self._catch_up.cancel()
                self._update_responders()
            self._leader = StreamLeader(self, self.copiers)
            self._leader.open()
            self._lead_positions()
        elif role is not Role.LEADER and self._leader is not None:
            self._leader.close()
            self._leader = None
            self.positions.unlead(self.name)
        if not self._caught_up and self._catch_up is None and not self.stopped:
            # a brand-new group's first peer that did not lead at once (see start)
            self._start_catch_up()

    def assigned_config(self) -> StreamConfig:
        """The meta group's config for this stream (`assignment.config`), parsed once per config dict:
        the meta machine replaces the dict when the config changes, never edits it in place."""
        held = self._assigned
        config_json = self.assignment.config
        if held[0] is not config_json:
            held = self._assigned = (config_json, stream_config_from_json(config_json))
        return held[1]

    def assignment_changed(self, assignment: StreamAssignment) -> None:
        """The meta group changed this stream's config: the leader replicates it into the stream's log."""
        self.assignment = assignment
        self.ctx.host.set_preferred_leader(self.group, assignment.peers[0] if assignment.peers else None)
        if self._leader is not None:
            self._leader.reconcile_config()
            self._leader.reconcile_membership()

    def consumer_acked(self, seqs: list[int], from_consumer_leader: bool) -> None:
        """A consumer's acks committed (seen by each of its replicas): retention may drop messages.

        The stream leader decides. A workqueue drops what was acknowledged; a consumer
        leader that is not the stream leader asks it to (a second delete of the same
        message is refused harmlessly). An interest stream drops a message once no
        consumer still wants it, decided only where every consumer's state is at hand.
        """
        retention = self.config.retention
        if retention is Retention.WORKQUEUE:
            removals: tuple[int, ...] = workqueue_removals(seqs)
        elif retention is Retention.INTEREST and self.role is Role.LEADER:
            if not self._decides_interest():
                return  # a consumer's state lives elsewhere: keep the messages (the safe side)
            candidates = []
            for seq in sorted(set(seqs)):
                with contextlib.suppress(MsgNotFoundError):
                    candidates.append((seq, self.store.load_msg(seq).subject))
            interests = [c.interest() for c in self.consumers.values()]
            removals = interest_removals(candidates, interests)
        else:
            return
        for seq in removals:
            if self.role is Role.LEADER:
                with contextlib.suppress(RaftHostError):
                    self.propose(DeleteMsg(seq=seq, erase=False).encode()).add_done_callback(_ignore_result)
            elif from_consumer_leader:
                body = b'{"seq":%d,"no_erase":true}' % seq
                self.ctx.router.publish(stream_subject(self.name, ApiOp.STREAM_MSG_DELETE), body)

    def consumers_changed(self, expected: int) -> None:
        """The meta group's consumer count for this stream. On an interest stream a consumer that goes
        takes its interest with it, as nats-server checks the stream's interest after a consumer delete:
        with none left the stream is emptied, otherwise what no remaining consumer wants is dropped."""
        had = self.expected_consumers
        self.expected_consumers = expected
        if expected >= had or self.config.retention is not Retention.INTEREST or self.role is not Role.LEADER:
            return
        if expected == 0:
            with contextlib.suppress(RaftHostError):
                self.propose(Purge().encode()).add_done_callback(_ignore_result)
        elif self._decides_interest():
            self.ctx.spawn(self._drop_unwanted(), f"interest-{self.name}")

    def _decides_interest(self) -> bool:
        """Whether this replica may drop what no consumer wants: it leads the stream and every consumer's
        state is at hand here."""
        return self.role is Role.LEADER and len(self.consumers) == self.expected_consumers

    def consumer_reset(self, start_seq: int) -> None:
        """A consumer's RESET committed: it starts over at `start_seq` and no longer wants what lies below.
        On an interest stream what no other consumer wants there goes, as nats-server checks the stream's
        interest after a reset (a workqueue keeps what a reset skips: only an ack removes a message)."""
        if self.config.retention is Retention.INTEREST and self._decides_interest():
            self.ctx.spawn(self._drop_unwanted(below=start_seq), f"interest-{self.name}")

    async def _drop_unwanted(self, below: int | None = None) -> None:
        """Delete the messages (below `below`, if given) no consumer wants any more, a batch at a time
        (the loop serves between)."""
        seq = self.store.state().first_seq
        while not self.stopped and self._decides_interest():
            batch = self.store.load_batch(">", seq, INTEREST_SCAN_BATCH)
            candidates = [(msg.seq, msg.subject) for msg in batch.messages if below is None or msg.seq < below]
            if not candidates:
                return
            interests = [consumer.interest() for consumer in self.consumers.values()]
            for removal in interest_removals(candidates, interests):
                with contextlib.suppress(RaftHostError):
                    self.propose(DeleteMsg(seq=removal, erase=False).encode()).add_done_callback(_ignore_result)
            if not batch.num_pending or len(candidates) < len(batch.messages):
                return
            seq = batch.messages[-1].seq + 1
            await asyncio.sleep(0)

    def propose(self, data: bytes) -> asyncio.Future[Any]:
        """Raises NotLeaderError and friends synchronously, like the driver."""
        return self.ctx.host.propose_nowait(self.group, data)

    def is_leader(self) -> bool:
        try:
            return self.ctx.host.is_leader(self.group)
        except (GroupNotFoundError, NotLeaderError):
            return False


def _never_published(_msg: Message) -> None:
    """The presence subscription's handler: nothing is sent there (see presence_subject)."""


def _ignore_result(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
