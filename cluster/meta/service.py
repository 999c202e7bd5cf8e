"""The meta group on one node: replicated stream assignments, the meta leader's API, reconciliation.

Every node is a voter of the meta group `_meta_` (a node with several workers
votes with its worker 0; its other workers follow as learners) and applies its
entries to a `MetaMachine`. Applying only records the new assignments and wakes the
reconciler; the reconciler waits until this node has caught up with the meta
log (a ReadIndex) and then makes the running stream replicas match the
assignments: it starts the replicas placed here and stops (and deletes) the
ones no longer placed here. Reconciling against the caught-up state, never
entry by entry, means a restart replaying "create, delete, create again"
never touches the data of the stream that exists now. Each incarnation of a
stream has its own Raft group and store directory (named with its creation
time), so an old incarnation's entries cannot reach a new one.

The node that leads the meta group answers the meta operations (create,
update, delete, names, list, account info) forwarded to `$JSR.M.*`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
import structlog

from cluster.api import jsjson
from cluster.api.advisories import (
    ConsumerEvent,
    StreamEvent,
    consumer_action,
    consumer_advisory_subject,
    new_event_id,
    stream_action,
    stream_advisory_subject,
)
from cluster.api.audit import audited_call, is_error_response, send_api_response
from cluster.api.consumer_subjects import META_CONSUMER_PREFIX, ConsumerOp, ConsumerRequest, consumer_subject
from cluster.api.errors import ApiError, JSErrors, error_response, plain_error, stream_info_error
from cluster.api.lists import list_page
from cluster.api.response_types import STREAM_DELETE_TYPE, STREAM_LIST_TYPE, STREAM_RESTORE_TYPE
from cluster.api.subjects import META_PREFIX, ApiOp, ApiRequest, parse_meta_subject, stream_subject
from cluster.api.unimplemented import UNIMPLEMENTED_OPS, unimplemented_answer
from cluster.api.unimplemented import error_body as unimplemented_error_body
from cluster.backup.archive import ArchivedConsumer
from cluster.backup.snapshot import forwarded_snapshot, parse_snapshot_request
from cluster.consumer.assignment import ConsumerAssignment
from cluster.consumer.replica import ConsumerReplica
from cluster.direct_get.beacons import PositionBeacons
from cluster.direct_get.positions import presence_subject
from cluster.meta.account_limits import check_create_limits, check_update_limits, reserved_bytes
from cluster.meta.consumers import ConsumerAdmin, consumer_error_body, parse_meta_consumer_subject
from cluster.meta.departures import Departures, cluster_info
from cluster.meta.leftovers import find_leftovers
from cluster.meta.machine import MetaMachine, MetaOp, MetaResult, encode_meta_entry
from cluster.meta.placement import NodeInfo, PlacementError, choose_peers, known_nodes
from cluster.meta.restore import StreamRestore, restore_config
from cluster.meta.server_limits import (
    check_cluster_update,
    check_node_create,
    check_node_update,
    nodes_without_room,
)
from cluster.meta.usage_reports import (
    has_byte_limit,
    listen_for_api_counts,
    listen_for_usage,
    report_api_counts,
    report_usage,
)
from cluster.mirror.origin_fetcher import OriginFetcher
from cluster.runtime.catch_up import caught_up
from cluster.runtime.context import CLUSTER_NAME, GROUP_OPTIONS, NodeContext
from cluster.runtime.internal_requests import NoRespondersError
from cluster.runtime.leader_wait import pass_on_when_served, wait_until_unserved
from cluster.runtime.meta_progress import with_meta_index
from cluster.runtime.server_limits import limit_labels
from cluster.runtime.workers import meta_learners, meta_voters, node_count
from cluster.stream.assignment import StreamAssignment
from cluster.stream.config import StorageType, StreamConfig, parse_stream_request, stream_config_from_json
from cluster.stream.config_check import (
    check_replicas_placeable,
    check_request_subject,
    check_stream_name,
    decide_create,
    decide_update,
    subjects_match_stream,
)
from cluster.stream.info import (
    LIST_LIMIT,
    AccountUsage,
    account_info_response,
    parse_list_request,
    stream_delete_response,
    stream_names_response,
    stream_purge_error,
)
from cluster.stream.replica import StreamReplica, open_store, store_is_new, store_name_for
from gateway.router import Message, Subscription
from raft.driver import RaftHostError
from raft.types import Entry, EntryType, NodeId, Role, Snapshot
from storage.rocks_engine import StreamStoreEngine
from subjects.first_token_index import FirstTokenIndex

log = structlog.get_logger(__name__)

# How long the meta leader waits for a new stream's group to elect a leader and answer.
STREAM_READY_TIMEOUT = 10.0
# how long $JS.API.INFO waits for a stream's leader on another node to say how much it stores
ACCOUNT_USAGE_TIMEOUT = 1.0
CATCH_UP_TIMEOUT = 2.0
# How long a placement waits for a member whose route is not up yet.
PLACEMENT_WAIT = 2.0
# How long a stream's delete waits for its replicas to stop before it is acknowledged anyway.
REPLICAS_STOP_WAIT = 2.0


class _MetaStateMachine:
    """The driver's view of the meta machine: applied index kept beside it (memory; replayed on start)."""

    def __init__(self, machine: MetaMachine, on_applied: Callable[[int], None]) -> None:
        self.machine = machine
        self._applied = 0
        self._on_applied = on_applied

    @property
    def applied_index(self) -> int:
        return self._applied

    def apply(self, entries: Sequence[Entry]) -> list[MetaResult]:
        results = []
        for entry in entries:
            if entry.type is EntryType.NORMAL:
                results.append(self.machine.apply(entry.data))
            else:
                results.append(MetaResult(ok=True))
            self._applied = entry.index
        if entries:
            self._on_applied(self._applied)
        return results

    def snapshot(self) -> bytes:
        return self.machine.snapshot()

    def restore(self, snapshot: Snapshot) -> None:
        self.machine.restore(snapshot.data)
        self._applied = snapshot.index
        self._on_applied(self._applied)


class MetaService:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.machine = MetaMachine()
        self.machine.listeners.append(self._assignment_changed)
        self._state_machine = _MetaStateMachine(self.machine, self._meta_applied)
        self.replicas: dict[str, StreamReplica] = {}
        # the same replicas and their consumers' by Raft group: each leadership change looks one up, and
        # a scan of every replica for each made the changes of N streams cost N^2
        self._by_group: dict[str, StreamReplica] = {}
        self._consumers_by_group: dict[str, ConsumerReplica] = {}
        # replicas of streams that no longer have this node among their peers, until their groups let
        # them go (still in the group lookups above, no longer in `replicas`)
        self._departures = Departures(ctx, self.machine.streams, self.machine.consumers, self._forget_replica)
        # this node's one beacon task: its streams' positions and their followers' staleness
        self.positions = PositionBeacons(ctx)
        # name -> (the assignment config dict it was parsed from, the config): see configs()
        self._parsed_configs: dict[str, tuple[dict[str, Any], StreamConfig]] = {}
        self._configs: dict[str, StreamConfig] = {}
        # streams whose assignment changed since configs() last looked (the machine's listener says)
        self._configs_changed: set[str] = set()
        # the subjects of the streams in _configs, by first token: a create compares its subjects only
        # with the streams that can overlap them (300 creates in a row compared each with half the others)
        self._subjects = FirstTokenIndex()
        self.leader_id: NodeId | None = None
        self.role = Role.FOLLOWER
        self._wanted = asyncio.Event()
        # streams whose assignment or consumers changed since the last reconcile pass began: a pass
        # looks only at them (the first looks at every stream), so a create costs the same with
        # 10 streams as with 1,000 (each pass copied and compared every assignment: 300 creates took
        # 2 ms each of it by the last one)
        self._changed: set[str] = set()
        # a new stream's only replica, started here by the meta leader with the entry that creates it
        # (see _start_with_entry) and handed to `replicas` by the reconcile pass that sees the entry
        self._started_with_entry: dict[str, StreamReplica] = {}
        # a reconcile pass under way, and whether one ever completed (see _meta_applied)
        self._reconciling = False
        self._reconciled_once = False
        self._leader_sub: Subscription | None = None
        self._consumer_sub: Subscription | None = None
        self.consumer_admin = ConsumerAdmin(self)
        self._stopped = False
        # this account's streams, as placement on this node sees every account's
        self._placement_view = _PlacementView(self)
        ctx.accounts_placement.register(ctx.account_tag, self._placement_view)

    @property
    def current(self) -> bool:
        """Caught up with the meta leader's log once, and the replicas it assigns here started: until
        then /healthz says what nats-server says of a node still catching up with its meta leader."""
        return self._reconciled_once

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        self.ctx.host.add_group(
            self.ctx.meta_group,
            self._state_machine,
            voters=meta_voters(self.ctx.members),
            learners=meta_learners(self.ctx.members),
            options=self.ctx.group_options(GROUP_OPTIONS),
        )
        host = self.ctx.host
        if host.voters(self.ctx.meta_group) == (host.node_id,):
            # A lone voter's election cannot be contested: it leads now rather than after an election
            # timeout (1-2 s during which a one-node cluster's /healthz and JetStream API wait).
            host.campaign(self.ctx.meta_group)
        self.positions.open()
        self.ctx.spawn(self._reconcile_loop(), "meta-reconcile")
        listen_for_api_counts(self.ctx)
        self.ctx.spawn(report_api_counts(self.ctx, lambda: self._stopped), "meta-api-count-reports")
        if has_byte_limit(self.ctx):
            listen_for_usage(self.ctx, self.replicas)
            self.ctx.spawn(report_usage(self.ctx, self.replicas, lambda: self._stopped), "meta-usage-reports")

    async def stop(self) -> None:
        self._stopped = True
        self.ctx.accounts_placement.unregister(self.ctx.account_tag)
        self._wanted.set()
        for replica in [*self.replicas.values(), *self._started_with_entry.values()]:
            await replica.stop(delete=False)
        await self._departures.stop()
        self.replicas.clear()
        self._started_with_entry.clear()
        self._by_group.clear()
        self._consumers_by_group.clear()
        self.positions.close()

    def stream_replica(self, group: str) -> StreamReplica | None:
        replica = self._by_group.get(group)
        if replica is None:
            # one started with its meta entry, not adopted by the reconciler yet (a few at most)
            for started in self._started_with_entry.values():
                if started.group == group:
                    return started
        return replica

    def consumer_replica(self, group: str) -> ConsumerReplica | None:
        return self._consumers_by_group.get(group)

    def _forget_replica(self, replica: StreamReplica | ConsumerReplica) -> None:
        """Take a replica that stops out of the group lookups (a stream's with its consumers)."""
        if isinstance(replica, ConsumerReplica):
            self._consumers_by_group.pop(replica.group, None)
            return
        self._by_group.pop(replica.group, None)
        for consumer in replica.consumers.values():
            self._consumers_by_group.pop(consumer.group, None)

    def group_leader_changed(self, group: str, leader: NodeId | None, role: Role, term: int) -> None:
        """A Raft group of this account's JetStream (its meta group, or a stream's or consumer's, whose
        name follows the account's tag) has a new leader: tell whoever runs it here."""
        if group == self.ctx.meta_group:
            self.on_leader_change(leader, role, term)
            return
        if group.startswith("C-", len(self.ctx.account_tag)):
            consumer = self.consumer_replica(group)
            if consumer is not None:
                consumer.on_leader_change(leader, role, term)
            return
        replica = self.stream_replica(group)
        if replica is not None:
            replica.on_leader_change(leader, role, term)

    @property
    def applied_index(self) -> int:
        """The meta log index this node has applied: what an answer asked of another leader must reflect."""
        return self._state_machine.applied_index

    def knows_consumer(self, stream: str, name: str) -> bool:
        return name in self.machine.consumers.get(stream, {})

    def configs(self) -> dict[str, StreamConfig]:
        """Every stream's config, parsed once per assignment config: each create and update checks
        against all streams, and parsing them all again made 300 creates take twice as long. Only the
        streams the machine reported changed since the last call are looked at again."""
        cache, parsed = self._parsed_configs, self._configs
        changed, self._configs_changed = self._configs_changed, set()
        for name in changed:
            assignment = self.machine.streams.get(name)
            if assignment is None:
                cache.pop(name, None)
                parsed.pop(name, None)
                self._subjects.remove(name)
                continue
            held = cache.get(name)
            # the machine replaces an assignment's config dict on update: the same dict, the same config
            if held is None or held[0] is not assignment.config:
                held = cache[name] = (assignment.config, stream_config_from_json(assignment.config))
                parsed[name] = held[1]
                self._subjects.set(name, held[1].subjects)
        return dict(parsed)

    # -- reconciliation ---------------------------------------------------------------------

    def _assignment_changed(self, name: str, assignment: StreamAssignment | None) -> None:
        self._expect_publishes(name, assignment)
        self._changed.add(name)
        self._configs_changed.add(name)
        self._wanted.set()

    def _expect_publishes(self, name: str, assignment: StreamAssignment | None) -> None:
        """Tell the node's publish hold the subjects this stream's leader serves (runtime/publish_hold.py):
        a client's publish on them that meets no leader yet waits for one a moment. Nothing to do where
        the node runs without the hold (the default)."""
        hold = self.ctx.publish_hold
        if hold is None:
            return
        owner = (self.ctx.account_tag, name)
        if assignment is None:
            hold.forget(owner)
            return
        config = assignment.config
        # what StreamLeader.refresh_subjects subscribes to: a mirror takes no publishes
        subjects = () if config.get("mirror") is not None else config.get("subjects") or ()
        hold.expect(owner, [self.ctx.router_subject(subject) for subject in subjects])

    def _meta_applied(self, index: int) -> None:
        """Entries that changed no assignment (a new meta leader's empty entry, a refused request)
        need no reconcile: with none pending or under way, this node's replicas already have
        everything up to `index`. (Left to the reconciler, leaders asked for that index would wait
        for a pass that never comes.)"""
        if self._reconciled_once and not self._reconciling and not self._wanted.is_set():
            self.ctx.meta_progress.advance(index)

    async def _reconcile_loop(self) -> None:
        caught = await caught_up(self.ctx.host, self.ctx.meta_group, lambda: self._stopped, CATCH_UP_TIMEOUT)
        log.info("meta_caught_up", node=self.ctx.name, streams=len(self.machine.streams))
        while not self._stopped:
            self._reconciling = True
            self._wanted.clear()
            try:
                await self._reconcile_once()
            finally:
                self._reconciling = False
            if not self._reconciled_once and caught:
                await self._remove_leftovers()
            self._reconciled_once = True
            if not self._wanted.is_set():
                # what was applied during the pass changed no assignment (it would have set _wanted)
                self.ctx.meta_progress.advance(self._state_machine.applied_index)
            await self._wanted.wait()

    async def _resume_departures(self) -> None:
        """Replicas this node was leaving when it stopped (their stream is still there, without this node
        among its peers, and their groups are stored here) leave as they would have: deleted now as
        leftovers, they could take the only full copy of an R1 stream whose replacement had not caught
        up, or a quorum its group still counts on."""
        ctx = self.ctx
        stored = set(ctx.host.stored_groups())
        running = set(ctx.host.groups())
        for name, current in list(self.machine.streams.items()):
            if ctx.name in current.peers or current.group not in stored or current.group in running:
                continue
            if name in self._departures:
                continue
            replica = await self._open_replica(StreamAssignment.from_json(current.to_json()))
            for consumer_assignment in self.machine.consumers.get(name, {}).values():
                if consumer_assignment.group in stored:
                    self._start_consumer(replica, ConsumerAssignment.from_json(consumer_assignment.to_json()))
            self._departures.leave(replica)

    async def _remove_leftovers(self) -> None:
        """Delete the logs and stores of replicas deleted or moved away while this node was down
        (cluster/meta/leftovers.py); run once, after the first pass following the catch-up, once the
        replicas it was leaving when it stopped are running again (they are no leftovers)."""
        await self._resume_departures()
        ctx = self.ctx
        wanted_groups: set[str] = set()
        wanted_stores: set[str] = set()
        for name, assignment in self.machine.streams.items():
            if ctx.name in assignment.peers:
                wanted_groups.add(assignment.group)
                wanted_stores.add(store_name_for(assignment))
            for consumer in self.machine.consumers.get(name, {}).values():
                if ctx.name in consumer.peers:
                    wanted_groups.add(consumer.group)
        engine = ctx.stream_stores
        stored_stores = engine.stores() if engine is not None else []
        leftovers = find_leftovers(
            tag=ctx.account_tag,
            stored_groups=ctx.host.stored_groups(),
            stored_stores=stored_stores,
            wanted_groups=wanted_groups,
            wanted_stores=wanted_stores,
            running_groups=set(ctx.host.groups()),
            open_stores={name for name in stored_stores if engine is not None and engine.is_open(name)},
        )
        if not leftovers.groups and not leftovers.stores:
            return
        try:
            dropped = await ctx.host.drop_stored_groups(leftovers.groups)
            if engine is not None and leftovers.stores:
                await asyncio.to_thread(_drop_stores, engine, leftovers.stores)
        except Exception as exc:  # a leftover kept costs only disk: never the reconcile loop
            log.warning("leftovers_not_removed", node=ctx.name, error=str(exc))
            return
        log.info("leftovers_removed", node=ctx.name, groups=dropped, stores=leftovers.stores)

    async def _reconcile_once(self) -> None:
        # the assignments below are read from the machine as of this index (or later ones, after an await)
        index = self._state_machine.applied_index
        names, self._changed = self._changed, set()
        if not self._reconciled_once:
            names |= self.machine.streams.keys() | self.replicas.keys()
        try:
            await self._reconcile_streams(names)
        except BaseException:
            self._changed |= names  # looked at again by the next pass
            raise
        self.ctx.meta_progress.advance(index)

    async def _reconcile_streams(self, names: set[str]) -> None:
        """Make the replicas of `names` on this node match their assignments (every other stream's
        assignment is as it was at the last pass)."""
        # copies: the machine updates its assignments in place, replicas compare against theirs
        wanted: dict[str, StreamAssignment] = {}
        for name in names:
            assignment = self.machine.streams.get(name)
            if assignment is not None and self.ctx.name in assignment.peers:
                wanted[name] = StreamAssignment.from_json(assignment.to_json())
        for name in names:
            if name in self._departures:
                await self._departures.stream_changed(name)
            replica = self.replicas.get(name)
            if replica is None:
                continue
            assignment = wanted.get(name)
            current = self.machine.streams.get(name)
            if assignment is None and current is not None and current.created_ns == replica.assignment.created_ns:
                # this node was taken out of the stream's peers: its replica leaves once its groups let it
                del self.replicas[name]
                self._departures.leave(replica)
            elif assignment is None or assignment.created_ns != replica.assignment.created_ns:
                del self.replicas[name]
                self._forget_replica(replica)
                log.info("stream_replica_removed", stream=name, node=self.ctx.name)
                await replica.stop(delete=True)
            elif assignment.to_json() != replica.assignment.to_json():
                replica.assignment_changed(assignment)
        for name, assignment in wanted.items():
            if name in self.replicas:
                continue
            back = self._departures.take_back(name)
            if back is not None:  # among the stream's peers again before it had left
                self.replicas[name] = back
                back.assignment_changed(assignment)
                continue
            started = self._started_with_entry.get(name)
            if started is not None and started.assignment.created_ns == assignment.created_ns:
                del self._started_with_entry[name]
                self.replicas[name] = started
                self._by_group[started.group] = started
                continue
            self.replicas[name] = await self._open_replica(assignment)
        for name in names:
            replica = self.replicas.get(name)
            if replica is not None:
                await self._reconcile_consumers(replica)

    async def _open_replica(self, assignment: StreamAssignment) -> StreamReplica:
        """This node's replica of a stream, its store opened and its group started."""
        if store_is_new(self.ctx, assignment):
            store = open_store(self.ctx, assignment)  # nothing to read: a fraction of a millisecond
        else:
            # opening a store with data reads its index (tens of ms for a big one): not on the
            # event loop, where it would hold up every client and Raft group of this node
            store = await asyncio.to_thread(open_store, self.ctx, assignment)
        replica = StreamReplica(self.ctx, assignment, copiers=OriginFetcher, positions=self.positions, store=store)
        self._by_group[replica.group] = replica
        replica.start()
        log.info("stream_replica_started", stream=assignment.name, node=self.ctx.name, peers=assignment.peers)
        return replica

    def _start_consumer(self, stream: StreamReplica, assignment: ConsumerAssignment) -> None:
        consumer = ConsumerReplica(self.ctx, assignment, stream)
        stream.consumers[assignment.name] = consumer
        self._consumers_by_group[consumer.group] = consumer
        consumer.start()
        log.info("consumer_replica_started", stream=stream.name, consumer=assignment.name, node=self.ctx.name)

    async def _reconcile_consumers(self, stream: StreamReplica) -> None:
        assigned = self.machine.consumers.get(stream.name, {})
        wanted = {
            name: ConsumerAssignment.from_json(c.to_json())
            for name, c in assigned.items()
            if self.ctx.name in c.peers
        }
        for name, consumer in list(stream.consumers.items()):
            assignment = wanted.get(name)
            if assignment is None or assignment.created_ns != consumer.assignment.created_ns:
                del stream.consumers[name]
                self._consumers_by_group.pop(consumer.group, None)
                await consumer.stop(delete=True)
            elif assignment.to_json() != consumer.assignment.to_json():
                consumer.assignment_changed(assignment)
        for name, assignment in wanted.items():
            if name not in stream.consumers:
                self._start_consumer(stream, assignment)
        stream.consumers_changed(len(assigned))

    # -- leadership -------------------------------------------------------------------------

    def on_leader_change(self, leader: NodeId | None, role: Role, term: int) -> None:
        self.leader_id, self.role = leader, role
        metrics, node = self.ctx.metrics, self.ctx.name
        metrics.raft_is_leader.labels(self.ctx.meta_group, node).set(1 if role is Role.LEADER else 0)
        metrics.raft_term.labels(self.ctx.meta_group, node).set(term)
        metrics.raft_leader_changes.labels(self.ctx.meta_group, node).inc()
        if role is Role.CANDIDATE:
            metrics.raft_elections.labels(self.ctx.meta_group, node).inc()
        router = self.ctx.router
        if role is Role.LEADER and self._leader_sub is None:
            self._leader_sub = router.subscribe(META_PREFIX + ">", self._on_meta_request)
            self._consumer_sub = router.subscribe(META_CONSUMER_PREFIX + ">", self._on_consumer_request)
            log.info("meta_leader", node=node, term=term)
        elif role is not Role.LEADER and self._leader_sub is not None:
            router.unsubscribe(self._leader_sub)
            self._leader_sub = None
            if self._consumer_sub is not None:
                router.unsubscribe(self._consumer_sub)
                self._consumer_sub = None

    # -- node info (placement) --------------------------------------------------------------

    def _node_infos(self) -> list[NodeInfo]:
        ctx = self.ctx
        return known_nodes(ctx.members, ctx.name, (*ctx.tags, *limit_labels(ctx.server_limits)), ctx.router.peer_labels)

    def _every_accounts_streams(self) -> tuple[Mapping[str, StreamConfig], Callable[[str], Sequence[str]]]:
        """Every account's stream configs (this account's by name) and their peers: a node's byte limits
        and its load are shared by all the accounts with streams on it."""
        return self.ctx.accounts_placement.configs(self._placement_view)

    async def _place(self, replicas: int, cfg: StreamConfig, exclude: Sequence[str] = ()) -> list[str]:
        """`choose_peers` over the nodes known now; while a member's route is not up (a node just
        started, or one reconnecting), placement that fails looks again for up to PLACEMENT_WAIT."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PLACEMENT_WAIT
        placement, view = self.ctx.accounts_placement, self._placement_view
        while True:
            nodes = self._node_infos()
            full = nodes_without_room(cfg, nodes, *self._every_accounts_streams())
            try:
                return choose_peers(
                    replicas,
                    nodes,
                    placement.load(view),
                    required_tags=cfg.placement.tags if cfg.placement is not None and not self.ctx.standalone else (),
                    is_mirror=cfg.mirror is not None,
                    exclude=exclude,
                    first_in=placement.first_peers(view),
                    without_room=full,
                )
            except PlacementError as exc:
                if all(node.online for node in nodes) or loop.time() >= deadline:
                    raise JSErrors.CLUSTER_NO_PEERS(err=str(exc)) from None
            await asyncio.sleep(0.05)

    # -- the meta leader's API -------------------------------------------------------------

    def _on_meta_request(self, msg: Message) -> None:
        request = parse_meta_subject(msg.subject)
        if request is None or not msg.reply:
            return
        self.ctx.spawn(self._answer(request, msg), f"meta-{request.op.value}")

    async def _answer(self, request: ApiRequest, msg: Message) -> None:
        reply = msg.reply
        assert reply is not None
        try:
            body = await self._handle(request, msg)
        except ApiError as error:
            body = _error_body(request, error)
        except (RaftHostError, TimeoutError, NoRespondersError) as exc:
            log.info("meta_request_unavailable", op=request.op.value, stream=request.stream, error=repr(exc))
            body = _error_body(request, JSErrors.CLUSTER_NOT_AVAILABLE())
        if body is not None:
            send_api_response(self.ctx, msg, body)

    async def _handle(self, request: ApiRequest, msg: Message) -> bytes | None:
        op, name = request.op, request.stream
        if op is ApiOp.ACCOUNT_INFO:
            consumers = sum(len(by_name) for by_name in self.machine.consumers.values())
            memory, storage = await self._stored_bytes()
            reserved_memory, reserved_storage = reserved_bytes(self.configs().values())
            api_total, api_errors = self.ctx.api_counts.cluster_totals()
            return account_info_response(
                AccountUsage(
                    memory=memory,
                    storage=storage,
                    streams=len(self.machine.streams),
                    consumers=consumers,
                    api_total=api_total,
                    api_errors=api_errors,
                    limits=self.ctx.account_limits,
                    domain=self.ctx.domain,
                    reserved_memory=reserved_memory,
                    reserved_storage=reserved_storage,
                )
            )
        if op is ApiOp.STREAM_NAMES:
            request = parse_list_request(msg.payload)
            return stream_names_response(list(self.configs().values()), request, self.ctx.standalone)
        if op is ApiOp.STREAM_LIST:
            return await self._list(msg.payload)
        if op is ApiOp.STREAM_CREATE:
            return await self._create(name, msg)
        if op is ApiOp.STREAM_UPDATE:
            return await self._update(name, msg.payload)
        if op is ApiOp.STREAM_DELETE:
            if not jsjson.is_empty_request(msg.payload):
                raise JSErrors.NOT_EMPTY_REQUEST()
            return await self._delete(name)
        if op is ApiOp.STREAM_PEER_REMOVE or op is ApiOp.STREAM_PEER_EVACUATE:
            return await self._peer_remove(name, msg.payload, request.response_type)
        if op is ApiOp.STREAM_RESTORE:
            return self._restore(name, msg)
        if op in UNIMPLEMENTED_OPS:
            return unimplemented_answer(request, msg.payload, name in self.machine.streams)
        if op is ApiOp.STREAM_SNAPSHOT:
            return await self._snapshot(name, msg)
        # a per-stream operation from a node that did not know the stream: we know for sure
        if name not in self.machine.streams:
            raise JSErrors.STREAM_NOT_FOUND()
        # the leader answers once its node caught up with what this one applied (consumer count, config)
        headers = with_meta_index(msg.headers, self.applied_index)
        if not await pass_on_when_served(
            self.ctx.router, stream_subject(name, op), msg.payload, msg.reply, headers
        ):
            raise JSErrors.CLUSTER_NOT_AVAILABLE()
        return None

    def _on_consumer_request(self, msg: Message) -> None:
        request = parse_meta_consumer_subject(msg.subject)
        if request is None or not msg.reply:
            return
        self.ctx.spawn(self._answer_consumer(request, msg), f"meta-consumer-{request.op.value}")

    async def _answer_consumer(self, request: ConsumerRequest, msg: Message) -> None:
        try:
            body = await self.consumer_admin.handle(request, msg)
        except ApiError as error:
            body = consumer_error_body(request, error)
        except (RaftHostError, TimeoutError, NoRespondersError) as exc:
            log.info("meta_consumer_request_unavailable", op=request.op.value, error=repr(exc))
            body = consumer_error_body(request, JSErrors.CLUSTER_NOT_AVAILABLE())
        if body is not None and msg.reply:
            send_api_response(self.ctx, msg, body)

    async def propose(self, op: MetaOp, body: dict[str, Any]) -> MetaResult:
        return await self._propose(op, body)

    async def _propose(self, op: MetaOp, body: dict[str, Any]) -> MetaResult:
        result = await self.ctx.host.propose(self.ctx.meta_group, encode_meta_entry(op, body))
        assert isinstance(result, MetaResult)
        return result

    async def _create(self, name: str, msg: Message) -> bytes | None:
        requested, pedantic = parse_stream_request(msg.payload)
        check_request_subject(name, requested)
        limits = self.ctx.account_limits
        configs = self.configs()
        decision = decide_create(requested, configs, limits, self._subjects, self.ctx.server_limits, pedantic)
        if decision.exists:
            return await self._ask_stream(name, ApiOp.CREATE_RESULT, b"0")
        cfg = decision.config
        check_create_limits(cfg, configs, limits)
        if self.ctx.standalone:
            check_node_create(cfg, self._every_accounts_streams()[0], self.ctx.server_limits)
            if cfg.num_replicas > 1:  # as nats-server on one server, where placement places nothing
                raise JSErrors.STREAM_REPLICAS_NOT_SUPPORTED()
        else:
            check_replicas_placeable(cfg, node_count(self.ctx.members), CLUSTER_NAME)
        peers = await self._place(max(cfg.num_replicas, 1), cfg)
        assignment = StreamAssignment(name, cfg.to_json(), peers, time.time_ns(), tag=self.ctx.account_tag)
        started = self._start_with_entry(assignment, cfg)
        try:
            result = await self._propose(MetaOp.ASSIGN_STREAM, assignment.to_json())
        except BaseException:
            # the meta group failed (its write, and so this replica's, did not happen) or the node is
            # stopping: stop the replica, keeping whatever it wrote for a restart to find
            if started is not None and self._started_with_entry.pop(name, None) is started:
                self.ctx.spawn(started.stop(delete=False), f"stop-{name}")
            raise
        if not result.ok:
            if started is not None and self._started_with_entry.pop(name, None) is started:
                # the entry was refused (the name was taken meanwhile): nothing of this stream exists
                await started.stop(delete=True)
            raise JSErrors.STREAM_NAME_EXIST()
        self._config_parsed(name, assignment.config, cfg)
        log.info("stream_assigned", stream=name, peers=peers)
        self._advise_stream(StreamEvent.CREATED, name)
        leader = started.leader if started is not None and self.ctx.standalone else None
        if (
            leader is not None
            and leader.serves_api
            and self.ctx.meta_progress.reconciled >= self.applied_index
            and self.replicas.get(name) is started
        ):
            # One process: the client is on this node, the stream's subjects were subscribed here when
            # its leader opened, and the reconcile pass that adopted the replica is done (what the leader
            # waits for when asked below), so the answer needs no hop through the leader's API subject.
            return leader.create_response(did_create=True)
        # The new stream's leader answers the client itself: the interest in the stream's subjects it
        # sent the client's node when it became leader travels the same route, before the answer, so
        # the client's first publish finds the stream (answered from here, it could race that interest
        # and get "no responders").
        target = stream_subject(name, ApiOp.CREATE_RESULT)
        headers = with_meta_index(msg.headers, self.applied_index)
        if msg.reply and await pass_on_when_served(self.ctx.router, target, b"1", msg.reply, headers):
            return None
        return await self._ask_stream(name, ApiOp.CREATE_RESULT, b"1")

    async def _snapshot(self, name: str, msg: Message) -> None:
        """STREAM.SNAPSHOT: checked as nats-server checks it (the body before the stream), then, with the
        consumers' states gathered from their leaders, answered and sent by the stream leader."""
        if jsjson.is_empty_request(msg.payload):
            raise JSErrors.BAD_REQUEST()
        if name not in self.machine.streams:
            raise JSErrors.STREAM_NOT_FOUND()
        request = parse_snapshot_request(msg.payload)
        consumers = [] if request.no_consumers else await self._archived_consumers(name)
        headers = with_meta_index(msg.headers, self.applied_index)
        subject = stream_subject(name, ApiOp.STREAM_SNAPSHOT)
        forwarded = forwarded_snapshot(request, consumers)
        if not await pass_on_when_served(self.ctx.router, subject, forwarded, msg.reply, headers):
            raise JSErrors.CLUSTER_NOT_AVAILABLE()

    async def _archived_consumers(self, name: str) -> list[ArchivedConsumer]:
        """Each consumer of `name`: its stored config and its leader's state (the working state, which
        is the committed one plus what the leader proposed since)."""
        archived = []
        headers = with_meta_index(None, self.applied_index)
        for consumer, assignment in sorted(self.machine.consumers.get(name, {}).items()):
            subject = consumer_subject(name, consumer, ConsumerOp.ARCHIVE)
            try:
                reply = await self.ctx.requester.request_when_answered(subject, b"", STREAM_READY_TIMEOUT, headers)
            except (TimeoutError, NoRespondersError):
                raise JSErrors.STREAM_SNAPSHOT(err=f"consumer {consumer!r} has no leader to ask") from None
            if is_error_response(reply.payload):
                raise JSErrors.STREAM_SNAPSHOT(err=f"consumer {consumer!r} did not give its state")
            archived.append(ArchivedConsumer(consumer, assignment.config, assignment.created_ns, reply.payload))
        return archived

    def _restore(self, name: str, msg: Message) -> bytes:
        """STREAM.RESTORE: the request's and the config's checks, then the deliver subject the client
        sends the archive to (cluster/meta/restore.py rebuilds the stream once it has all of it)."""
        config = restore_config(name, msg.payload)
        if name in self.machine.streams:
            raise JSErrors.STREAM_NAME_EXIST_RESTORE_FAILED()
        requested, pedantic = parse_stream_request(jsjson.dumps(config))
        configs, limits = self.configs(), self.ctx.account_limits
        decision = decide_create(requested, configs, limits, self._subjects, self.ctx.server_limits, pedantic)
        check_create_limits(decision.config, configs, limits)
        call = audited_call(msg)
        steps, spool_dir = _RestoreSteps(self), self.ctx.data_dir / "restores"
        restore = StreamRestore(self.ctx, name, config, steps, spool_dir, call[1] if call is not None else None)
        restore.start()
        return jsjson.dumps({"type": STREAM_RESTORE_TYPE, "deliver_subject": restore.deliver_subject})

    def _config_parsed(self, name: str, config_json: dict[str, Any], config: StreamConfig) -> None:
        """`configs()` need not parse a config the meta leader itself just committed: `config`, from
        which `config_json` was made, is its parse (a config's JSON parses back to an equal config),
        as long as the machine holds that config for `name` now."""
        assignment = self.machine.streams.get(name)
        if assignment is None or assignment.config != config_json:
            return
        self._parsed_configs[name] = (assignment.config, config)
        self._configs[name] = config
        self._subjects.set(name, config.subjects)
        self._configs_changed.discard(name)

    def _start_with_entry(self, assignment: StreamAssignment, config: StreamConfig) -> StreamReplica | None:
        """On a node that is the meta group's only voter, start a new stream's only replica, placed
        here, just before its entry is proposed: the group's first term and entry are then written in
        the same batch as the meta entry, one fsync for both where it took one after the other (the
        reconcile pass that applies the entry adopts the replica). `config` is `assignment.config` parsed.

        Both are marked for the host's next iteration in this one callback, so they are written
        together: the replica leads, and takes publishes, only once the meta entry is durable too,
        and a single voter's durable entry commits (after a crash as well). If the entry is refused,
        the replica goes with its data. None when this does not apply: several meta voters (an entry
        can then be refused here after another leader's and still commit later), a replica of this
        name already here, or a store with data."""
        name, me = assignment.name, self.ctx.name
        if (
            assignment.peers != [me]
            or meta_voters(self.ctx.members) != (me,)
            or name in self.replicas
            or name in self._started_with_entry
            or not store_is_new(self.ctx, assignment)
        ):
            return None
        # a copy: the replica compares its own against the machine's, as for one the reconciler starts
        own = StreamAssignment.from_json(assignment.to_json())
        store = open_store(self.ctx, own, config)
        replica = StreamReplica(
            self.ctx, own, copiers=OriginFetcher, positions=self.positions, store=store, config=config
        )
        self._started_with_entry[name] = replica
        replica.start()
        log.info("stream_replica_started", stream=name, node=me, peers=assignment.peers, with_entry=True)
        return replica

    async def _update(self, name: str, payload: bytes, *, advise: bool = True) -> bytes:
        requested, pedantic = parse_stream_request(payload)
        # as nats-server: the config's own checks come before the name in the subject is compared
        check_stream_name(requested)
        check_request_subject(name, requested)
        configs = self.configs()
        old = configs.get(name)
        if old is None:
            raise JSErrors.STREAM_NOT_FOUND()
        cfg = decide_update(old, requested, configs, self.ctx.account_limits, self.ctx.server_limits, pedantic)
        rescaled = max(cfg.num_replicas, 1) != max(old.num_replicas, 1)
        if rescaled and self.ctx.standalone:
            raise JSErrors.STREAM_REPLICAS_NOT_UPDATABLE()
        check_update_limits(old, cfg, configs, self.ctx.account_limits)
        every_config, every_peers_of = self._every_accounts_streams()
        if self.ctx.standalone:
            check_node_update(old, cfg, every_config, self.ctx.server_limits)
        else:
            check_cluster_update(old, cfg, self._node_infos(), every_config, every_peers_of)
        body: dict[str, Any] = {"name": name, "config": cfg.to_json()}
        if rescaled:
            body["peers"] = await self._rescaled_peers(name, cfg)
        result = await self._propose(MetaOp.UPDATE_STREAM, body)
        if not result.ok:
            raise JSErrors.STREAM_NOT_FOUND()
        if advise:  # not a restore's last step: nats-server announces a restored stream as created only
            self._advise_stream(StreamEvent.UPDATED, name)
        # the config travels with the request: the stream leader's node may not have applied the meta
        # entry yet, and would answer with the config it had before
        return await self._ask_stream(name, ApiOp.APPLY_UPDATE, cfg.to_bytes())

    async def _rescaled_peers(self, name: str, cfg: StreamConfig) -> list[str]:
        """The peers of stream `name` at `cfg.num_replicas`: more placed beside its own, or fewer, keeping
        its leader (as nats-server scales down). The group follows one server at a time, and a peer that
        goes leaves once it is no longer a voter (cluster/meta/departures.py)."""
        peers = list(self.machine.streams[name].peers)
        wanted = max(cfg.num_replicas, 1)
        if wanted > len(peers):
            return peers + await self._place(wanted - len(peers), cfg, exclude=peers)
        leader = await self._stream_leader(name)
        if leader in peers:
            peers.remove(leader)
            peers.insert(0, leader)
        return peers[:wanted]

    async def _stream_leader(self, name: str) -> str | None:
        cluster = await cluster_info(self.ctx, stream_subject(name, ApiOp.STREAM_INFO), ACCOUNT_USAGE_TIMEOUT)
        leader = cluster.get("leader") if cluster is not None else None
        return leader if isinstance(leader, str) else None

    async def _delete(self, name: str) -> bytes:
        if name not in self.machine.streams:
            raise JSErrors.STREAM_NOT_FOUND()
        consumers = sorted(self.machine.consumers.get(name, {}))
        result = await self._propose(MetaOp.REMOVE_STREAM, {"name": name})
        if not result.ok:
            raise JSErrors.STREAM_NOT_FOUND()
        # Acknowledged once its replicas have stopped (bounded: a node cut off stops when it hears),
        # so no replica of it answers a Direct Get after the client was told it is gone, and its
        # mirrors' replicas answer them alone.
        if not await wait_until_unserved(self.ctx.router, presence_subject(name), REPLICAS_STOP_WAIT):
            log.info("stream_deleted_before_every_replica_stopped", stream=name)
        # as nats-server: each consumer goes first, then the stream
        now = time.time_ns()
        for consumer in consumers:
            body = consumer_action(name, consumer, False, new_event_id(), now, self.ctx.domain)
            self.ctx.router.publish(consumer_advisory_subject(ConsumerEvent.DELETED, name, consumer), body)
        self._advise_stream(StreamEvent.DELETED, name)
        return stream_delete_response()

    def _advise_stream(self, event: StreamEvent, name: str) -> None:
        """STREAM.CREATED / UPDATED / DELETED, published once: by the meta leader that made the change."""
        self.ctx.advise(
            stream_advisory_subject(event, name),
            lambda: stream_action(name, event, new_event_id(), time.time_ns(), self.ctx.domain),
        )

    async def _peer_remove(self, name: str, payload: bytes, response_type: str) -> bytes:
        """STREAM.PEER.REMOVE and STREAM.PEER.EVACUATE: take `peer` out of the stream's replicas and
        place a replacement. Both move the stream as nats-server's EVACUATE does: the replacement joins
        and catches up from the leader, and the peer leaves once it is no longer a voter
        (cluster/meta/departures.py); nats-server's REMOVE drops the peer at once, which starts an R1
        stream over empty on the new peer."""
        if jsjson.is_empty_request(payload):
            raise JSErrors.BAD_REQUEST()
        try:
            request = jsjson.loads_request(payload, "JSApiStreamRemovePeerRequest")
            peer = jsjson.get_str(request, "peer")
            jsjson.reject_unknown(request)
        except jsjson.RequestJSONError as exc:
            raise JSErrors.INVALID_JSON(err=str(exc)) from None
        if not peer:
            raise JSErrors.BAD_REQUEST()
        assignment = self.machine.streams.get(name)
        if assignment is None:
            raise JSErrors.STREAM_NOT_FOUND()
        if peer not in assignment.peers:
            raise JSErrors.CLUSTER_PEER_NOT_MEMBER()
        cfg = stream_config_from_json(assignment.config)
        try:
            (replacement,) = await self._place(1, cfg, exclude=assignment.peers)
        except ApiError as error:
            if JSErrors.CLUSTER_NO_PEERS.matches(error):
                raise JSErrors.PEER_REMAP() from None  # as nats-server: no node to take its place
            raise
        peers = [replacement if p == peer else p for p in assignment.peers]
        result = await self._propose(MetaOp.SET_STREAM_PEERS, {"name": name, "peers": peers})
        if not result.ok:
            raise JSErrors.STREAM_NOT_FOUND()
        log.info("stream_peer_replaced", stream=name, removed=peer, added=replacement)
        return jsjson.dumps({"type": response_type, "success": True})

    async def _list(self, payload: bytes) -> bytes:
        request = parse_list_request(payload, "JSApiStreamListRequest")
        configs = self.configs()
        chosen = sorted(
            name
            for name, cfg in configs.items()
            if not request.subject or subjects_match_stream(request.subject, cfg)
        )
        return await list_page(
            self.ctx.requester,
            STREAM_LIST_TYPE,
            "streams",
            chosen,
            request.offset,
            LIST_LIMIT,
            lambda name: stream_subject(name, ApiOp.LIST_ENTRY),
            with_meta_index(None, self.applied_index),
            standalone=self.ctx.standalone,
        )

    async def _stored_bytes(self) -> tuple[int, int]:
        """(memory, storage) the account's streams take on the cluster: each stream's bytes times its
        replicas, as nats-server adds up what every server holds. A stream with a replica here is
        read from it (a follower may trail its leader by what it has not applied yet); another is
        asked of its leader, and left out if that leader does not answer in time."""

        async def usage(name: str, config: StreamConfig) -> tuple[bool, int]:
            replica = self.replicas.get(name)
            if replica is not None:
                size = replica.machine.store.state().bytes
            else:
                try:
                    reply = await self.ctx.requester.request(
                        stream_subject(name, ApiOp.LIST_ENTRY), b"", ACCOUNT_USAGE_TIMEOUT
                    )
                    size = int(json.loads(reply.payload)["state"]["bytes"])
                except (TimeoutError, NoRespondersError, ValueError, KeyError, TypeError):
                    return False, 0
            return config.storage is StorageType.MEMORY, size * max(config.num_replicas, 1)

        sizes = await asyncio.gather(*(usage(name, config) for name, config in self.configs().items()))
        memory = sum(size for in_memory, size in sizes if in_memory)
        storage = sum(size for in_memory, size in sizes if not in_memory)
        return memory, storage

    async def _ask_stream(self, name: str, op: ApiOp, payload: bytes) -> bytes:
        """The stream leader's answer, waiting (bounded) for a new group to elect its leader. The leader
        answers once its node has the assignment as this one applied it (the config just updated):
        before, a leader on another node described the stream as it was before the update."""
        reply = await self.ctx.requester.request_when_answered(
            stream_subject(name, op), payload, STREAM_READY_TIMEOUT, with_meta_index(None, self.applied_index)
        )
        return reply.payload


class _RestoreSteps:
    """A restore's rebuild (cluster/meta/restore.py) done with the meta leader's own create, update and
    delete, and the stream leader storing the messages."""

    def __init__(self, meta: MetaService) -> None:
        self._meta = meta

    async def create_stream(self, name: str, config: dict[str, Any]) -> None:
        payload = jsjson.dumps(config)
        await self._meta._create(name, Message(f"$JS.API.STREAM.CREATE.{name}", None, None, payload))

    async def store_restored(self, name: str, batch: bytes) -> None:
        reply = await self._meta.ctx.requester.request_when_answered(
            stream_subject(name, ApiOp.RESTORE_MSGS), batch, STREAM_READY_TIMEOUT, None
        )
        if is_error_response(reply.payload):
            error = orjson.loads(reply.payload).get("error") or {}
            raise RuntimeError(error.get("description", "the stream leader refused the messages"))

    async def update_stream(self, name: str, config: dict[str, Any]) -> None:
        await self._meta._update(name, jsjson.dumps(config), advise=False)

    async def delete_stream(self, name: str) -> None:
        await self._meta._delete(name)

    async def create_consumer(self, name: str, consumer: ArchivedConsumer) -> None:
        await self._meta.consumer_admin.create_restored(name, consumer.name, consumer.config, consumer.state)

    async def restored_info(self, name: str) -> bytes:
        return await self._meta._ask_stream(name, ApiOp.CREATE_RESULT, b"0")


def _error_body(request: ApiRequest, error: ApiError) -> bytes:
    if request.op is ApiOp.STREAM_RESTORE:
        return error_response(request.response_type, error, deliver_subject="")
    if request.op in UNIMPLEMENTED_OPS:
        return unimplemented_error_body(request, error)
    if request.op is ApiOp.STREAM_INFO:
        return stream_info_error(error)
    if request.op is ApiOp.STREAM_DELETE:
        return plain_error(STREAM_DELETE_TYPE, error)
    if request.op is ApiOp.STREAM_PURGE:
        return stream_purge_error(error)
    if request.op in (ApiOp.STREAM_NAMES, ApiOp.STREAM_LIST):
        # nats-server's paged responses print their (zero) paging and the list after the error: null
        # for names, empty for the list
        streams = None if request.op is ApiOp.STREAM_NAMES else []
        return error_response(request.response_type, error, total=0, offset=0, limit=0, streams=streams)
    return plain_error(request.response_type, error)


def _drop_stores(engine: StreamStoreEngine, names: list[str]) -> None:
    for name in names:
        engine.drop_store(name)


class _PlacementView:
    """One account's streams as AccountsPlacement reads them."""

    def __init__(self, service: MetaService) -> None:
        self._service = service

    def load(self) -> dict[str, int]:
        return self._service.machine.load()

    def first_peers(self) -> dict[str, int]:
        return self._service.machine.first_peers()

    def configs(self) -> dict[str, StreamConfig]:
        return self._service.configs()

    def peers_of(self, stream: str) -> list[str]:
        assignment = self._service.machine.streams.get(stream)
        return assignment.peers if assignment is not None else []
