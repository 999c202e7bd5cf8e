"""The asyncio host that runs many Raft groups in one node process.

Each group is a `RaftCore` on a `RocksLogStorage` (or a `MemoryLogStorage`)
with a `StateMachine` that receives its committed entries. One loop serves
every group, in etcd's order:

1. take the `Ready` of every group that has one;
2. persist them all: entries, hard states and snapshots go into one RocksDB
   write batch, fsynced once (group commit) on the writer thread;
3. send their messages (only now: an ack or a vote must never leave before
   the state it promises is durable; a leader's appends and heartbeats are
   the exception, sent before its own write, see `_send_early`; a Ready that
   changes only the commit index is not written at all, its hard state rides
   with the next write);
4. restore snapshots and apply committed entries to the state machines,
   completing the futures of the proposals and reads they answer;
5. `advance()` each core.

While step 2 waits for the disk, inbound messages are stepped into the cores
and proposals are buffered, so the next iteration carries everything that
arrived meanwhile: under load each fsync covers many entries of many groups.

Bounded everywhere: proposals beyond `max_pending_proposals` per group are
refused, the transport's per-peer queues drop (and report) when a peer is
down, and inbound messages are stepped at once rather than queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog

from raft.core import ConfChangeRejectedError, ProposalDroppedError, RaftConfig, RaftCore, RaftError
from raft.liveness import NodeLiveness
from raft.log_storage import MemoryLogStorage
from raft.recovery import RecoveryLedger
from raft.rocks_log_storage import RocksLogEngine, RocksLogStorage
from raft.transport import RaftTransport
from raft.types import (
    ConfChange,
    ConfState,
    Entry,
    Message,
    MessageType,
    NodeId,
    Ready,
    Role,
    Snapshot,
    SnapshotMetadata,
)

log = structlog.get_logger(__name__)

# A write this small is done on the loop rather than the writer thread (see `_persist_inline`).
INLINE_PERSIST_BYTES = 16 * 1024
# What a leader may send before its own write completes (see `_send_early`).
_SENT_EARLY = frozenset({MessageType.APPEND, MessageType.HEARTBEAT})


class StateMachine(Protocol):
    """What a group's committed entries are applied to. Must be deterministic."""

    def apply(self, entries: Sequence[Entry]) -> Sequence[Any]:
        """Apply committed entries in order; one result per entry (conf-change and empty entries
        included, so the machine can track its applied index; their result is ignored)."""
        ...

    def snapshot(self) -> bytes:
        """An image of the state as of the last applied entry."""
        ...

    def restore(self, snapshot: Snapshot) -> None:
        """Replace the whole state with `snapshot` (applied index becomes `snapshot.index`)."""
        ...

    @property
    def applied_index(self) -> int:
        """The last index the machine holds; read once when the group starts (0 for a memory machine)."""
        ...


class SnapshotImages(Protocol):
    """A state machine with a durable store of its own may make `snapshot()` a small marker (the store is
    synced first, so the log can be compacted behind it) and produce a follower's image only when one
    must be sent: snapshotting then costs nothing in proportion to the data."""

    def snapshot_image(self) -> Callable[[], bytes] | None:
        """The state as of now (the last applied entry), as a function that builds the image and may run
        on another thread while this machine keeps applying; None to send the stored snapshot as is."""
        ...


class RaftHostError(Exception):
    """Base of the errors the driver gives to its callers."""


class GroupNotFoundError(RaftHostError):
    pass


class NotLeaderError(RaftHostError):
    """This node cannot take the request; `leader_id` is the leader it knows of, if any."""

    def __init__(self, group: str, leader_id: NodeId | None) -> None:
        super().__init__(f"not the leader of group {group!r} (leader: {leader_id or 'unknown'})")
        self.group = group
        self.leader_id = leader_id


class LeadershipLostError(RaftHostError):
    """Leadership changed before the proposal applied: it may or may not commit later."""


class ProposalQueueFullError(RaftHostError):
    """Too many proposals of this group are waiting; retry later."""


class GroupStoppedError(RaftHostError):
    """The group was removed or failed while the request waited."""


class ReadIndexTimeoutError(RaftHostError):
    """No confirmed read point arrived in time (leader change or no quorum)."""


@dataclass(frozen=True, slots=True)
class GroupOptions:
    """Per-group settings; ticks are of the host's `tick_interval`."""

    election_tick: int = 10
    heartbeat_tick: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    max_size_per_msg: int = 1 << 20
    max_entries_per_msg: int = 4096
    max_inflight_msgs: int = 256
    # UNSAFE when False: the group's entries and votes are written without
    # fsync, so a power failure or kernel crash can lose acknowledged entries
    # and let a node vote twice in one term. Only for data you can lose.
    sync: bool = True
    # Take a state-machine snapshot after this many applied entries (0: never),
    # then drop the log behind it except the last `compact_keep` entries, which
    # lets a briefly lagging follower catch up without a snapshot.
    snapshot_interval: int = 10_000
    compact_keep: int = 1_000
    max_pending_proposals: int = 100_000
    # Proposals handed to the core per loop iteration (the rest wait a turn).
    max_proposals_per_ready: int = 8_192
    # Committed entries applied per loop iteration, in bytes (at least one entry; the rest in the next
    # iterations, a loop turn apart, so the results of one slice can leave before the next is applied).
    max_committed_size_per_ready: int = 16 << 20
    # Let the group quiesce when idle (see `RaftCore.quiesced`): no ticks, no heartbeats; the host's
    # node liveness (keepalive frames, one per pair of nodes for all groups) wakes it.
    quiesce: bool = False
    # Leader leases for reads (RaftConfig.read_lease): a leader answers reads without a ReadIndex round
    # for a while after a quorum answered one. Linearizable as long as no host's clock runs faster than
    # another's by more than the margin (LEASE_MARGIN_TICKS of the election timeout); off: every
    # read waits for a round to a quorum.
    read_lease: bool = False


# Of the election timeout a leader lease leaves out: one tick for the alignment of the voters' ticks and
# one for clock drift and the host's own delay in taking a read.
LEASE_MARGIN_TICKS = 2

LeaderChangeCallback = Callable[[str, NodeId | None, Role, int], None]
"""(group, leader id, this node's role, term) whenever the leader or this node's role changes."""


@dataclass(slots=True)
class GroupStatus:
    group: str
    node_id: NodeId
    role: Role
    leader_id: NodeId | None
    term: int
    commit_index: int
    applied_index: int
    first_index: int
    last_index: int
    snapshot_index: int
    voters: tuple[NodeId, ...]
    learners: tuple[NodeId, ...]
    snapshots_restored: int
    snapshots_taken: int


class _Group:
    """One group's core, storage, state machine and the requests waiting on it."""

    def __init__(
        self,
        host: RaftHost,
        name: str,
        core: RaftCore,
        storage: RocksLogStorage | MemoryLogStorage,
        machine: StateMachine,
        options: GroupOptions,
    ) -> None:
        self.host = host
        self.name = name
        self.core = core
        # peer -> when a message from it last arrived (monotonic ns): STREAM.INFO's replica `active`
        self.last_heard: dict[NodeId, int] = {}
        self.storage = storage
        self.machine = machine
        self.options = options
        self.proposals: list[tuple[bytes, asyncio.Future[Any]]] = []
        # index -> (term it was proposed in, future)
        self.waiting: dict[int, tuple[int, asyncio.Future[Any]]] = {}
        # reads asked for since the last iteration: they share one ReadIndex round
        self.read_batch: list[asyncio.Future[int]] = []
        # read ctx -> (host iteration it was handed to the core in, the batch it confirms);
        # then (index, future) once the leader confirmed a read point
        self.reads: dict[bytes, tuple[int, list[asyncio.Future[int]]]] = {}
        self.confirmed_reads: list[tuple[int, asyncio.Future[int]]] = []
        self.applied = core.applied
        self.snapshot_index = storage.snapshot().index
        self.snapshots_restored = 0
        self.snapshots_taken = 0
        # Replaced on every change, so every waiter holding the old one wakes.
        self.leader_changed = asyncio.Event()
        self.applied_waiters: list[tuple[int, asyncio.Future[None]]] = []
        # peers an InstallSnapshot image is being built for
        self.imaging: set[NodeId] = set()
        self.stopped = False

    @property
    def pending_count(self) -> int:
        return len(self.proposals) + len(self.waiting)

    def fail_all(self, exc_factory: Callable[[], Exception]) -> None:
        for _, future in self.proposals:
            _fail(future, exc_factory())
        self.proposals.clear()
        for _, future in self.waiting.values():
            _fail(future, exc_factory())
        self.waiting.clear()
        for future in self.read_batch:
            _fail(future, exc_factory())
        self.read_batch.clear()
        for _, batch in self.reads.values():
            for future in batch:
                _fail(future, exc_factory())
        self.reads.clear()
        for _, future in self.confirmed_reads:
            _fail(future, exc_factory())
        self.confirmed_reads.clear()
        for _, waiter in self.applied_waiters:
            _fail(waiter, exc_factory())
        self.applied_waiters.clear()
        self.leader_changed.set()


def _expire_read(future: asyncio.Future[int], group: str, timeout: float) -> None:
    _fail(future, ReadIndexTimeoutError(f"no read point for group {group!r} within {timeout}s"))


def _fail(future: asyncio.Future[Any], exc: Exception) -> None:
    if not future.done():
        future.set_exception(exc)


# Votes for a group this node has not started yet: peers apply a new group's assignment at slightly
# different times, and a vote dropped for that reason costs the group's first candidate an election
# timeout. They are kept this long (at most this many per group, for this many groups) and handed to the
# group when it starts; a vote is a request its candidate may send again, so keeping it is always safe.
EARLY_VOTE_TTL_S = 2.0
EARLY_VOTES_PER_GROUP = 8
EARLY_VOTE_GROUPS = 256


class RaftHost:
    """Runs this node's Raft groups: ticks, steps, persists, sends, applies.

    `engine` is the node's Raft-log database; without one, groups keep their
    logs in memory (tests). The transport is created here (its `deliver`
    is this host) and exposed as `transport` so the caller can add peers and
    add its servicer to the node's gRPC server.
    """

    def __init__(
        self,
        node_id: NodeId,
        engine: RocksLogEngine | None,
        *,
        tick_interval: float = 0.05,
        on_leader_change: LeaderChangeCallback | None = None,
        transport_options: dict[str, Any] | None = None,
        keepalive_ticks: int = 4,
        liveness_timeout: float = 1.0,
        recovery: RecoveryLedger | None = None,
    ) -> None:
        self.node_id = node_id
        self.engine = engine
        # set when this node discarded damaged Raft state: its groups start recovering (raft/recovery.py)
        self.recovery = recovery
        self.tick_interval = tick_interval
        # ticks fired so far: every group core starts at this phase (RaftConfig.tick_phase)
        self._ticks = 0
        self._on_leader_change = on_leader_change
        # Every frame to a peer says this node is alive; a link with nothing to carry sends an empty
        # one every `keepalive_ticks`, and a peer silent for `liveness_timeout` is down for every group.
        self.keepalive_ticks = keepalive_ticks
        self.liveness = NodeLiveness(liveness_timeout)
        self.transport = RaftTransport(
            node_id,
            self._deliver,
            on_unreachable=self._report_unreachable,
            on_snapshot_sent=self._report_snapshot,
            on_frame=self._heard_from,
            incarnation=secrets.randbits(64),
            **(transport_options or {}),
        )
        self._groups: dict[str, _Group] = {}
        # bumped whenever a group starts or stops here: what reads groups() can tell whether it changed
        self.groups_generation = 0
        # group -> (arrival, message): votes for groups not started here yet (EARLY_VOTE_TTL_S)
        self._early_votes: dict[str, list[tuple[float, Message]]] = {}
        # the groups whose cores are ticked: a quiesced core leaves, and comes back when it wakes
        self._awake: set[_Group] = set()
        self._dirty: set[_Group] = set()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._tick_task: asyncio.Task[None] | None = None
        self._read_ids = itertools.count(1)
        self._read_prefix = secrets.token_bytes(4)
        # the election timeouts' randomness, one generator for every group here (all on this loop):
        # seeding one per group cost each new group a few microseconds for nothing
        self._rng = random.Random(secrets.randbits(64))
        self.iterations = 0
        # passes over the groups (an iteration makes one, or two: see `_iteration`): a read handed to a
        # core in an earlier pass than the one reporting a leadership change was asked of the old role
        self._passes = 0
        # the last iteration whose callbacks, and what they scheduled, have run (see `_run`)
        self._settled_after = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop_task = loop.create_task(self._run(), name=f"raft-host-{self.node_id}")
        self._tick_task = loop.create_task(self._tick_loop(), name=f"raft-ticks-{self.node_id}")

    async def stop(self) -> None:
        """Stop ticking and processing, fail waiting requests, close the transport (not the engine)."""
        for task in (self._tick_task, self._loop_task):
            if task is not None:
                task.cancel()
        for task in (self._tick_task, self._loop_task):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._tick_task = self._loop_task = None
        for group in self._groups.values():
            group.stopped = True
            group.fail_all(lambda: GroupStoppedError("the raft host stopped"))
        await self.transport.close()

    # ------------------------------------------------------------------ groups

    def add_group(
        self,
        name: str,
        machine: StateMachine,
        *,
        voters: Sequence[NodeId] = (),
        learners: Sequence[NodeId] = (),
        options: GroupOptions | None = None,
    ) -> None:
        """Start `name` on this node. `voters`/`learners` seed a group this node has never stored;
        a group recovered from disk keeps its own membership."""
        if name in self._groups:
            raise ValueError(f"group {name!r} is already running")
        options = options or GroupOptions()
        conf = ConfState(tuple(sorted(voters)), tuple(sorted(learners)))
        storage: RocksLogStorage | MemoryLogStorage
        if self.engine is not None:
            storage = self.engine.open_group(name, conf_state=conf)
        else:
            storage = MemoryLogStorage(conf)
        stored = storage.snapshot()
        applied = machine.applied_index
        if stored.index > applied:
            # A memory machine (or one behind the log's snapshot) starts from the snapshot.
            if stored.data or stored.index:
                machine.restore(stored)
            applied = stored.index
        config = RaftConfig(
            id=self.node_id,
            election_tick=options.election_tick,
            heartbeat_tick=options.heartbeat_tick,
            pre_vote=options.pre_vote,
            check_quorum=options.check_quorum,
            max_size_per_msg=options.max_size_per_msg,
            max_entries_per_msg=options.max_entries_per_msg,
            max_inflight_msgs=options.max_inflight_msgs,
            max_committed_size_per_ready=options.max_committed_size_per_ready,
            applied=applied,
            tick_phase=self._ticks,
            read_lease=self._read_lease(options),
            quiesce=options.quiesce,
            recovering=self.recovery is not None and self.recovery.recovering(name),
        )
        core = RaftCore(config, storage, self._rng)
        if config.recovering:
            log.warning("raft_group_recovering", group=name, node=self.node_id, voting=not core.recovering)
        for peer in self.liveness.down():
            core.peer_down(peer)
        group = _Group(self, name, core, storage, machine, options)
        self._groups[name] = group
        self.groups_generation += 1
        self._mark(group)
        self._hand_early_votes(name)

    async def remove_group(self, name: str, *, delete_data: bool = False) -> None:
        """Stop `name` here; with `delete_data` its log is deleted too."""
        group = self._groups.pop(name, None)
        if group is None:
            raise GroupNotFoundError(name)
        self.groups_generation += 1
        group.stopped = True
        self._dirty.discard(group)
        self._awake.discard(group)
        group.fail_all(lambda: GroupStoppedError(f"group {name!r} was removed"))
        if self.engine is not None:
            if delete_data:
                self.engine.drop_group(name)
                await self.engine.persist()
            else:
                self.engine.close_group(name)

    def groups(self) -> list[str]:
        return list(self._groups)

    def stored_groups(self) -> list[str]:
        """Every group with a log in this host's database, running or not."""
        return self.engine.groups() if self.engine is not None else []

    async def drop_stored_groups(self, names: Iterable[str]) -> list[str]:
        """Delete the logs of groups that are not running here (a running one is skipped); the dropped."""
        if self.engine is None:
            return []
        dropped = [name for name in names if name not in self._groups]
        for name in dropped:
            self.engine.drop_group(name)
        if dropped:
            await self.engine.persist()
        return dropped

    def retire_recovery(self) -> bool:
        """If every group running here has caught up since the node's damaged state was discarded, retire
        the recovery ledger (the caller knows these are all the groups it had); whether it was retired."""
        recovery = self.recovery
        if recovery is None or not recovery.done(list(self._groups)):
            return False
        recovery.retire()
        self.recovery = None
        return True

    def recovering_groups(self) -> list[str]:
        """Groups whose member here lost state with damaged files and waits to be caught up (no vote)."""
        return sorted(name for name, group in self._groups.items() if group.core.recovering)

    def status(self, name: str) -> GroupStatus:
        group = self._group(name)
        core = group.core
        return GroupStatus(
            group=name,
            node_id=self.node_id,
            role=core.role,
            leader_id=core.leader_id,
            term=core.term,
            commit_index=core.commit_index,
            applied_index=group.applied,
            first_index=group.storage.first_index(),
            last_index=core.last_index,
            snapshot_index=group.storage.snapshot().index,
            voters=core.voters,
            learners=core.learners,
            snapshots_restored=group.snapshots_restored,
            snapshots_taken=group.snapshots_taken,
        )

    def last_index(self, name: str) -> int:
        """`status(name).last_index` without building the whole status (every stream create asks)."""
        return self._group(name).core.last_index

    def term(self, name: str) -> int:
        """`status(name).term`, without building the whole status."""
        return self._group(name).core.term

    def voters(self, name: str) -> tuple[NodeId, ...]:
        """`status(name).voters`, without building the whole status."""
        return self._group(name).core.voters

    def positions(self) -> Iterator[tuple[str, int, int, int]]:
        """(group, commit index, applied index, term) of every group here: what `status` says of each,
        without building one (the node exports them every second, for thousands of groups)."""
        for name, group in self._groups.items():
            core = group.core
            yield name, core.commit_index, group.applied, core.term

    def peer_progress(self, name: str) -> dict[NodeId, tuple[int, bool]]:
        """peer -> (match index, recently active) as this node's core tracks them while it leads `name`."""
        return {peer: (p.match, p.recent_active) for peer, p in self._group(name).core.progress.items()}

    def peer_silence_ns(self, name: str) -> dict[NodeId, int]:
        """peer -> nanoseconds since a message from it last arrived for group `name` (peers never heard
        from are absent)."""
        now = time.monotonic_ns()
        return {peer: now - at for peer, at in self._group(name).last_heard.items()}

    def is_leader(self, name: str) -> bool:
        return self._group(name).core.role is Role.LEADER

    def leads_with_nothing_before_term(self, name: str) -> bool:
        """Whether this node leads `name` with no entry from an earlier term in its log (see
        `RaftCore.nothing_before_term`): it has caught up already, without a ReadIndex round."""
        return self._group(name).core.nothing_before_term

    def leader_of(self, name: str) -> NodeId | None:
        return self._group(name).core.leader_id

    async def wait_for_leader(self, name: str, timeout: float) -> NodeId:
        """Until some node leads `name`; its id."""
        group = self._group(name)

        async def known() -> NodeId:
            while group.core.leader_id is None:
                if group.stopped:
                    raise GroupStoppedError(f"group {name!r} stopped")
                await group.leader_changed.wait()
            return group.core.leader_id

        return await asyncio.wait_for(known(), timeout)

    async def wait_leadership_change(self, name: str) -> None:
        """Until the leader of `name` or this node's role in it next changes."""
        await self._group(name).leader_changed.wait()

    async def wait_applied(self, name: str, index: int, timeout: float | None = None) -> None:
        """Until this node has applied `name` up to `index`."""
        group = self._group(name)
        if group.applied >= index:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        group.applied_waiters.append((index, waiter))
        await asyncio.wait_for(waiter, timeout)

    def _group(self, name: str) -> _Group:
        group = self._groups.get(name)
        if group is None:
            raise GroupNotFoundError(f"group {name!r} is not running on {self.node_id}")
        return group

    # ------------------------------------------------------------------ requests

    def propose_nowait(self, name: str, data: bytes) -> asyncio.Future[Any]:
        """Queue a command for `name`; the future completes with the state machine's result once
        the entry is committed and applied here, or fails (NotLeaderError, LeadershipLostError...)."""
        group = self._group(name)
        core = group.core
        if core.role is not Role.LEADER:
            raise NotLeaderError(name, core.leader_id)
        if group.pending_count >= group.options.max_pending_proposals:
            raise ProposalQueueFullError(f"group {name!r} has {group.pending_count} proposals waiting")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        group.proposals.append((data, future))
        self._mark(group)
        return future

    async def propose(self, name: str, data: bytes) -> Any:
        return await self.propose_nowait(name, data)

    async def change_membership(self, name: str, change: ConfChange) -> int:
        """Propose a membership change on the leader; returns its index once applied here."""
        group = self._group(name)
        core = group.core
        if core.role is not Role.LEADER:
            raise NotLeaderError(name, core.leader_id)
        try:
            index = core.propose_conf_change(change)
        except ProposalDroppedError as exc:
            raise NotLeaderError(name, core.leader_id) from exc
        except ConfChangeRejectedError as exc:
            raise RaftHostError(str(exc)) from exc
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        group.waiting[index] = (core.term, future)
        self._mark(group)
        await future
        return index

    async def read_index(self, name: str, timeout: float | None = None) -> int:
        """A commit index that was current when this was called, once applied here.

        Reading the state machine after this returns is linearizable. Works on
        followers too (the leader confirms its leadership and answers).
        """
        return await self.read_index_nowait(name, timeout)

    def read_index_nowait(self, name: str, timeout: float | None = None) -> asyncio.Future[int]:
        """`read_index` as a future, for a caller that answers from a callback rather than a task;
        it fails with ReadIndexTimeoutError after `timeout` (by default two election timeouts)."""
        group = self._group(name)
        core = group.core
        if core.role is not Role.LEADER and core.leader_id is None:
            raise NotLeaderError(name, None)
        # Reads asked for before the next iteration share its ReadIndex round (one heartbeat to every
        # follower for all of them): each was asked before the read point is taken, so it is still
        # linearizable.
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        index = core.lease_read(loop.time()) if group.options.read_lease else -1
        if index >= 0 and index <= group.applied:
            # the leader's lease answers at once: no round, and no wait for the next iteration either
            future.set_result(index)
            return future
        if index >= 0:
            group.confirmed_reads.append((index, future))  # answered once applied that far
        else:
            group.read_batch.append(future)
        self._mark(group)
        if timeout is None:
            timeout = 2 * group.options.election_tick * self.tick_interval
        timer = loop.call_later(timeout, _expire_read, future, name, timeout)
        future.add_done_callback(lambda _: timer.cancel())
        return future

    async def transfer_leadership(self, name: str, to: NodeId, timeout: float | None = None) -> None:
        """Ask leadership of `name` to move to `to`; returns once `to` leads (as seen here)."""
        group = self._group(name)
        try:
            group.core.transfer_leader(to)
        except ProposalDroppedError as exc:
            raise RaftHostError(str(exc)) from exc
        self._mark(group)
        if timeout is None:
            timeout = 2 * group.options.election_tick * self.tick_interval

        async def moved() -> None:
            while group.core.leader_id != to:
                if group.stopped:
                    raise GroupStoppedError(f"group {name!r} stopped")
                await group.leader_changed.wait()

        await asyncio.wait_for(moved(), timeout)

    def campaign(self, name: str) -> None:
        """Start an election for `name` now (tests, or a node told it should lead)."""
        group = self._group(name)
        group.core.campaign()
        self._mark(group)

    def set_preferred_leader(self, name: str, node_id: NodeId | None) -> None:
        """Name the member that should lead `name` (placement's choice, to spread leaders over nodes):
        whoever leads hands over to it by leadership transfer once it is caught up and answering, so
        the spread comes back after a restart. Set it on every replica: any of them may come to lead."""
        group = self._group(name)
        group.core.set_preferred_leader(node_id)
        self._mark(group)

    def snapshot_now(self, name: str) -> int:
        """Snapshot `name` at its applied index and compact its log; returns the snapshot index."""
        group = self._group(name)
        self._take_snapshot(group)
        return group.snapshot_index

    # ------------------------------------------------------------------ transport callbacks

    def _deliver(self, name: str, msg: Message) -> bool:
        group = self._groups.get(name)
        if group is None:
            if msg.type in (MessageType.PRE_VOTE, MessageType.VOTE):
                self._keep_early_vote(name, msg)
            return False
        group.last_heard[msg.from_] = time.monotonic_ns()
        core = group.core
        if core.quiesced:
            core.sync_ticks(self._ticks)  # it times its leader's last word in ticks (read leases)
        try:
            core.step(msg)
        except RaftError as exc:
            log.warning("raft message refused", group=name, peer=msg.from_, error=str(exc))
            return False
        self._mark(group)
        return True

    def _keep_early_vote(self, name: str, msg: Message) -> None:
        early = self._early_votes
        if name not in early and len(early) >= EARLY_VOTE_GROUPS:
            del early[next(iter(early))]  # the group waiting longest: its votes are the stalest
        kept = early.setdefault(name, [])
        if len(kept) < EARLY_VOTES_PER_GROUP:
            kept.append((time.monotonic(), msg))

    def _hand_early_votes(self, name: str) -> None:
        now = time.monotonic()
        for arrived, msg in self._early_votes.pop(name, []):
            if now - arrived <= EARLY_VOTE_TTL_S:
                self._deliver(name, msg)

    def _report_unreachable(self, name: str, peer: NodeId) -> None:
        group = self._groups.get(name)
        if group is not None:
            group.core.report_unreachable(peer)
            self._mark(group)

    def _report_snapshot(self, name: str, peer: NodeId, ok: bool) -> None:
        group = self._groups.get(name)
        if group is not None:
            group.core.report_snapshot(peer, ok)
            self._mark(group)

    # ------------------------------------------------------------------ the loop

    def _mark(self, group: _Group) -> None:
        self._dirty.add(group)
        self._keep_awake(group)
        if not self._wake.is_set():
            self._wake.set()

    def _keep_awake(self, group: _Group) -> None:
        """Tick `group` again if its core woke (on the host's phase, so heartbeats share frames)."""
        if group not in self._awake and not group.core.quiesced and not group.stopped:
            group.core.sync_ticks(self._ticks)
            self._awake.add(group)

    def _heard_from(self, peer: NodeId, incarnation: int) -> None:
        if self.liveness.heard(peer, incarnation, asyncio.get_running_loop().time()):
            log.info("raft peer up", peer=peer)
            self._tell_groups(peer, up=True)

    def _tell_groups(self, peer: NodeId, up: bool) -> None:
        for group in self._groups.values():
            core = group.core
            was_quiesced = core.quiesced
            if was_quiesced:
                core.sync_ticks(self._ticks)
            if up:
                core.peer_up(peer)
            else:
                core.peer_down(peer)
            if was_quiesced and not core.quiesced:
                self._mark(group)

    def quiesced_groups(self) -> int:
        """How many of this node's groups are quiesced (metrics, tests)."""
        return sum(1 for group in self._groups.values() if group.core.quiesced)

    async def _tick_loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_tick = loop.time()
        while True:
            next_tick += self.tick_interval
            delay = next_tick - loop.time()
            if delay < 0:
                # The loop fell behind (a long GC pause, an overloaded machine):
                # skip the missed ticks rather than firing a burst of them.
                next_tick = loop.time()
                delay = 0
            await asyncio.sleep(delay)
            self._ticks += 1
            if self._ticks % self.keepalive_ticks == 0:
                self.transport.keepalive()
            for peer in self.liveness.expired(loop.time()):
                log.info("raft peer down", peer=peer)
                self._tell_groups(peer, up=False)
            asleep = []
            for group in self._awake:
                core = group.core
                core.tick()
                self._dirty.add(group)
                if core.quiesced:
                    asleep.append(group)
            self._awake.difference_update(asleep)
            self._wake.set()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._settled_after != self.iterations:
                # `wait()` on a set event returns without yielding: give the callbacks the last
                # iteration scheduled (proposal results, hence PubAcks) their turn first, and then
                # what they scheduled in turn (the client writes carrying those PubAcks). Once they
                # had both turns (see `_settle`), a wake finds nothing of it waiting: a proposal made
                # on an idle node (a one-node create) is written at once.
                await asyncio.sleep(0)
                await asyncio.sleep(0)
            try:
                await self._iteration()
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug in one iteration must not silently stop every group on the node.
                log.exception("raft host iteration failed")
            loop.call_soon(self._settle, self.iterations, False)

    def _settle(self, iteration: int, second_turn: bool) -> None:
        """Runs after the callbacks `iteration` scheduled, then (`second_turn`) after what they scheduled."""
        if second_turn:
            self._settled_after = iteration
        else:
            asyncio.get_running_loop().call_soon(self._settle, iteration, True)

    async def _iteration(self) -> None:
        self.iterations += 1
        dirty, self._dirty = self._dirty, set()
        committed = await self._process(dirty)
        if committed:
            # Entries a group's own write just committed (a single voter's, or a leader's whose
            # followers answered before its disk did) are applied now, not in the next iteration:
            # that one would start only after the loop's next turns, and a one-node create or
            # publish waits for these entries alone.
            self._dirty.difference_update(committed)
            await self._process(committed)

    async def _process(self, dirty: Iterable[_Group]) -> list[_Group]:
        """One pass over `dirty`: take, persist, send, apply, advance. Returns the groups whose advance
        committed entries (their next Ready holds them)."""
        self._passes += 1
        readies: list[tuple[_Group, Ready, Sequence[Message]]] = []
        # groups whose core caught up after this node's damaged state was discarded: struck off the
        # recovery ledger once the Ready taken now, which holds what they caught up, is on disk
        recovered: list[str] = []
        for group in dirty:
            if group.stopped:
                continue
            if group.proposals:
                self._hand_proposals(group)
            if group.read_batch:
                self._hand_reads(group)
            self._keep_awake(group)
            core = group.core
            if core.has_ready():
                if self.recovery is not None and not core.recovering and self.recovery.recovering(group.name):
                    recovered.append(group.name)
                readies.append((group, core.ready(), ()))
        if not readies:
            return []

        send = self.transport.send
        must_write = False
        sync = False
        sent_early = False
        for position, (group, ready, _) in enumerate(readies):
            held = self._send_early(group, ready)
            sent_early = sent_early or len(held) < len(ready.messages)
            readies[position] = (group, ready, held)
            self._stage(group, ready)
            if ready.must_sync:
                must_write = True
                sync = sync or group.options.sync
        # A Ready that changes only the commit index needs no write of its own:
        # the commit index only shortens recovery, it promises nothing, so it
        # rides along with the next write that must happen anyway.
        if must_write and self.engine is not None:
            try:
                if self._persist_inline():
                    staged = self.engine.take_staged()  # ours alone, even if another persist runs meanwhile
                    if sent_early:
                        await asyncio.sleep(0)  # the link tasks write the appends sent early first
                    self.engine.write_staged(staged, sync)
                else:
                    await self.engine.persist(sync)
            except Exception as exc:
                # Nothing of these Readies may be sent or applied, and their cores
                # wait for an advance that can never safely come: stop them.
                log.exception("raft log write failed; stopping the groups that wrote")
                for group, _, _ in readies:
                    self._fail_group(group, exc)
                return []
        if recovered and self.recovery is not None:
            for name in recovered:
                self.recovery.caught_up(name)
                log.info("raft_group_recovered", group=name, node=self.node_id)

        # Commit notices go out after the applying below: each gRPC write costs its link task a few
        # hundred microseconds of this loop, and the proposals' callbacks (PubAcks) scheduled by the
        # applying should run first; a follower learns of the commit a moment later.
        notices: list[tuple[str, Message]] = []
        for group, _, held in readies:
            if group.stopped:
                continue
            name = group.name
            for msg in held:
                if msg.type is MessageType.COMMIT:
                    notices.append((name, msg))
                elif msg.type is MessageType.SNAPSHOT:
                    self._send_snapshot(group, msg)
                else:
                    send(name, msg)

        committed: list[_Group] = []
        for group, ready, _ in readies:
            if group.stopped:
                continue
            try:
                self._apply(group, ready)
                core = group.core
                commit_index = core.commit_index
                core.advance(ready)
                if core.commit_index > commit_index:
                    committed.append(group)
                options = group.options
                if (
                    options.snapshot_interval
                    and group.applied - group.snapshot_index >= options.snapshot_interval
                ):
                    self._take_snapshot(group)
            except Exception as exc:
                log.exception("raft group failed; stopping it", group=group.name)
                self._fail_group(group, exc)
                continue
            # advance() may have made more ready (the next committed batch).
            self._dirty.add(group)
        if notices:
            # Scheduled, not sent: the proposal callbacks scheduled by the applying run first, and
            # the client flushes they schedule run before the link tasks these wake.
            asyncio.get_running_loop().call_soon(self._send_notices, notices)
        if self._dirty:
            self._wake.set()
        return committed

    def _persist_inline(self) -> bool:
        """Whether to write this batch on the loop rather than the writer thread.

        A small write (one command at a time, say) is on its commit's critical path: a follower's
        acknowledgement waits for it, and so does the leader's count of its own copy. Done here it
        costs the loop the fsync; on the writer thread it costs two thread hand-offs on top, which
        measured more (raft_bench, one in flight). A leader first lets its link tasks write the appends
        it sent early. A large write, under load, goes to the writer thread, so the loop keeps reading
        and sending while the disk works.
        """
        engine = self.engine
        return engine is not None and engine.pending_bytes() <= INLINE_PERSIST_BYTES

    def _send_notices(self, notices: list[tuple[str, Message]]) -> None:
        send = self.transport.send
        groups = self._groups
        for name, msg in notices:
            group = groups.get(name)
            # A proposal made since (say, by a proposer answering the last one at once) goes out in the
            # next iteration's appends, which carry the commit index: the notice would only cost the
            # follower a frame and an iteration just ahead of the append it waits for.
            if group is not None and not group.proposals:
                send(name, msg)

    def _send_early(self, group: _Group, ready: Ready) -> Sequence[Message]:
        """Send a leader's appends and heartbeats now, in parallel with its own fsync; return the rest.

        Safe because the core counts the leader's own entries towards the
        commit quorum only after `advance()` confirms them durable (Raft thesis
        §10.2.1): the commit index these messages carry, and any later one,
        rests on a quorum of durable copies, so a follower or learner never
        applies an entry that a crash of this leader mid-write could erase.
        Everything else (acknowledgements, votes, TimeoutNow, snapshots) waits
        for the disk, and so does everything when this Ready changes the term
        or vote.
        """
        messages = ready.messages
        if not messages or group.core.role is not Role.LEADER:
            return messages
        hard = ready.hard_state
        if hard is not None:
            stored = group.storage.hard_state
            if hard.term != stored.term or hard.vote != stored.vote:
                return messages  # a new term or vote must be durable before anyone hears of it
        send = self.transport.send
        name = group.name
        held = []
        for msg in messages:
            if msg.type in _SENT_EARLY:
                send(name, msg)
            else:
                held.append(msg)
        return held

    def _send_snapshot(self, group: _Group, msg: Message) -> None:
        """Send the stored snapshot, or for a machine with `snapshot_image`, a fresh image of its state
        as of now, built off the loop. The image may be newer than the snapshot the core chose: any
        image of committed state will do, and the follower's answer names the index it reached."""
        peer = msg.to
        if peer in group.imaging:
            return  # the core asked again while the last image is being built; it hears about that one
        image = getattr(group.machine, "snapshot_image", None)
        build = image() if image is not None else None
        if build is None:
            self.transport.send(group.name, msg)
            return
        index = group.applied
        metadata = SnapshotMetadata(index, group.storage.term(index), group.core.conf_state_at(index))
        group.imaging.add(peer)
        asyncio.get_running_loop().create_task(
            self._build_and_send_snapshot(group, msg, metadata, build), name=f"raft-image-{group.name}-{peer}"
        )

    async def _build_and_send_snapshot(
        self, group: _Group, msg: Message, metadata: SnapshotMetadata, build: Callable[[], bytes]
    ) -> None:
        try:
            data = await asyncio.to_thread(build)
        except Exception:
            log.exception("building a snapshot image failed", group=group.name, peer=msg.to)
            if not group.stopped:
                self._report_snapshot(group.name, msg.to, False)
            return
        finally:
            group.imaging.discard(msg.to)
        if group.stopped or group.core.role is not Role.LEADER or group.core.term != msg.term:
            return  # the progress it was for is gone with the leadership
        self.transport.send(group.name, replace(msg, snapshot=Snapshot(metadata, data)))

    def _hand_reads(self, group: _Group) -> None:
        batch = [future for future in group.read_batch if not future.done()]
        group.read_batch = []
        if not batch:
            return
        ctx = self._read_prefix + next(self._read_ids).to_bytes(8, "big")
        try:
            group.core.read_index(ctx, asyncio.get_running_loop().time())
        except ProposalDroppedError:
            for future in batch:
                _fail(future, NotLeaderError(group.name, group.core.leader_id))
            return
        group.reads[ctx] = (self._passes, batch)

    def _read_lease(self, options: GroupOptions) -> float:
        """Seconds of a leader lease: the election timeout less the margin, and below the liveness
        timeout (a voter told its leader's node is down leaves its lease then)."""
        if not options.read_lease:
            return 0.0
        lease = (options.election_tick - LEASE_MARGIN_TICKS) * self.tick_interval
        return max(min(lease, self.liveness.timeout - self.tick_interval), 0.0)

    def _hand_proposals(self, group: _Group) -> None:
        core = group.core
        limit = group.options.max_proposals_per_ready
        batch = group.proposals[:limit]
        del group.proposals[:limit]
        if group.proposals:
            self._dirty.add(group)
        live = [(data, future) for data, future in batch if not future.done()]
        if not live:
            return
        try:
            first = core.propose_many([data for data, _ in live])
        except ProposalDroppedError:
            for _, future in live:
                _fail(future, NotLeaderError(group.name, core.leader_id))
            return
        term = core.term
        waiting = group.waiting
        for offset, (_, future) in enumerate(live):
            waiting[first + offset] = (term, future)

    def _stage(self, group: _Group, ready: Ready) -> None:
        storage = group.storage
        if ready.snapshot is not None:
            storage.apply_snapshot(ready.snapshot)
        if ready.entries:
            storage.append(ready.entries)
        if ready.hard_state is not None:
            storage.set_hard_state(ready.hard_state)

    def _apply(self, group: _Group, ready: Ready) -> None:
        if ready.snapshot is not None:
            group.machine.restore(ready.snapshot)
            group.applied = ready.snapshot.index
            group.snapshot_index = ready.snapshot.index
            group.snapshots_restored += 1
            # Proposals at indices the snapshot covers were decided elsewhere.
            for index in [i for i in group.waiting if i <= ready.snapshot.index]:
                _fail(group.waiting.pop(index)[1], LeadershipLostError("replaced by a snapshot"))
        entries = ready.committed_entries
        if entries:
            results = group.machine.apply(entries)
            waiting = group.waiting
            if waiting:
                for entry, result in zip(entries, results, strict=True):
                    pending = waiting.pop(entry.index, None)
                    if pending is None:
                        continue
                    term, future = pending
                    if future.done():
                        continue
                    if term == entry.term:
                        future.set_result(result)
                    else:
                        future.set_exception(
                            LeadershipLostError("the entry was replaced by another leader's")
                        )
            group.applied = entries[-1].index
        for read in ready.read_states:
            _, batch = group.reads.pop(read.request_ctx, (0, []))
            for future in batch:
                if not future.done():
                    group.confirmed_reads.append((read.index, future))
        if group.applied_waiters:
            pending = []
            for index, waiter in group.applied_waiters:
                if index <= group.applied:
                    if not waiter.done():
                        waiter.set_result(None)
                elif not waiter.done():
                    pending.append((index, waiter))
            group.applied_waiters = pending
        if group.confirmed_reads:
            still = []
            for index, future in group.confirmed_reads:
                if index <= group.applied:
                    if not future.done():
                        future.set_result(index)
                else:
                    still.append((index, future))
            group.confirmed_reads = still
        if ready.soft_state is not None:
            self._leadership_changed(group, ready)

    def _leadership_changed(self, group: _Group, ready: Ready) -> None:
        soft = ready.soft_state
        assert soft is not None
        # A read point asked of the previous leader (or by it) will never be confirmed now; reads handed
        # in this pass went to the core as it is now, which queued or refused them itself.
        for ctx, (handed_in, batch) in list(group.reads.items()):
            if handed_in < self._passes:
                del group.reads[ctx]
                for future in batch:
                    _fail(future, NotLeaderError(group.name, soft.leader_id))
        if soft.role is not Role.LEADER:
            # Whatever is still waiting may commit under the next leader or be
            # overwritten; this node can no longer tell its callers which.
            leader = soft.leader_id
            for _, future in group.proposals:
                _fail(future, NotLeaderError(group.name, leader))
            group.proposals.clear()
            for _, future in group.waiting.values():
                _fail(
                    future, LeadershipLostError(f"leadership of {group.name!r} moved to {leader or 'nobody'}")
                )
            group.waiting.clear()
        else:
            # Leader again in a newer term: entries proposed in an older one may have been replaced.
            term = group.core.term
            for index in [i for i, (t, _) in group.waiting.items() if t != term]:
                _fail(group.waiting.pop(index)[1], LeadershipLostError("proposed in an earlier term"))
        group.leader_changed.set()
        group.leader_changed = asyncio.Event()
        log.info(
            "raft leadership changed",
            group=group.name,
            leader=soft.leader_id,
            role=soft.role.value,
            term=group.core.term,
        )
        if self._on_leader_change is not None:
            try:
                self._on_leader_change(group.name, soft.leader_id, soft.role, group.core.term)
            except Exception:
                log.exception("leader change callback failed", group=group.name)

    def _take_snapshot(self, group: _Group) -> None:
        index = group.applied
        if index <= group.snapshot_index or index < group.core.first_index - 1:
            return  # nothing new, or a leader's snapshot is about to replace the machine
        storage = group.storage
        conf = group.core.conf_state_at(index)
        storage.create_snapshot(index, conf, group.machine.snapshot())
        compact_to = index - group.options.compact_keep
        if compact_to >= storage.first_index():
            storage.compact(compact_to)
        group.snapshot_index = index
        group.snapshots_taken += 1

    def _fail_group(self, group: _Group, exc: Exception) -> None:
        group.stopped = True
        self._groups.pop(group.name, None)
        group.fail_all(lambda: GroupStoppedError(f"group {group.name!r} failed: {exc!r}"))
