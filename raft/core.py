"""The sans-IO Raft core, shaped like etcd's RawNode.

The host drives it: `tick()` on a timer, `step(msg)` for every inbound
message, `propose*()` for commands, and whenever `has_ready()` it takes
`ready()`, handles it in the order `Ready` documents (persist, send, apply)
and calls `advance(ready)`. Between `ready()` and `advance()` the host may
keep stepping and ticking, but must not take another Ready.

Membership follows the Raft thesis (§4.1, single-server changes): a node
uses the latest conf-change entry in its log, committed or not; a leader
accepts a new change only once the previous one is committed and it has
committed an entry of its own term.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

from raft.log_storage import CompactedError, LogStorage, SnapshotTemporarilyUnavailableError, UnavailableError
from raft.progress import Progress, ProgressState
from raft.raft_log import LogInvariantError, RaftLog
from raft.read_index import ReadIndexQueue
from raft.types import (
    CAMPAIGN_TRANSFER,
    LOST_ENTRIES,
    QUIESCE,
    ConfChange,
    ConfChangeRecord,
    ConfState,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    NodeId,
    ReadState,
    Ready,
    Role,
    Snapshot,
    SoftState,
)

__all__ = [
    "ConfChangeRejectedError",
    "LogInvariantError",
    "ProposalDroppedError",
    "RaftConfig",
    "RaftCore",
    "RaftError",
]

_RESPONSE_TYPE = {MessageType.VOTE: MessageType.VOTE_RESP, MessageType.PRE_VOTE: MessageType.PRE_VOTE_RESP}
_FROM_LEADER = (MessageType.APPEND, MessageType.HEARTBEAT, MessageType.SNAPSHOT, MessageType.COMMIT)
_CONF_SCAN_BYTES = 4 << 20


class RaftError(Exception):
    """Base of the errors the core raises to its host."""


class ProposalDroppedError(RaftError):
    """Not appended: this node is not the leader (or has no leader to forward to), or a transfer is under way."""


class ConfChangeRejectedError(RaftError):
    """A membership change cannot be proposed now (another is pending, or it makes no sense)."""


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Per-group settings. Times are in ticks; the host decides how long a tick is."""

    id: NodeId
    election_tick: int = 10
    heartbeat_tick: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    max_size_per_msg: int = 1 << 20
    max_entries_per_msg: int = 4096
    max_inflight_msgs: int = 256
    max_committed_size_per_ready: int = 16 << 20
    applied: int = 0  # last index the host's state machine already holds on restart
    # The host's tick count when this core starts. A leader heartbeats on the host's ticks that are
    # multiples of heartbeat_tick, so the leaders of all a host's groups heartbeat together and
    # their heartbeats to a peer travel in one frame.
    tick_phase: int = 0
    # Let an idle group quiesce: a leader with nothing to send whose members all hold its whole log
    # stops heartbeating, and its followers stop their election timers, until something happens
    # (see `quiesced`). Needs a host that reports peers' liveness (`peer_down`, `peer_up`).
    quiesce: bool = False
    # This member lost log entries or a term and vote it may have acknowledged or granted (its files were
    # damaged and discarded, see docs/chaos.md): until a leader has brought it up to that leader's commit
    # index it neither votes nor campaigns, and it tells the leader its log went backwards.
    recovering: bool = False
    # Leader leases (Raft thesis §6.4.1): a leader that a quorum acknowledged a ReadIndex round from (host
    # clock time t) answers further reads at once until t + read_lease, on the host's clock, which
    # `read_index(ctx, now)` is given. Safe because a voter that heard from its leader refuses other
    # candidates for `election_tick` of its own ticks (check-quorum's lease), so no other leader can be
    # elected before then: the host must keep `read_lease` below `election_tick` ticks, with margin
    # for clock drift and tick alignment, and below its liveness timeout (`peer_down`). 0: every read
    # is a ReadIndex round.
    read_lease: float = 0.0

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("node id must not be empty")
        if self.heartbeat_tick <= 0:
            raise ValueError("heartbeat_tick must be positive")
        if self.election_tick <= self.heartbeat_tick:
            raise ValueError("election_tick must be greater than heartbeat_tick")
        if self.max_inflight_msgs <= 0 or self.max_entries_per_msg <= 0 or self.max_size_per_msg <= 0:
            raise ValueError("message and inflight limits must be positive")
        if self.read_lease < 0 or (self.read_lease > 0 and not self.check_quorum):
            raise ValueError("read_lease needs check_quorum (the voters' side of the lease) and must not be negative")


class RaftCore:
    """One member of one Raft group. Deterministic given its inputs and `rng`."""

    def __init__(self, config: RaftConfig, storage: LogStorage, rng: random.Random) -> None:
        self._config = config
        self._id = config.id
        self._rng = rng
        initial = storage.initial_state()
        hard = initial.hard_state
        applied = max(config.applied, initial.conf_index)
        # An applied entry was committed even if the commit index written with
        # it was not synced before a crash.
        self._log = RaftLog(storage, committed=max(hard.commit, applied), applied=applied)
        if applied > self._log.last_index():
            raise LogInvariantError(
                f"applied index {applied} is beyond the last index {self._log.last_index()}"
            )

        self._term = hard.term
        self._vote: NodeId | None = None
        self._leader_id: NodeId | None = None
        self._role = Role.FOLLOWER
        self._progress: dict[NodeId, Progress] = {}
        self._conf = ConfState()
        self._conf_history: list[tuple[int, ConfState]] = [(initial.conf_index, initial.conf_state)]
        self._conf_history += self._scan_conf_entries(initial.conf_index + 1, self._log.last_index())
        self._votes: dict[NodeId, bool] = {}
        self._msgs: list[Message] = []
        self._read_states: list[ReadState] = []
        self._read_queue = ReadIndexQueue()
        self._reads_before_first_commit: list[tuple[bytes, NodeId]] = []
        self._lead_transferee: NodeId | None = None
        # The member the host wants leading (placement spreads leaders over nodes); a leader that is
        # not it hands leadership over once it is caught up and answering (see `_tick_leader`).
        self._preferred_leader: NodeId | None = None
        self._preferred_backoff = 0  # election timeouts to wait before the next attempt
        self._preferred_failures = 0  # attempts in a row that did not finish: the backoff doubles
        # A leadership transfer asked for explicitly (a stream's STEPDOWN) sticks until the next ordinary
        # election: a leader that won a transfer campaign does not hand leadership back to the preferred
        # member, or the stepdown would be undone an election timeout later.
        self._campaign_by_transfer = False
        self._leads_by_transfer = False
        self._election_elapsed = 0
        self._quiesced = False
        # Peers the host last reported down: no quiescing with them (a late quiesce heartbeat from a
        # leader already reported down must not put us to sleep: no report would wake us again).
        self._peers_down: set[NodeId] = set()
        self._ticks = config.tick_phase
        self._randomized_election_timeout = config.election_tick
        # Leader lease (RaftConfig.read_lease): until when (host clock) reads are answered without a
        # round; when each pending round started; the term in which this leader sent TimeoutNow (its
        # target may win any moment, lease or not: no lease again in that term).
        self._lease_until = -1.0
        self._read_started: dict[bytes, float] = {}
        self._lease_barred_term = -1
        self.lease_reads = 0  # reads this core answered in a lease, without a round (metrics, tests)
        self._last_read_tick = -config.election_tick  # a leader read lately stays awake, and keeps its lease
        # The host tick at which we last heard from our leader: how long a quiesced follower has been in
        # its lease when the host reports the leader's node down (`peer_down`).
        self._heard_from_leader_tick = self._ticks
        # A voter restarted with a term may have acknowledged a lease round just before it stopped: it
        # grants no vote for an election timeout, as if it had heard from that leader as it started.
        self._vote_hold_ticks = config.election_tick if config.read_lease > 0 and hard.term > 0 else 0
        self._append_pending = False
        self._commit_pending = False
        self._outstanding: Ready | None = None

        self._set_conf(self._conf_history[-1][1])
        self._become_follower(hard.term, None)
        self._vote = hard.vote
        # A group of which it is the only voter has no peer to recover from: what it lost is lost.
        self._recovering = config.recovering and self._conf.voters != (self._id,)
        self._prev_hard = HardState(self._term, self._vote, self._log.committed)
        self._prev_soft = SoftState(self._leader_id, self._role)

    # ------------------------------------------------------------------ accessors

    @property
    def id(self) -> NodeId:
        return self._id

    @property
    def role(self) -> Role:
        return self._role

    @property
    def term(self) -> int:
        return self._term

    @property
    def vote(self) -> NodeId | None:
        return self._vote

    @property
    def leader_id(self) -> NodeId | None:
        return self._leader_id

    @property
    def commit_index(self) -> int:
        return self._log.committed

    @property
    def applied(self) -> int:
        return self._log.applied

    @property
    def first_index(self) -> int:
        return self._log.first_index()

    @property
    def last_index(self) -> int:
        return self._log.last_index()

    @property
    def nothing_before_term(self) -> bool:
        """Whether this node leads and its log holds no entry (nor snapshot) from an earlier term.

        Then nothing was committed before this term (a leader's log holds every committed entry), so
        there is nothing for it to catch up on: a brand-new group's first leader, typically.
        """
        if self._role is not Role.LEADER or self._log.first_index() != 1:
            return False
        # terms never decrease along a log: if its first entry is of this term, every entry is
        return self._log.last_index() == 0 or self._log.term(1) == self._term

    @property
    def conf_state(self) -> ConfState:
        """Current membership: the latest conf-change entry in the log, committed or not."""
        return self._conf

    @property
    def voters(self) -> tuple[NodeId, ...]:
        return self._conf.voters

    @property
    def learners(self) -> tuple[NodeId, ...]:
        return self._conf.learners

    @property
    def lead_transferee(self) -> NodeId | None:
        return self._lead_transferee

    @property
    def recovering(self) -> bool:
        """Whether it still waits to be caught up after losing state (RaftConfig.recovering)."""
        return self._recovering

    @property
    def quiesced(self) -> bool:
        """Idle: ticks do nothing. A quiesced leader sends no heartbeats and its followers run no
        election timer. It wakes on a proposal, a read, a transfer or a new preferred leader; on a message
        from a member (a follower only on its leader's, or any but a vote request); and on the host's
        word that a member's node went down or came (back) up (`peer_down`, `peer_up`). A node's
        liveness is the host's, one signal per pair of nodes for all groups."""
        return self._quiesced

    @property
    def preferred_leader(self) -> NodeId | None:
        return self._preferred_leader

    @property
    def leads_by_transfer(self) -> bool:
        """This leader won by a leadership transfer: it keeps leading, preferred member or not, until the
        next ordinary election or a new preference (an explicit stepdown is not undone by the hand-back)."""
        return self._role is Role.LEADER and self._leads_by_transfer

    @property
    def progress(self) -> dict[NodeId, Progress]:
        """The leader's replication progress per member (read-only use: metrics, tests)."""
        return self._progress

    def conf_state_at(self, index: int) -> ConfState:
        """Membership as of applied `index`, for a snapshot the host takes there."""
        if index > self._log.applied:
            raise ValueError(f"index {index} is not applied yet (applied {self._log.applied})")
        for conf_index, conf in reversed(self._conf_history):
            if conf_index <= index:
                return conf
        raise ValueError(f"membership before index {self._conf_history[0][0]} is no longer known")

    def entry_term(self, index: int) -> int:
        """Term of the entry at `index` in this node's log (0 if outside it)."""
        return self._log.term_or_zero(index)

    def log_entries(self, lo: int, hi: int) -> list[Entry]:
        """Entries [lo, hi) of this node's log, stable or not (tests and the simulator)."""
        return self._log.slice(lo, hi)

    # ------------------------------------------------------------------ inputs

    def tick(self) -> None:
        """Advance the logical clock by one tick (elections, heartbeats, check-quorum)."""
        self._ticks += 1
        if self._vote_hold_ticks:
            self._vote_hold_ticks -= 1
        if self._quiesced:
            return
        if self._role is Role.LEADER:
            self._tick_leader()
        else:
            self._tick_election()

    def sync_ticks(self, ticks: int) -> None:
        """The host's tick count, for a host that does not tick quiesced cores: heartbeats keep to the
        host's phase (see `RaftConfig.tick_phase`) once this one wakes."""
        self._ticks = ticks

    def peer_down(self, node_id: NodeId) -> None:
        """The host lost `node_id`'s node (nothing heard from it within its liveness timeout). A
        quiesced leader of a group it is in wakes (check-quorum, heartbeats for its return); a quiesced
        follower whose leader it is wakes with the lease over, so it campaigns within an election
        timeout, as if the heartbeats had stopped."""
        self._peers_down.add(node_id)
        if not self._quiesced:
            return
        if self._role is Role.LEADER and node_id in self._progress:
            self._unquiesce()
        elif self._role is not Role.LEADER and node_id == self._leader_id:
            self._unquiesce()
            # As if the heartbeats had stopped when we last heard from it (the host's ticks since, which
            # it synced): with leases, a voter stays in its lease until then, however soon it is told.
            self._election_elapsed = self._config.election_tick
            if self._config.read_lease > 0:
                self._election_elapsed = min(self._election_elapsed, self._ticks - self._heard_from_leader_tick)

    def peer_up(self, node_id: NodeId) -> None:
        """The host hears from `node_id`'s node again, or from a new incarnation of it (a restart). A
        quiesced leader of a group it is in wakes, so its heartbeats reach it; a quiesced follower whose
        leader it is wakes: a restarted leader leads nothing, and the group needs an election."""
        self._peers_down.discard(node_id)
        if not self._quiesced:
            return
        if (self._role is Role.LEADER and node_id in self._progress) or node_id == self._leader_id:
            self._unquiesce()

    def campaign(self) -> None:
        """Start an election now (pre-vote first when enabled), as if the timer fired."""
        if self._role is not Role.LEADER:
            self._unquiesce()
            self._hup(transfer=False)

    def step(self, msg: Message) -> None:
        """Feed one message from a peer. Stale messages and messages not meant for us are ignored."""
        if msg.to != self._id or msg.from_ == self._id:
            return
        if self._quiesced and msg.term >= self._term and self._wakes(msg):
            self._unquiesce()
        if msg.term > self._term:
            if not self._accept_higher_term(msg):
                return
        elif msg.term < self._term:
            self._answer_stale(msg)
            return

        mtype = msg.type
        if mtype is MessageType.VOTE or mtype is MessageType.PRE_VOTE:
            self._handle_vote_request(msg)
        elif self._role is Role.LEADER:
            self._step_leader(msg)
        elif self._role is Role.FOLLOWER:
            self._step_follower(msg)
        else:
            self._step_candidate(msg)

    def propose(self, data: bytes) -> int:
        """Append one command; returns its index (in the current `term`)."""
        return self.propose_many((data,))

    def propose_many(self, datas: Sequence[bytes]) -> int:
        """Append commands as consecutive entries; returns the first index."""
        self._check_can_propose()
        self._unquiesce()
        first = self._log.last_index() + 1
        term = self._term
        self._append_entries([Entry(term, first + i, EntryType.NORMAL, data) for i, data in enumerate(datas)])
        return first

    def propose_conf_change(self, change: ConfChange) -> int:
        """Append a membership change; returns its index. One change at a time."""
        self._check_can_propose()
        self._unquiesce()
        if self._conf_history[-1][0] > self._log.committed:
            raise ConfChangeRejectedError("a membership change is still uncommitted")
        if self._log.term_or_zero(self._log.committed) != self._term:
            raise ConfChangeRejectedError("the leader has not committed an entry of its term yet")
        try:
            new_conf = change.apply_to(self._conf)
        except ValueError as exc:
            raise ConfChangeRejectedError(str(exc)) from exc
        index = self._log.last_index() + 1
        data = ConfChangeRecord(change, new_conf).encode()
        self._append_entries([Entry(self._term, index, EntryType.CONF_CHANGE, data)])
        return index

    def transfer_leader(self, to: NodeId) -> None:
        """Ask leadership to move to `to` (forwarded to the leader on a follower)."""
        self._unquiesce()
        if self._role is Role.LEADER:
            self._start_transfer(to)
        elif self._leader_id is not None:
            self._send(MessageType.TRANSFER_LEADER, self._leader_id, context=to.encode())
        else:
            raise ProposalDroppedError("no leader to transfer leadership from")

    def set_preferred_leader(self, node_id: NodeId | None) -> None:
        """Name the member that should lead (None: any). Only timing changes: a leader that is not it
        transfers leadership to it (§3.10) at an election-timeout boundary once it has answered within
        the last election timeout and holds the whole log; a failed attempt is retried after a backoff."""
        if node_id != self._preferred_leader:
            self._preferred_leader = node_id
            self._preferred_backoff = self._preferred_failures = 0
            self._leads_by_transfer = False  # a new preference is handed over to, however we came to lead
            if self._role is Role.LEADER:
                self._unquiesce()

    def lease_read(self, now: float) -> int:
        """The read point of a read asked at host time `now` when this leader's lease answers it at once
        (what `read_index` would give in its next Ready, without a round); -1 when it needs `read_index`."""
        if self._role is not Role.LEADER or self._log.term_or_zero(self._log.committed) != self._term:
            return -1
        if not self._in_lease(now) and self._conf.voters != (self._id,):  # a single voter needs no round
            return -1
        self.lease_reads += 1
        self._last_read_tick = self._ticks
        return self._log.committed

    def _in_lease(self, now: float) -> bool:
        return 0 <= now < self._lease_until and self._lead_transferee is None and not self._quiesced

    def read_index(self, ctx: bytes, now: float = -1.0) -> None:
        """Request a linearizable read point; answered by a ReadState carrying `ctx`.

        `ctx` must be non-empty and unique among pending requests. A request
        lost to a leader change is never answered: the host times it out.
        `now` is the host clock's time (never going back) for a leader lease
        (RaftConfig.read_lease); a read without it always takes a round.
        """
        if not ctx:
            raise ValueError("read_index ctx must be non-empty")
        if self._role is Role.LEADER:
            self._unquiesce()
            self._last_read_tick = self._ticks
            self._leader_read_index(ctx, self._id, now)
        elif self._leader_id is not None:
            self._send(MessageType.READ_INDEX, self._leader_id, context=ctx)
        else:
            raise ProposalDroppedError("no leader to serve the read")

    def report_unreachable(self, node_id: NodeId) -> None:
        """The host failed to send to `node_id`: stop pipelining to it until it answers."""
        progress = self._progress.get(node_id)
        if self._role is Role.LEADER and progress is not None and progress.state is ProgressState.REPLICATE:
            progress.become_probe()

    def report_snapshot(self, node_id: NodeId, ok: bool) -> None:
        """The host finished (or failed) sending a snapshot to `node_id`."""
        progress = self._progress.get(node_id)
        if self._role is not Role.LEADER or progress is None or progress.state is not ProgressState.SNAPSHOT:
            return
        if not ok:
            progress.pending_snapshot = 0
        progress.become_probe()
        # Wait for the follower's answer (or the next heartbeat) before probing.
        progress.probe_sent = True

    # ------------------------------------------------------------------ outputs

    def has_ready(self) -> bool:
        if self._outstanding is not None:
            return False
        log = self._log
        return bool(
            self._msgs
            or self._read_states
            or self._append_pending
            or self._commit_pending
            or log.has_unstable_to_hand_out()
            or log.has_committed_to_hand_out()
            or self._term != self._prev_hard.term
            or self._vote != self._prev_hard.vote
            or log.committed != self._prev_hard.commit
            or self._leader_id != self._prev_soft.leader_id
            or self._role is not self._prev_soft.role
        )

    def ready(self) -> Ready:
        if self._outstanding is not None:
            raise RaftError("advance() the previous Ready before taking another")
        if self._append_pending or self._commit_pending:
            if self._role is Role.LEADER:
                if self._append_pending:
                    self._broadcast_append()
                else:
                    self._broadcast_commit()
            self._append_pending = self._commit_pending = False
        log = self._log
        snapshot = log.take_unstable_snapshot()
        entries = tuple(log.take_unstable_entries())
        committed = tuple(log.take_committed_entries(self._config.max_committed_size_per_ready))
        hard = HardState(self._term, self._vote, log.committed)
        soft = SoftState(self._leader_id, self._role)
        prev_hard = self._prev_hard
        must_sync = (
            bool(entries)
            or snapshot is not None
            or hard.term != prev_hard.term
            or hard.vote != prev_hard.vote
        )
        ready = Ready(
            soft_state=soft if soft != self._prev_soft else None,
            hard_state=hard if hard != prev_hard else None,
            entries=entries,
            snapshot=snapshot,
            committed_entries=committed,
            messages=tuple(self._msgs),
            read_states=tuple(self._read_states),
            must_sync=must_sync,
        )
        self._msgs = []
        self._read_states = []
        self._prev_hard = hard
        self._prev_soft = soft
        self._outstanding = ready
        return ready

    def advance(self, ready: Ready) -> None:
        if ready is not self._outstanding:
            raise RaftError("advance() must be given the Ready last returned by ready()")
        self._outstanding = None
        log = self._log
        if ready.snapshot is not None:
            log.stable_snapshot_to(ready.snapshot.index)
            log.applied_to(ready.snapshot.index)
        if ready.entries:
            last = ready.entries[-1]
            log.stable_to(last.index, last.term)
        if ready.committed_entries:
            log.applied_to(ready.committed_entries[-1].index)
        if self._role is Role.LEADER:
            # The leader's own copy counts towards the commit quorum only once the
            # host has made it durable (thesis §10.2.1): the host may have sent
            # these entries before writing them, and a commit index that counted
            # them could reach a follower's state machine before a leader crash
            # loses them.
            own = self._progress.get(self._id)
            if own is not None and own.maybe_update(log.persisted_index()):
                self._maybe_commit()

    # ------------------------------------------------------------------ term and role changes

    def _reset(self, term: int) -> None:
        if term != self._term:
            self._term = term
            self._vote = None
        self._leader_id = None
        self._election_elapsed = 0
        self._quiesced = False
        self._randomized_election_timeout = self._config.election_tick + self._rng.randrange(
            self._config.election_tick
        )
        self._lead_transferee = None
        self._end_lease()
        self._votes = {}
        self._read_queue.clear()
        self._reads_before_first_commit = []
        self._append_pending = False
        self._commit_pending = False
        next_index = self._log.last_index() + 1
        for node_id, progress in self._progress.items():
            fresh = Progress(next_index, self._config.max_inflight_msgs, progress.is_learner)
            if node_id == self._id:
                fresh.match = self._log.persisted_index()
            self._progress[node_id] = fresh

    def _become_follower(self, term: int, leader_id: NodeId | None) -> None:
        self._reset(term)
        self._leader_id = leader_id
        self._role = Role.FOLLOWER

    def _become_pre_candidate(self) -> None:
        # A pre-candidate changes neither term nor vote: losing costs nothing.
        self._quiesced = False
        self._votes = {}
        self._leader_id = None
        self._role = Role.PRE_CANDIDATE

    def _become_candidate(self) -> None:
        self._reset(self._term + 1)
        self._vote = self._id
        self._role = Role.CANDIDATE

    def _become_leader(self) -> None:
        self._reset(self._term)
        self._leader_id = self._id
        self._role = Role.LEADER
        self._leads_by_transfer = self._campaign_by_transfer
        for progress in self._progress.values():
            progress.recent_active = False
        own = self._progress.get(self._id)
        if own is not None:
            own.become_replicate()
            own.recent_active = True
        # The empty entry lets the new leader commit, and so learn the commit
        # index, without waiting for a client (§5.4.2, thesis §6.4).
        self._append_entries([Entry(self._term, self._log.last_index() + 1)])

    # ------------------------------------------------------------------ elections

    def _promotable(self) -> bool:
        if self._recovering:
            # Its log may lack committed entries it acknowledged: it could win with a log missing them.
            return False
        if self._id in self._conf.voters:
            return True
        # A leader that appended its own removal and lost leadership before it
        # committed may hold the only copy of that entry among the new voters'
        # electors: the remaining voters (still on the old membership) cannot win
        # without its vote, and it refuses them for their shorter log. It may
        # therefore campaign until the removal commits; votes are counted in its
        # latest membership, which excludes it, so it wins only with the new
        # voters' majority, then commits the removal and steps down.
        history = self._conf_history
        return (
            len(history) >= 2 and history[-1][0] > self._log.committed and self._id in history[-2][1].voters
        )

    def _tick_election(self) -> None:
        self._election_elapsed += 1
        if self._election_elapsed >= self._randomized_election_timeout and self._promotable():
            self._election_elapsed = 0
            self._hup(transfer=False)

    def _hup(self, transfer: bool) -> None:
        if not self._promotable():
            return
        if self._config.pre_vote and not transfer:
            self._start_election(MessageType.PRE_VOTE, transfer=False)
        else:
            self._start_election(MessageType.VOTE, transfer=transfer)

    def _start_election(self, vote_type: MessageType, transfer: bool) -> None:
        if vote_type is MessageType.PRE_VOTE:
            self._become_pre_candidate()
            term = self._term + 1  # the term we would campaign in
        else:
            self._become_candidate()
            term = self._term
        self._campaign_by_transfer = transfer
        if self._poll(self._id, True) == "won":
            self._election_won(vote_type)
            return
        last_index = self._log.last_index()
        last_term = self._log.last_term()
        context = CAMPAIGN_TRANSFER if transfer else b""
        for voter in self._conf.voters:
            if voter != self._id:
                self._msgs.append(
                    Message(
                        type=vote_type,
                        from_=self._id,
                        to=voter,
                        term=term,
                        index=last_index,
                        log_term=last_term,
                        context=context,
                    )
                )

    def _poll(self, voter: NodeId, granted: bool) -> str:
        self._votes.setdefault(voter, granted)
        yes = no = 0
        for node_id in self._conf.voters:
            result = self._votes.get(node_id)
            if result is True:
                yes += 1
            elif result is False:
                no += 1
        quorum = len(self._conf.voters) // 2 + 1
        if yes >= quorum:
            return "won"
        if len(self._conf.voters) - no < quorum:
            return "lost"
        return "pending"

    def _election_won(self, vote_type: MessageType) -> None:
        if vote_type is MessageType.PRE_VOTE:
            self._start_election(MessageType.VOTE, transfer=False)
        else:
            self._become_leader()
            self._broadcast_append()

    def _accept_higher_term(self, msg: Message) -> bool:
        """React to a message from a later term; False if it must be ignored."""
        mtype = msg.type
        if mtype is MessageType.VOTE or mtype is MessageType.PRE_VOTE:
            forced = msg.context == CAMPAIGN_TRANSFER
            in_lease = self._config.check_quorum and (
                (self._leader_id is not None and self._election_elapsed < self._config.election_tick)
                or self._vote_hold_ticks > 0
            )
            if in_lease and not forced:
                # We heard from a live leader recently: a disruptive candidate
                # (a removed or partitioned node) must not depose it.
                return False
        if mtype is MessageType.PRE_VOTE or (mtype is MessageType.PRE_VOTE_RESP and not msg.reject):
            return True  # pre-votes carry a future term and never change ours
        if mtype in _FROM_LEADER:
            self._become_follower(msg.term, msg.from_)
        else:
            self._become_follower(msg.term, None)
        return True

    def _answer_stale(self, msg: Message) -> None:
        if (self._config.check_quorum or self._config.pre_vote) and msg.type in (
            MessageType.APPEND,
            MessageType.HEARTBEAT,
        ):
            # A leader cut off from us while we moved on: tell it our term so it
            # steps down (it may never win a pre-vote against us otherwise).
            self._send(MessageType.APPEND_RESP, msg.from_)
        elif msg.type is MessageType.PRE_VOTE:
            self._send(MessageType.PRE_VOTE_RESP, msg.from_, reject=True)

    def _handle_vote_request(self, msg: Message) -> None:
        is_pre = msg.type is MessageType.PRE_VOTE
        if self._recovering:
            # It may have voted in this term already, or acknowledged entries the candidate lacks, and no
            # longer know it (Protocol-Aware Recovery, Alagappan et al., FAST 2018): no vote of any kind.
            self._send(_RESPONSE_TYPE[msg.type], msg.from_, reject=True)
            return
        can_vote = (
            self._vote == msg.from_
            or (self._vote is None and self._leader_id is None)
            or (is_pre and msg.term > self._term)
        )
        if can_vote and self._log.is_up_to_date(msg.index, msg.log_term):
            self._msgs.append(
                Message(type=_RESPONSE_TYPE[msg.type], from_=self._id, to=msg.from_, term=msg.term)
            )
            if not is_pre:
                self._election_elapsed = 0
                self._vote = msg.from_
        else:
            self._send(_RESPONSE_TYPE[msg.type], msg.from_, reject=True)

    def _step_candidate(self, msg: Message) -> None:
        mtype = msg.type
        if mtype in _FROM_LEADER:
            self._become_follower(msg.term, msg.from_)
            self._step_follower(msg)
            return
        expected = MessageType.PRE_VOTE_RESP if self._role is Role.PRE_CANDIDATE else MessageType.VOTE_RESP
        if mtype is not expected:
            return
        result = self._poll(msg.from_, not msg.reject)
        if result == "won":
            self._election_won(MessageType.PRE_VOTE if self._role is Role.PRE_CANDIDATE else MessageType.VOTE)
        elif result == "lost":
            self._become_follower(self._term, None)

    # ------------------------------------------------------------------ follower

    def _step_follower(self, msg: Message) -> None:
        mtype = msg.type
        if mtype is MessageType.APPEND:
            self._election_elapsed = 0
            self._leader_id = msg.from_
            self._heard_from_leader_tick = self._ticks
            self._handle_append(msg)
        elif mtype is MessageType.HEARTBEAT:
            self._election_elapsed = 0
            self._leader_id = msg.from_
            self._heard_from_leader_tick = self._ticks
            self._handle_heartbeat(msg)
        elif mtype is MessageType.COMMIT:
            self._election_elapsed = 0
            self._leader_id = msg.from_
            self._heard_from_leader_tick = self._ticks
            # As an empty APPEND would: only if our log agrees with the leader's up to `index` (then it
            # agrees on everything before, Log Matching) may the leader's commit index apply to it.
            if self._log.match_term(msg.index, msg.log_term):
                self._log.commit_to(min(msg.commit, msg.index))
                self._recovered_if_holds(msg.index, msg.commit)
        elif mtype is MessageType.SNAPSHOT:
            self._election_elapsed = 0
            self._leader_id = msg.from_
            self._heard_from_leader_tick = self._ticks
            self._handle_snapshot(msg)
        elif mtype is MessageType.TIMEOUT_NOW:
            self._hup(transfer=True)
        elif mtype is MessageType.READ_INDEX_RESP:
            self._read_states.append(ReadState(msg.index, msg.context))
        # READ_INDEX / TRANSFER_LEADER reaching a follower were meant for a
        # leader that has since stepped down; the requester retries.

    def _handle_append(self, msg: Message) -> None:
        log = self._log
        if msg.index < log.committed:
            self._send(MessageType.APPEND_RESP, msg.from_, index=log.committed)
            return
        result = log.maybe_append(msg.index, msg.log_term, msg.commit, msg.entries)
        if result is None:
            hint = log.find_conflict_by_term(min(msg.index, log.last_index()), msg.log_term)
            self._send(
                MessageType.APPEND_RESP,
                msg.from_,
                index=msg.index,
                reject=True,
                reject_hint=hint,
                log_term=log.term_or_zero(hint),
            )
            return
        last_new, written_from = result
        if written_from:
            self._track_conf_entries(written_from, msg.entries[written_from - msg.index - 1 :])
        self._send(MessageType.APPEND_RESP, msg.from_, index=last_new)
        self._recovered_if_holds(last_new, msg.commit)

    def _recovered_if_holds(self, matched: int, leader_commit: int) -> None:
        """The leader's log agrees with ours up to `matched`: once that covers the leader's commit index we
        hold every entry that may have been committed with our lost acknowledgements, and vote again."""
        if self._recovering and matched >= leader_commit:
            self._recovering = False

    def _tell_leader_we_lost_entries(self, leader: NodeId) -> None:
        """A leader keeps the match index we acknowledged before losing entries, and would send only what
        follows it: this rejection (LOST_ENTRIES) makes it probe again from our real last index."""
        last = self._log.last_index()
        self._send(
            MessageType.APPEND_RESP,
            leader,
            index=last,
            reject=True,
            reject_hint=last,
            log_term=0,
            context=LOST_ENTRIES,
        )

    def _handle_heartbeat(self, msg: Message) -> None:
        log = self._log
        if self._recovering:
            self._tell_leader_we_lost_entries(msg.from_)
        log.commit_to(min(msg.commit, log.last_index()))
        if msg.context == QUIESCE:
            # Only a log that ends with the leader's last entry, all of it committed, may stop
            # listening for elections: nothing is on its way to it.
            holds_all = msg.index == log.last_index() and log.match_term(msg.index, msg.log_term)
            if holds_all and log.committed == msg.index:
                self._recovered_if_holds(msg.index, msg.index)
            self._quiesced = (
                holds_all
                and log.committed == msg.index
                and msg.from_ not in self._peers_down
                and not self._recovering
            )
            self._send(MessageType.HEARTBEAT_RESP, msg.from_, context=QUIESCE, reject=not self._quiesced)
            return
        self._send(MessageType.HEARTBEAT_RESP, msg.from_, context=msg.context)

    def _handle_snapshot(self, msg: Message) -> None:
        snapshot = msg.snapshot
        if snapshot is not None and self._restore(snapshot):
            self._send(MessageType.APPEND_RESP, msg.from_, index=self._log.last_index())
        else:
            self._send(MessageType.APPEND_RESP, msg.from_, index=self._log.committed)

    def _restore(self, snapshot: Snapshot) -> bool:
        log = self._log
        if snapshot.index <= log.committed:
            return False
        # A snapshot whose membership lacks us is still adopted: a node that
        # just joined gets one from before its own addition, and learns it is
        # a member from the entries that follow.
        if log.match_term(snapshot.index, snapshot.term):
            # Our log already has the snapshot's last entry: just learn it is committed.
            log.commit_to(snapshot.index)
            return False
        log.restore(snapshot)
        self._conf_history = [(snapshot.index, snapshot.metadata.conf_state)]
        self._set_conf(snapshot.metadata.conf_state)
        return True

    # ------------------------------------------------------------------ leader

    def _tick_leader(self) -> None:
        self._election_elapsed += 1
        if self._election_elapsed >= self._config.election_tick:
            self._election_elapsed = 0
            preferred_ready = self._preferred_leader_ready()
            if self._config.check_quorum and not self._quorum_recently_active():
                self._become_follower(self._term, None)
                return
            if self._lead_transferee is not None and self._lead_transferee == self._preferred_leader:
                # handing over to the preferred member took an election timeout: back off, doubling
                self._preferred_failures += 1
                self._preferred_backoff = min(1 << self._preferred_failures, 64)
            self._lead_transferee = None  # a transfer that took an election timeout has failed
            if self._preferred_backoff > 0:
                self._preferred_backoff -= 1
            elif preferred_ready and self._preferred_leader is not None:
                self._start_transfer(self._preferred_leader)
        if self._ticks % self._config.heartbeat_tick == 0:
            if self._can_quiesce():
                self._quiesce()
            else:
                self._broadcast_heartbeat(self._read_queue.last_ctx())

    # ------------------------------------------------------------------ quiescence

    def _can_quiesce(self) -> bool:
        """Nothing to send, nothing to wait for: every entry committed, applied and durable here, held by
        every member that answered within this election timeout, no read, transfer or hand-over
        pending (CockroachDB's rule for a range)."""
        if not self._config.quiesce or self._quiesced:
            return False
        if self._config.read_lease > 0 and self._ticks - self._last_read_tick < self._config.election_tick:
            return False  # read lately: quiescing would end the lease, and the next read would wait a round
        log = self._log
        last = log.last_index()
        if log.committed != last or log.applied != last or log.term_or_zero(last) != self._term:
            return False
        if (
            self._lead_transferee is not None
            or len(self._read_queue)
            or self._reads_before_first_commit
            or self._append_pending
            or self._commit_pending
            or self._msgs
            or self._outstanding is not None
        ):
            return False
        preferred = self._preferred_leader
        if (
            preferred is not None
            and preferred != self._id
            and preferred in self._conf.voters
            and not self._leads_by_transfer
        ):
            return False  # it should lead instead: stay awake to hand over once it can
        for node_id, progress in self._progress.items():
            if progress.match != last or node_id in self._peers_down:
                return False
            if node_id != self._id and (
                progress.state is not ProgressState.REPLICATE or not progress.recent_active
            ):
                return False
        return True

    def _quiesce(self) -> None:
        log = self._log
        last = log.last_index()
        last_term = log.term_or_zero(last)
        for node_id in self._progress:
            if node_id != self._id:
                self._msgs.append(
                    Message(
                        type=MessageType.HEARTBEAT,
                        from_=self._id,
                        to=node_id,
                        term=self._term,
                        index=last,
                        log_term=last_term,
                        commit=log.committed,
                        context=QUIESCE,
                    )
                )
        self._quiesced = True
        self._end_lease()  # its followers stop their timers: only a new round gives a lease again

    def _unquiesce(self) -> None:
        if not self._quiesced:
            return
        self._quiesced = False
        if self._role is Role.LEADER:
            # a full election timeout to hear from a quorum again before check-quorum judges
            self._election_elapsed = 0
            for node_id, progress in self._progress.items():
                progress.recent_active = node_id == self._id

    def _wakes(self, msg: Message) -> bool:
        """Whether `msg` (of our term or later) wakes this quiesced node."""
        mtype = msg.type
        if self._role is Role.LEADER:
            # Answers to heartbeats (late ones too: links may reorder) ask nothing of a leader whose
            # members all hold its log; a follower that could not quiesce says so, and that is news.
            return not (mtype is MessageType.HEARTBEAT_RESP and not msg.reject)
        if msg.from_ == self._leader_id:
            # A heartbeat is answered either way; the leader sends it because it woke (a read, a member
            # down), which needs no election timer here, or it is a late one from before the quiesce.
            # Anything else from the leader (entries, TimeoutNow, its own campaign) wakes us.
            return mtype is not MessageType.HEARTBEAT
        # A candidate elsewhere while our leader's node is alive: its vote requests go to the leader
        # too, which wakes and brings it back; we stay in the lease and refuse it, as with heartbeats.
        return mtype is not MessageType.VOTE and mtype is not MessageType.PRE_VOTE

    def _preferred_leader_ready(self) -> bool:
        """The preferred member is another voter that answered within this election timeout and holds
        every entry: a transfer to it would finish at once (read before check-quorum resets activity)."""
        preferred = self._preferred_leader
        if preferred is None or preferred == self._id or preferred not in self._conf.voters:
            return False
        if self._leads_by_transfer:
            return False
        if self._lead_transferee is not None or self._log.term_or_zero(self._log.committed) != self._term:
            return False
        progress = self._progress.get(preferred)
        return progress is not None and progress.recent_active and progress.match == self._log.last_index()

    def _quorum_recently_active(self) -> bool:
        active = 0
        for node_id in self._conf.voters:
            progress = self._progress.get(node_id)
            if progress is None:
                continue
            if node_id == self._id or progress.recent_active:
                active += 1
        for node_id, progress in self._progress.items():
            progress.recent_active = node_id == self._id
        return active >= len(self._conf.voters) // 2 + 1

    def _check_can_propose(self) -> None:
        if self._role is not Role.LEADER:
            raise ProposalDroppedError(f"not the leader (leader is {self._leader_id})")
        if self._lead_transferee is not None:
            raise ProposalDroppedError(f"leadership is being transferred to {self._lead_transferee}")
        if self._id not in self._conf.voters:
            raise ProposalDroppedError("this leader is being removed from the group")

    def _append_entries(self, entries: list[Entry]) -> None:
        if not entries:
            return
        self._log.append(entries)
        self._track_conf_entries(entries[0].index, entries)
        # The leader's own progress moves in advance(), once these are durable.
        # Sending waits until ready(), so proposals made in one go share messages.
        self._append_pending = True

    def _maybe_commit(self) -> bool:
        voters = self._conf.voters
        if not voters:
            return False
        matches = sorted(
            (self._progress[v].match for v in voters if v in self._progress),
            reverse=True,
        )
        quorum = len(voters) // 2 + 1
        if len(matches) < quorum:
            return False
        candidate = matches[quorum - 1]
        # Only an entry of the current term is committed by counting replicas (§5.4.2).
        if candidate <= self._log.committed or self._log.term_or_zero(candidate) != self._term:
            return False
        self._log.commit_to(candidate)
        self._on_leader_commit()
        return True

    def _on_leader_commit(self) -> None:
        if self._reads_before_first_commit and self._log.term_or_zero(self._log.committed) == self._term:
            waiting, self._reads_before_first_commit = self._reads_before_first_commit, []
            for ctx, requester in waiting:
                self._leader_read_index(ctx, requester)
        if self._id not in self._conf.voters and self._conf_history[-1][0] <= self._log.committed:
            # Our own removal is committed: tell the others, then step down.
            self._broadcast_append()
            self._become_follower(self._term, None)
        else:
            self._commit_pending = True

    def _broadcast_append(self) -> None:
        for node_id in self._progress:
            if node_id != self._id:
                self._send_appends(node_id, send_if_empty=True)

    def _broadcast_commit(self) -> None:
        """Tell each follower the new commit index: within the entries it goes on to get, if there are
        any, else in a COMMIT notice, which unlike an empty APPEND asks for no answer."""
        log = self._log
        committed = log.committed
        for node_id, progress in self._progress.items():
            if node_id == self._id:
                continue
            if self._maybe_send_append(node_id, send_if_empty=False):
                self._send_appends(node_id, send_if_empty=False)
                continue
            # Up to what was sent, acknowledged or not: a follower still waiting for its ack to reach
            # us can commit as soon as the entries are there, with no round trip more.
            sent = progress.next - 1
            reach = min(sent, committed)
            if reach <= progress.commit_sent:
                continue
            try:
                sent_term = log.term(sent)
            except (CompactedError, UnavailableError):
                continue  # it needs a snapshot or a probe first; heartbeats carry on meanwhile
            progress.commit_sent = reach
            self._msgs.append(
                Message(
                    type=MessageType.COMMIT,
                    from_=self._id,
                    to=node_id,
                    term=self._term,
                    index=sent,
                    log_term=sent_term,
                    commit=committed,
                )
            )

    def _send_appends(self, node_id: NodeId, send_if_empty: bool) -> None:
        """Send as many appends as flow control allows (at least one if `send_if_empty`)."""
        while self._maybe_send_append(node_id, send_if_empty):
            send_if_empty = False

    def _maybe_send_append(self, node_id: NodeId, send_if_empty: bool) -> bool:
        progress = self._progress[node_id]
        if progress.is_paused():
            return False
        log = self._log
        prev_index = progress.next - 1
        last_index = log.last_index()
        try:
            prev_term = log.term(prev_index)
            hi = min(last_index + 1, progress.next + self._config.max_entries_per_msg)
            entries = log.slice(progress.next, hi, self._config.max_size_per_msg)
        except CompactedError:
            return self._maybe_send_snapshot(node_id, progress)
        except UnavailableError:
            # Our log shrank under the progress (it cannot for a leader): resync.
            progress.become_probe()
            return False
        if not entries and not send_if_empty:
            return False
        self._msgs.append(
            Message(
                type=MessageType.APPEND,
                from_=self._id,
                to=node_id,
                term=self._term,
                index=prev_index,
                log_term=prev_term,
                entries=tuple(entries),
                commit=log.committed,
            )
        )
        progress.sent_append(len(entries), entries[-1].index if entries else prev_index)
        return True

    def _maybe_send_snapshot(self, node_id: NodeId, progress: Progress) -> bool:
        if not progress.recent_active:
            return False  # no point shipping a snapshot to a node that is not answering
        try:
            snapshot = self._log.storage.snapshot()
        except SnapshotTemporarilyUnavailableError:
            return False
        if snapshot.index == 0:
            return False
        self._msgs.append(
            Message(type=MessageType.SNAPSHOT, from_=self._id, to=node_id, term=self._term, snapshot=snapshot)
        )
        progress.become_snapshot(snapshot.index)
        return True

    def _broadcast_heartbeat(self, ctx: bytes) -> None:
        for node_id, progress in self._progress.items():
            if node_id != self._id:
                self._msgs.append(
                    Message(
                        type=MessageType.HEARTBEAT,
                        from_=self._id,
                        to=node_id,
                        term=self._term,
                        commit=min(progress.match, self._log.committed),
                        context=ctx,
                    )
                )

    def _step_leader(self, msg: Message) -> None:
        mtype = msg.type
        if mtype is MessageType.READ_INDEX:
            if msg.context:
                self._leader_read_index(msg.context, msg.from_)
            return
        if mtype is MessageType.TRANSFER_LEADER:
            with contextlib.suppress(UnicodeDecodeError, ProposalDroppedError):
                self._start_transfer(msg.context.decode())
            return
        progress = self._progress.get(msg.from_)
        if progress is None:
            return  # not (or no longer) a member
        if mtype is MessageType.APPEND_RESP:
            progress.recent_active = True
            self._handle_append_response(msg, progress)
        elif mtype is MessageType.HEARTBEAT_RESP:
            progress.recent_active = True
            self._handle_heartbeat_response(msg, progress)

    def _handle_append_response(self, msg: Message, progress: Progress) -> None:
        log = self._log
        if msg.reject and (msg.context == LOST_ENTRIES or msg.reject_hint < progress.match):
            # The follower lost entries it had acknowledged: its match index goes back (a lower match only
            # delays commits, so a late or duplicated notice is harmless) and it is probed from there. A
            # recovering follower says so at every heartbeat until caught up: one already probed there, or
            # with a snapshot on its way, is left alone (a snapshot sent again at every heartbeat would
            # never finish). A follower that does not know it lost entries (a write-ahead log cut inside
            # synced records looks like a torn last write) says so by rejecting with a hint, its last
            # index, below its match: the logs agree up to the match, so an ordinary rejection's hint
            # never is, and taking it as stale would probe that follower at its old match for ever.
            last = min(msg.reject_hint, log.last_index())
            if progress.state is ProgressState.SNAPSHOT or (
                progress.state is ProgressState.PROBE and progress.match <= last and progress.next <= last + 1
            ):
                return
            progress.lost_entries(last)
            self._send_appends(msg.from_, send_if_empty=True)
            return
        if msg.reject:
            next_probe = msg.reject_hint
            if msg.log_term > 0:
                next_probe = log.find_conflict_by_term(msg.reject_hint, msg.log_term)
            if progress.maybe_decrease_to(msg.index, next_probe):
                if progress.state is ProgressState.REPLICATE:
                    progress.become_probe()
                self._send_appends(msg.from_, send_if_empty=True)
            return
        was_paused = progress.is_paused()
        if not progress.maybe_update(msg.index) and not (
            progress.match == msg.index and progress.state is ProgressState.PROBE
        ):
            return
        if progress.state is ProgressState.PROBE:
            progress.become_replicate()
        elif progress.state is ProgressState.SNAPSHOT:
            if progress.match + 1 >= log.first_index():
                progress.become_probe()
                progress.become_replicate()
        else:
            progress.inflights.free_le(msg.index)
        if self._maybe_commit() and self._role is not Role.LEADER:
            return
        self._send_appends(msg.from_, send_if_empty=was_paused)
        if min(progress.match, log.committed) > progress.commit_sent:
            # The notice it got (if any) did not reach this far: it still needs to hear so.
            self._commit_pending = True
        if msg.from_ == self._lead_transferee and progress.match == log.last_index():
            self._send_timeout_now(msg.from_)

    def _handle_heartbeat_response(self, msg: Message, progress: Progress) -> None:
        progress.probe_sent = False
        if progress.state is ProgressState.REPLICATE and progress.inflights.full():
            # An ack may have been lost; free one slot so replication cannot stall.
            progress.inflights.free_first_one()
        if progress.match < self._log.last_index() or progress.state is ProgressState.PROBE:
            self._send_appends(msg.from_, send_if_empty=True)
        if not msg.context:
            return
        acks = self._read_queue.ack(msg.context, msg.from_)
        if acks is None or not self._is_quorum(acks):
            return
        started = self._read_started
        for read in self._read_queue.release_through(msg.context):
            if started:
                began = started.pop(read.ctx, None)
                # the quorum heard this round after it began, and refuses other candidates from then on
                if began is not None and self._lease_barred_term != self._term:
                    self._lease_until = max(self._lease_until, began + self._config.read_lease)
            self._answer_read(read.index, read.ctx, read.requester)

    def _release_confirmed_reads(self) -> None:
        """Answer the pending reads whose acknowledgements make a quorum of the voters now. Only a
        membership change makes one without a new acknowledgement, and a leader it left as the group's
        only voter would get none: its reads would wait forever, and the group never quiesce."""
        ctx = self._read_queue.newest_confirmed(self._is_quorum)
        if ctx is None:
            return
        for read in self._read_queue.release_through(ctx):
            self._answer_read(read.index, read.ctx, read.requester)

    def _is_quorum(self, acks: set[NodeId]) -> bool:
        voters = self._conf.voters
        return sum(1 for v in voters if v in acks) >= len(voters) // 2 + 1

    def _leader_read_index(self, ctx: bytes, requester: NodeId, now: float = -1.0) -> None:
        if self._log.term_or_zero(self._log.committed) != self._term:
            # Until it commits an entry of its term a new leader does not know
            # the commit index (thesis §6.4): answer after that commit.
            self._reads_before_first_commit.append((ctx, requester))
            return
        if self._in_lease(now):
            # in the lease: no other leader can have been elected since a quorum answered us
            self.lease_reads += 1
            self._answer_read(self._log.committed, ctx, requester)
            return
        index = self._log.committed
        if self._conf.voters == (self._id,):
            self._answer_read(index, ctx, requester)
            return
        if now >= 0 and self._config.read_lease > 0 and self._lease_barred_term != self._term:
            self._read_started[ctx] = now
        if not self._read_queue.add(index, ctx, requester):
            return  # duplicate ctx: the first request will be answered
        self._read_queue.ack(ctx, self._id)
        self._broadcast_heartbeat(ctx)

    def _answer_read(self, index: int, ctx: bytes, requester: NodeId) -> None:
        if requester == self._id:
            self._read_states.append(ReadState(index, ctx))
        else:
            self._send(MessageType.READ_INDEX_RESP, requester, index=index, context=ctx)

    def _start_transfer(self, to: NodeId) -> None:
        if to == self._id or to not in self._conf.voters:
            raise ProposalDroppedError(f"cannot transfer leadership to {to}: not another voter")
        if self._lead_transferee == to:
            return
        self._lead_transferee = to
        # The transfer must finish within an election timeout or it is abandoned.
        self._election_elapsed = 0
        if self._progress[to].match == self._log.last_index():
            self._send_timeout_now(to)
        else:
            self._send_appends(to, send_if_empty=True)

    # ------------------------------------------------------------------ membership

    def _scan_conf_entries(self, lo: int, last: int) -> list[tuple[int, ConfState]]:
        found: list[tuple[int, ConfState]] = []
        while lo <= last:
            batch = self._log.slice(lo, last + 1, _CONF_SCAN_BYTES)
            for entry in batch:
                if entry.type is EntryType.CONF_CHANGE:
                    found.append((entry.index, ConfChangeRecord.decode(entry.data).conf_state))
            lo = batch[-1].index + 1
        return found

    def _track_conf_entries(self, written_from: int, entries: Sequence[Entry]) -> None:
        """Keep the membership in step with the log after entries from `written_from` were written."""
        history = self._conf_history
        truncated = False
        while len(history) > 1 and history[-1][0] >= written_from:
            history.pop()
            truncated = True
        found = False
        for entry in entries:
            if entry.type is EntryType.CONF_CHANGE:
                try:
                    conf = ConfChangeRecord.decode(entry.data).conf_state
                except ValueError:
                    continue  # a corrupt record changes nothing; the leader validated it
                history.append((entry.index, conf))
                found = True
        if truncated or found:
            self._set_conf(history[-1][1])

    def _send_timeout_now(self, to: NodeId) -> None:
        """Tell `to` to campaign now: it may win at once, without waiting for anyone's lease to end (its
        vote requests say it was told to), so this leader holds no lease for the rest of its term."""
        self._lease_barred_term = self._term
        self._end_lease()
        self._send(MessageType.TIMEOUT_NOW, to)

    def _end_lease(self) -> None:
        self._lease_until = -1.0
        self._read_started.clear()

    def _set_conf(self, conf: ConfState) -> None:
        if conf == self._conf and self._progress:
            return
        self._end_lease()  # the quorum that answered may not be one of the new voters
        self._conf = conf
        members = conf.members()
        for node_id in list(self._progress):
            if node_id not in members:
                del self._progress[node_id]
        next_index = self._log.last_index() + 1
        for node_id in members:
            progress = self._progress.get(node_id)
            if progress is None:
                progress = Progress(next_index, self._config.max_inflight_msgs)
                if node_id == self._id:
                    progress.match = self._log.persisted_index()
                    progress.recent_active = True
                    if self._role is Role.LEADER:
                        progress.become_replicate()
                self._progress[node_id] = progress
            progress.is_learner = node_id in conf.learners
        if self._role is Role.LEADER:
            if self._lead_transferee is not None and self._lead_transferee not in conf.voters:
                self._lead_transferee = None
            # Fewer voters can mean a smaller quorum: something may now be committed, and a read the
            # acknowledgements already counted now confirm may be answered.
            self._maybe_commit()
            self._release_confirmed_reads()
            self._append_pending = self._role is Role.LEADER

    # ------------------------------------------------------------------ helpers

    def _send(
        self,
        mtype: MessageType,
        to: NodeId,
        *,
        index: int = 0,
        log_term: int = 0,
        reject: bool = False,
        reject_hint: int = 0,
        context: bytes = b"",
    ) -> None:
        self._msgs.append(
            Message(
                type=mtype,
                from_=self._id,
                to=to,
                term=self._term,
                index=index,
                log_term=log_term,
                reject=reject,
                reject_hint=reject_hint,
                context=context,
            )
        )
