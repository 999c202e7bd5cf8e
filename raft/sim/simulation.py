"""The deterministic Raft simulation: N cores, an integer clock, a faulty network, one seed.

Every choice (fault profile, delays, losses, partitions, crashes, restarts,
membership changes, leader transfers, proposals, reads, snapshots) comes
from `random.Random(seed)`, and the cores iterate nothing in hash order, so
a seed replays exactly. A run is a chaos phase of `steps` ticks followed by a
settle phase (faults off, everyone restarted) that must converge: every
member applies every acknowledged entry.
"""

from __future__ import annotations

import random
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from raft.core import ConfChangeRejectedError, ProposalDroppedError, RaftConfig, RaftCore
from raft.log_storage import MemoryLogStorage
from raft.sim.checker import SafetyChecker, SafetyViolation
from raft.sim.liveness import SimLiveness
from raft.sim.network import NetworkFaults, SimNetwork
from raft.sim.node import SimNode
from raft.sim.state_machine import SimStateMachine
from raft.types import (
    ConfChange,
    ConfChangeRecord,
    ConfChangeType,
    ConfState,
    EntryType,
    Message,
    MessageType,
    Ready,
    Role,
)

ELECTION_TICK = 10
SETTLE_STEPS = 100 * ELECTION_TICK
MAX_CLIENT_BACKLOG = 64


@dataclass(frozen=True, slots=True)
class SimOptions:
    nodes: int = 3
    # learners from the start (l1, l2, ...), as the meta group of several-worker nodes has them
    learners: int = 0
    steps: int = 1500
    trace: bool = False
    # crashes that damage the disk: a node loses its log's tail, or all of it, and maybe its term and vote
    disk_faults: bool = True


@dataclass(slots=True)
class SimResult:
    seed: int
    violation: str | None = None
    step: int = 0
    stats: Counter[str] = field(default_factory=Counter)
    trace: list[str] = field(default_factory=list)


class Simulation:
    def __init__(self, seed: int, options: SimOptions) -> None:
        if options.nodes < 1:
            raise ValueError("a simulation needs at least one node")
        self.seed = seed
        self.options = options
        self.rng = rng = random.Random(seed)
        self.now = 0
        self.stats: Counter[str] = Counter()
        self.trace_lines: list[str] = []
        # Per-seed profile, so that different seeds explore different regimes.
        self.pre_vote = rng.random() < 0.75
        self.check_quorum = rng.random() < 0.75
        self.heartbeat_tick = rng.choice((1, 2, 3))
        self.max_inflight = rng.choice((1, 2, 4, 64))
        self.max_entries_per_msg = rng.choice((1, 3, 64))
        self.max_size_per_msg = rng.choice((64, 1 << 20))
        self.max_committed_per_ready = rng.choice((64, 16 << 20))
        self.chaos_faults = NetworkFaults(
            drop=rng.choice((0.0, 0.01, 0.05, 0.1)),
            duplicate=rng.choice((0.0, 0.02, 0.05)),
            min_delay=1,
            max_delay=rng.choice((1, 2, 3, 6)),
        )
        self.p_crash = rng.choice((0.0, 0.002, 0.005))
        self.p_crash_in_ready = rng.choice((0.0, 0.001, 0.003))
        self.p_partition = rng.choice((0.0, 0.005, 0.01))
        self.p_conf_change = rng.choice((0.0, 0.004, 0.01))
        self.p_transfer = rng.choice((0.0, 0.002, 0.005))
        # A preferred leader (the host's placement choice): leaders hand over to it by transfer.
        self.p_prefer = rng.choice((0.0, 0.0, 0.003, 0.01))
        self.preferred: str | None = None
        # Quiescence: idle groups stop ticking, woken by messages and by the host's liveness reports,
        # which come late (up to an election timeout) and sometimes falsely.
        self.quiesce = rng.random() < 0.6
        self.liveness = SimLiveness(
            rng, delay=rng.choice((1, 3, ELECTION_TICK)), p_blip=rng.choice((0.0, 0.0005, 0.002))
        )
        # Leader leases (RaftConfig.read_lease), in steps of the simulation's one clock, which every node
        # ticks by (missing some ticks: slow clocks); drawn apart so that the other draws stay the seed's.
        self.lease_rng = random.Random(seed * 7919 + 1)
        lease_on = self.lease_rng.random() < 0.5 and self.check_quorum
        self.read_lease = float(ELECTION_TICK - 2) if lease_on else 0.0
        self.incarnations: Counter[str] = Counter()
        self.p_quiet = rng.choice((0.0, 0.01, 0.03)) if self.quiesce else 0.0
        self.quiet_until = 0
        # Like the asyncio host: a Ready's write takes a while, the core keeps
        # stepping meanwhile, and a leader sends its appends before writing.
        self.async_persist = rng.random() < 0.5
        # Some seeds may shrink to a single voter (with learners): the case where
        # a leader alone is a quorum, so only its own durability guards a commit.
        shrink_to_one = rng.random() < 0.3
        # A leader crashing after its early appends left but before its own write
        # completed: the window in which counting its unsynced copy would be unsafe.
        self.p_crash_after_early_send = rng.choice((0.0, 0.02, 0.05)) if self.async_persist else 0.0
        self.network = SimNetwork(rng, self.chaos_faults)
        # Disk damage draws from a generator of its own, so seeds that never damage a disk replay as they
        # did before the fault existed.
        self.disk_rng = random.Random(f"disk-{seed}")
        self.p_lose_disk = self.disk_rng.choice((0.0, 0.002, 0.005)) if options.disk_faults else 0.0
        self.checker = SafetyChecker()
        ids = [f"n{i}" for i in range(1, options.nodes + 1)]
        self.min_voters = 1 if shrink_to_one else options.nodes
        if shrink_to_one:
            self.p_conf_change = max(self.p_conf_change, 0.004)
        self.max_voters = options.nodes + 2
        self.max_crashed = (options.nodes - 1) // 2
        self.next_node_number = options.nodes + 1
        learner_ids = [f"l{i}" for i in range(1, options.learners + 1)]
        conf = ConfState(voters=tuple(ids), learners=tuple(learner_ids))
        self.nodes: dict[str, SimNode] = {}
        for node_id in (*ids, *learner_ids):
            self.nodes[node_id] = SimNode(node_id, MemoryLogStorage(conf), self._config, rng.getrandbits(64))
        self.pending_reads: dict[bytes, tuple[str, int]] = {}
        self.read_seq = 0
        self.proposal_seq = 0

    # ------------------------------------------------------------------ running

    def run(self) -> SimResult:
        result = SimResult(self.seed, stats=self.stats, trace=self.trace_lines)
        try:
            for _ in range(self.options.steps):
                self.now += 1
                self._chaos()
                self._advance_time()
            self._settle()
        except SafetyViolation as exc:
            result.violation = str(exc)
            self._trace(f"VIOLATION {exc}")
        except Exception as exc:  # a crash of the core under test is a failure of the seed, not of the run
            result.violation = f"exception {type(exc).__name__}: {exc}"
            self._trace("".join(traceback.format_exception(exc)))
        result.step = self.now
        self.stats["committed"] = self.checker.max_acked
        self.stats["elections"] = len(self.checker.leaders_by_term)
        self.stats["reads_checked"] = self.checker.reads_checked
        self.stats["messages"] = self.network.sent
        self.stats["dropped"] = self.network.dropped
        self.stats["duplicated"] = self.network.duplicated
        return result

    def _config(self, node_id: str, applied: int, recovering: bool) -> RaftConfig:
        return RaftConfig(
            id=node_id,
            election_tick=ELECTION_TICK,
            heartbeat_tick=self.heartbeat_tick,
            pre_vote=self.pre_vote,
            check_quorum=self.check_quorum,
            max_size_per_msg=self.max_size_per_msg,
            max_entries_per_msg=self.max_entries_per_msg,
            max_inflight_msgs=self.max_inflight,
            max_committed_size_per_ready=self.max_committed_per_ready,
            applied=applied,
            quiesce=self.quiesce,
            recovering=recovering,
            read_lease=self.read_lease,
        )

    def _trace(self, line: str) -> None:
        if self.options.trace:
            self.trace_lines.append(f"{self.now:6d} {line}")

    def _alive(self) -> list[SimNode]:
        return [node for node in self.nodes.values() if node.alive]

    def _leader(self) -> SimNode | None:
        leaders = [n for n in self._alive() if n.live_core.role is Role.LEADER]
        return max(leaders, key=lambda n: n.live_core.term) if leaders else None

    def _max_term(self) -> int:
        return max((n.live_core.term if n.alive else n.storage.hard_state.term) for n in self.nodes.values())

    # ------------------------------------------------------------------ one tick

    def _advance_time(self) -> None:
        rng = self.rng
        alive = self._alive()
        rng.shuffle(alive)
        for node in alive:
            if rng.random() < 0.97:  # occasional missed ticks: clocks drift
                node.live_core.tick()
        for msg, blocked in self.network.due(self.now):
            self._deliver(msg, blocked)
        if self.quiesce:
            self._report_liveness()
        alive = self._alive()
        rng.shuffle(alive)
        for node in alive:
            for _ in range(4):
                if not node.alive:
                    break
                if node.in_flight is not None:
                    ready, held = node.in_flight
                    # The disk is slow: the write completes in a later tick; a leader's
                    # early appends get a longer head start, so followers act on them first.
                    slow = 0.75 if len(held) < len(ready.messages) else 0.5
                    if self.async_persist and rng.random() < slow:
                        break
                    self._complete_ready(node)
                elif node.live_core.has_ready():
                    self._take_ready(node)
                else:
                    break
        self._check_leaders()

    def _report_liveness(self) -> None:
        observers = [node.id for node in self._alive()]
        peers = [node.id for node in self.nodes.values() if not node.removed]

        def truth(observer: str, peer: str) -> tuple[bool, int]:
            node = self.nodes[peer]
            return node.alive and not self.network.is_blocked(peer, observer), self.incarnations[peer]

        def report(observer: str, peer: str, up: bool) -> None:
            core = self.nodes[observer].live_core
            if up:
                core.peer_up(peer)
            else:
                core.peer_down(peer)
            self.stats["liveness_reports"] += 1

        self.liveness.step(observers, peers, truth, report)
        self.stats["quiesced_ticks"] += sum(1 for n in self._alive() if n.live_core.quiesced)

    def _deliver(self, msg: Message, blocked: bool) -> None:
        target = self.nodes.get(msg.to)
        lost = blocked or target is None or not target.alive
        if msg.type is MessageType.SNAPSHOT:
            sender = self.nodes.get(msg.from_)
            if sender is not None and sender.alive:
                sender.live_core.report_snapshot(msg.to, not lost)
        if lost or target is None:
            return
        target.live_core.step(msg)

    def _take_ready(self, node: SimNode) -> None:
        core = node.live_core
        # Taken after its core caught up, this Ready holds what it caught up: once written, the marker goes.
        node.ready_clears_damage = node.damaged and not core.recovering
        ready = core.ready()
        held = ready.messages
        if self.async_persist:
            held = self._send_early(node, ready)
            node.in_flight = (ready, held)
        else:
            node.in_flight = (ready, held)
            self._complete_ready(node)

    def _send_early(self, node: SimNode, ready: Ready) -> tuple[Message, ...]:
        """The host's rule: a leader's appends and heartbeats leave before its write; returns the rest."""
        core = node.live_core
        hard = ready.hard_state
        stored = node.storage.hard_state
        if core.role is not Role.LEADER or (
            hard is not None and (hard.term != stored.term or hard.vote != stored.vote)
        ):
            return ready.messages
        held = []
        for msg in ready.messages:
            # as RaftHost's _SENT_EARLY: commit notices wait, like everything else
            if msg.type is MessageType.APPEND or msg.type is MessageType.HEARTBEAT:
                self._send(core, msg)
                self.stats["sent_early"] += 1
            else:
                held.append(msg)
        return tuple(held)

    def _send(self, core: RaftCore, msg: Message) -> None:
        if self.network.is_blocked(msg.from_, msg.to) and self.rng.random() < 0.5:
            core.report_unreachable(msg.to)
        delivered = self.network.send(self.now, msg)
        if msg.type is MessageType.SNAPSHOT:
            self.stats["snapshots_sent"] += 1
            if not delivered:
                core.report_snapshot(msg.to, False)

    def _complete_ready(self, node: SimNode) -> None:
        """Persist the node's in-flight Ready, send what waited for it, apply, advance."""
        core = node.live_core
        assert node.in_flight is not None
        ready, held = node.in_flight
        crash_point = None
        if self.p_crash_in_ready and self.rng.random() < self.p_crash_in_ready and self._can_crash():
            crash_point = self.rng.choice(("before-persist", "after-persist"))
        if (
            crash_point is None
            and self.p_crash_after_early_send
            and len(held) < len(ready.messages)
            and self.rng.random() < self.p_crash_after_early_send
            and self._can_crash()
        ):
            crash_point = "before-persist"
        if crash_point == "before-persist":
            self._crash(node, "before persisting a Ready")
            return
        storage = node.storage
        if ready.snapshot is not None:
            storage.apply_snapshot(ready.snapshot)
            self.stats["snapshots_installed"] += 1
        storage.append(ready.entries)
        if ready.hard_state is not None:
            storage.set_hard_state(ready.hard_state)
        if ready.must_sync:
            node.synced_hard_state = storage.hard_state
        if node.damaged and node.ready_clears_damage:
            node.damaged = False
            self.stats["recoveries"] += 1
            self._trace(f"{node.id} recovered (last index {core.last_index}, commit {core.commit_index})")
        self.checker.on_persist(node.id, ready.snapshot, ready.entries)
        if crash_point == "after-persist":
            self._crash(node, "after persisting a Ready, before sending")
            return
        for msg in held:
            self._send(core, msg)
        if ready.snapshot is not None:
            node.state_machine = SimStateMachine.from_snapshot(ready.snapshot.data)
            self.checker.on_restore(node.id, node.state_machine.index, node.state_machine.digest)
        if ready.committed_entries:
            max_term = self._max_term()
            state_machine = node.state_machine
            for entry in ready.committed_entries:
                before = state_machine.index
                state_machine.apply(entry)
                self.checker.on_apply(node.id, entry, before, state_machine.digest, max_term)
                if entry.type is EntryType.CONF_CHANGE:
                    self._on_conf_change_applied(ConfChangeRecord.decode(entry.data))
        for read in ready.read_states:
            request = self.pending_reads.pop(read.request_ctx, None)
            if request is not None and request[0] == node.id:
                self.checker.on_read(node.id, read.request_ctx, read.index, request[1])
        if ready.soft_state is not None and ready.soft_state.role is Role.LEADER:
            self._trace(f"{node.id} leads term {core.term} (last index {core.last_index})")
        if node.alive:
            node.in_flight = None
            core.advance(ready)

    def _check_leaders(self) -> None:
        for node in self._alive():
            core = node.live_core
            if core.role is not Role.LEADER:
                continue
            self.checker.on_leader(node.id, core.term)
            required = self.checker.index_a_leader_must_hold(core.term)
            if required:
                self.checker.verify_leader_has(
                    node.id, core.term, required, core.entry_term(required), core.first_index
                )

    # ------------------------------------------------------------------ chaos

    def _chaos(self) -> None:
        rng = self.rng
        leader = self._leader()
        if leader is not None and len(leader.live_core.voters) == 1 and leader.live_core.learners:
            self.stats["lone_voter_ticks"] += 1
        # Quiet spells, in which clients send nothing: idle groups quiesce, and faults meet them so.
        if self.now >= self.quiet_until and rng.random() < self.p_quiet:
            self.quiet_until = self.now + rng.randint(2 * ELECTION_TICK, 30 * ELECTION_TICK)
            self._trace(f"quiet until {self.quiet_until}")
        quiet = self.now < self.quiet_until
        # Clients keep a bounded number of writes in flight, as real ones do.
        if (
            not quiet
            and leader is not None
            and rng.random() < 0.3
            and self._backlog(leader) < MAX_CLIENT_BACKLOG
        ):
            self._propose(leader, rng.randint(1, 8))
        if not quiet and rng.random() < 0.02:
            alive = self._alive()
            if alive:
                self._propose(rng.choice(alive), 1)  # mostly followers: must be refused
        if rng.random() < (0.005 if quiet else 0.05):
            self._request_read()
        if self.read_lease and self.lease_rng.random() < 0.3:
            self._request_read_on_a_leader()
        if self.p_partition:
            if not self.network.partitioned and rng.random() < self.p_partition:
                self._partition()
            elif self.network.partitioned and rng.random() < 0.03:
                self.network.heal()
                self._trace("heal")
        if self.p_crash and rng.random() < self.p_crash and self._can_crash():
            self._crash(rng.choice(self._alive()), "between steps")
        if self.p_lose_disk and self.disk_rng.random() < self.p_lose_disk and self._can_crash():
            candidates = self._may_lose_disk()
            if candidates:
                self._lose_disk(self.disk_rng.choice(candidates))
        for node in list(self.nodes.values()):
            if not node.alive and not node.removed and rng.random() < 0.03:
                self._restart(node)
        if leader is not None and not leader.alive:
            leader = None  # crashed or shut down above
        if leader is not None and self.p_conf_change and rng.random() < self.p_conf_change:
            if any(node.damaged for node in self.nodes.values()):
                # as an operator would: no membership change while a member cannot vote (removing another
                # voter could leave the recovering one needed for every majority, which it refuses)
                self.stats["conf_changes_deferred"] += 1
            else:
                self._change_membership(leader)
        if leader is not None and self.p_transfer and rng.random() < self.p_transfer:
            voters = [v for v in leader.live_core.voters if v != leader.id]
            if voters:
                target = rng.choice(voters)
                try:
                    leader.live_core.transfer_leader(target)
                    self.stats["transfers"] += 1
                    self._trace(f"transfer leadership {leader.id} -> {target}")
                except ProposalDroppedError:
                    pass
        if self.p_prefer and rng.random() < self.p_prefer:
            self._choose_preferred()
        for node in self._alive():
            if rng.random() < 0.02:
                self._maybe_snapshot(node)

    def _choose_preferred(self) -> None:
        members = sorted(n.id for n in self.nodes.values() if not n.removed)
        self.preferred = self.rng.choice([*members, None])
        for node in self._alive():
            node.live_core.set_preferred_leader(self.preferred)
        self.stats["preferred_changes"] += 1
        self._trace(f"preferred leader {self.preferred}")

    @staticmethod
    def _backlog(leader: SimNode) -> int:
        return leader.live_core.last_index - leader.live_core.commit_index

    def _propose(self, node: SimNode, count: int) -> None:
        datas = []
        for _ in range(count):
            self.proposal_seq += 1
            datas.append(b"p%d" % self.proposal_seq)
        try:
            if count == 1:
                node.live_core.propose(datas[0])
            else:
                node.live_core.propose_many(datas)
            self.stats["proposed"] += count
        except ProposalDroppedError:
            self.stats["proposals_refused"] += count

    def _request_read(self) -> None:
        alive = self._alive()
        if alive:
            self._read_on(self.rng.choice(alive))

    def _request_read_on_a_leader(self) -> None:
        """Reads close together on a node that believes it leads (partitioned from a newer leader, maybe):
        a lease answers most of them, and each must still see everything committed before it."""
        leaders = [n for n in self._alive() if n.live_core.role is Role.LEADER]
        if leaders:
            self._read_on(leaders[self.lease_rng.randrange(len(leaders))])

    def _read_on(self, node: SimNode) -> None:
        """A ReadIndex on `node`, checked once answered against what was committed anywhere when asked."""
        self.read_seq += 1
        ctx = b"read-%d" % self.read_seq
        committed = max(n.live_core.commit_index for n in self._alive())
        core = node.live_core
        leased = core.lease_reads
        try:
            core.read_index(ctx, float(self.now))
        except ProposalDroppedError:
            return
        self.pending_reads[ctx] = (node.id, committed)
        self.stats["reads"] += 1
        self.stats["lease_reads"] += core.lease_reads - leased
        if node.id in core.learners:
            self.stats["reads_on_learners"] += 1

    def _partition(self) -> None:
        rng = self.rng
        ids = [n.id for n in self.nodes.values() if not n.removed]
        rng.shuffle(ids)
        kind = rng.choice(("isolate", "split", "one-way"))
        if kind == "isolate" or len(ids) < 3:
            groups = [ids[:1], ids[1:]]
        else:
            cut = rng.randint(1, len(ids) - 1)
            groups = [ids[:cut], ids[cut:]]
        self.network.partition(groups, one_way=kind == "one-way")
        self.stats["partitions"] += 1
        self._trace(f"partition {kind} {groups}")

    def _can_crash(self) -> bool:
        # A node still recovering from a damaged disk cannot vote: it counts as down.
        crashed = sum(1 for n in self.nodes.values() if (not n.alive or n.damaged) and not n.removed)
        return crashed < self.max_crashed

    def _may_lose_disk(self) -> list[SimNode]:
        """Voters whose disk may be damaged: the others must keep a majority of the voters that can vote
        (a damaged node does not vote until caught up). A lone voter's loss is not recoverable from its peers
        at all: that is data loss, not a Raft fault. Both the leader's newest membership and its applied
        one must keep that majority: a membership change still in flight goes with the leader's disk if
        the leader is the one that loses it (seed 515: a voter added to two, then the leader's loss left
        the two-voter membership with one that could vote)."""
        leader = self._leader()
        if leader is None:
            return []
        core = leader.live_core
        memberships = {core.voters, core.conf_state_at(core.applied).voters}
        candidates = set(core.voters)
        for voters in memberships:
            unable = sum(
                1 for v in voters if (node := self.nodes.get(v)) is None or not node.alive or node.damaged
            )
            if len(voters) < 3 or unable + 1 > (len(voters) - 1) // 2:
                return []
            candidates &= set(voters)
        return [
            self.nodes[v] for v in core.voters if v in candidates and self.nodes[v].alive and not self.nodes[v].damaged
        ]

    def _lose_disk(self, node: SimNode) -> None:
        """Crash `node` with its disk damaged: its log's tail or all of it, and maybe its term and vote."""
        rng = self.disk_rng
        conf = node.live_core.conf_state
        last = node.storage.last_index()
        self._crash(node, "with its disk damaged")
        if rng.random() < 0.3:
            keep_through, keep_hard_state = None, False
        else:
            keep_through, keep_hard_state = (
                rng.randint(node.storage.snapshot().index, last),
                rng.random() < 0.5,
            )
        node.lose_disk(keep_through, keep_hard_state, conf)
        if keep_through is None:
            self.checker.forget(node.id)
        else:
            self.checker.on_lost_tail(node.id, node.storage.last_index())
        self.stats["disks_lost"] += 1
        self._trace(
            f"{node.id} lost its log after {keep_through if keep_through is not None else 'nothing'} (of {last}), "
            f"{'kept' if keep_hard_state else 'lost'} its term and vote"
        )

    def _crash(self, node: SimNode, when: str) -> None:
        node.crash()
        self.stats["crashes"] += 1
        self._trace(f"crash {node.id} {when}")

    def _restart(self, node: SimNode) -> None:
        node.start(self.rng.getrandbits(64))
        self.incarnations[node.id] += 1
        self.liveness.forget(node.id)
        node.live_core.set_preferred_leader(self.preferred)
        self.stats["restarts"] += 1
        self._trace(f"restart {node.id} (term {node.live_core.term}, commit {node.live_core.commit_index})")

    def _maybe_snapshot(self, node: SimNode) -> None:
        state_machine = node.state_machine
        if state_machine.index < node.live_core.first_index - 1:
            return  # a leader's snapshot is about to replace the state machine
        storage = node.storage
        if state_machine.index - storage.snapshot().index < 5:
            return
        index = state_machine.index
        storage.create_snapshot(index, node.live_core.conf_state_at(index), state_machine.snapshot_data())
        storage.compact(max(storage.first_index() - 1, index - self.rng.randint(0, 3)))
        self.stats["snapshots_taken"] += 1

    def _change_membership(self, leader: SimNode) -> None:
        rng = self.rng
        conf = leader.live_core.conf_state
        options: list[str] = []
        if len(conf.learners) < 2:
            options.append("add-learner")
        if conf.learners and len(conf.voters) < self.max_voters:
            options.append("promote")
        if len(conf.voters) < self.max_voters:
            options.append("add-voter")
        if len(conf.voters) > self.min_voters:
            options.append("remove-voter")
        if conf.learners:
            options.append("remove-learner")
        kind = rng.choice(options)
        if self.min_voters == 1 and len(conf.voters) > 1 and conf.learners and rng.random() < 0.5:
            kind = "remove-voter"  # head for a lone voter with learners
        new_node: str | None = None
        if kind in ("add-learner", "add-voter"):
            new_node = f"n{self.next_node_number}"
            change_type = ConfChangeType.ADD_LEARNER if kind == "add-learner" else ConfChangeType.ADD_VOTER
            change = ConfChange(change_type, new_node)
        elif kind == "promote":
            change = ConfChange(ConfChangeType.ADD_VOTER, rng.choice(conf.learners))
        elif kind == "remove-voter":
            change = ConfChange(ConfChangeType.REMOVE_NODE, rng.choice(conf.voters))
        else:
            change = ConfChange(ConfChangeType.REMOVE_NODE, rng.choice(conf.learners))
        try:
            index = leader.live_core.propose_conf_change(change)
        except (ConfChangeRejectedError, ProposalDroppedError):
            return
        self.stats["conf_changes"] += 1
        self._trace(f"{leader.id} proposes {kind} {change.node_id} at {index}")
        if new_node is not None:
            self.next_node_number += 1
            self.nodes[new_node] = SimNode(
                new_node, MemoryLogStorage(ConfState()), self._config, self.rng.getrandbits(64)
            )
            self.nodes[new_node].live_core.set_preferred_leader(self.preferred)

    def _on_conf_change_applied(self, record: ConfChangeRecord) -> None:
        if record.change.type is not ConfChangeType.REMOVE_NODE:
            return
        node = self.nodes.get(record.change.node_id)
        if node is not None and not node.removed:
            # The host shuts a removed member down once its removal is committed.
            node.removed = True
            if node.alive:
                node.crash()
            self._trace(f"shut down removed {node.id}")

    # ------------------------------------------------------------------ settling

    def _settle(self) -> None:
        self.p_crash_in_ready = 0.0
        self.p_crash_after_early_send = 0.0
        self.liveness.p_blip = 0.0
        self.network.heal()
        self.network.faults = NetworkFaults(drop=0.0, duplicate=0.0, min_delay=1, max_delay=2)
        for node in self.nodes.values():
            if not node.alive and not node.removed:
                self._restart(node)
        self._trace("settle")
        for step in range(SETTLE_STEPS):
            self.now += 1
            leader = self._leader()
            if leader is not None and step % 25 == 0:
                self._propose(leader, 1)
            self._advance_time()
            if self._converged():
                break
        else:
            raise SafetyViolation(
                f"liveness: no convergence within {SETTLE_STEPS} ticks after faults stopped"
            )
        if self.quiesce:
            self._settle_quiescent()

    def _settle_quiescent(self) -> None:
        """Idle, the group must quiesce; a write must wake it and commit; a quiesced leader's crash must
        lead, through the others' liveness reports, to a new leader that commits."""
        self._trace("settle: idle")
        self._run_until(lambda: self._all_quiesced(), "the idle group did not quiesce")
        leader = self._leader()
        assert leader is not None
        self._propose(leader, 1)
        self._run_until(self._converged, "a write to the quiesced group did not commit")
        self._run_until(lambda: self._all_quiesced(), "the group did not quiesce again")
        self.stats["settled_quiescent"] += 1
        self._wake_the_quiesced_group()
        leader = self._leader()
        assert leader is not None
        if len(leader.live_core.voters) < 3:
            return
        self._crash(leader, "while quiesced")
        self._run_until(
            lambda: (
                (new := self._leader()) is not None and new is not leader and self._commits_after_crash(new)
            ),
            "no new leader committed after the quiesced leader crashed",
        )
        self._restart(leader)
        self._run_until(self._converged, "no convergence after the crashed leader restarted")

    def _wake_the_quiesced_group(self) -> None:
        """What a quiesced group must still notice, each from all asleep: a read on a follower, a
        follower's restart (its volatile state lost), a new preferred leader, a membership change. Each
        must be served, and the group must fall asleep again; safety is checked every step meanwhile."""
        quiet = self._converged_and_quiesced
        leader = self._leader()
        assert leader is not None
        followers = [self.nodes[m] for m in leader.live_core.conf_state.members() if m != leader.id]
        if not followers:
            return
        self._read_on_a_quiesced_follower()

        follower = self.rng.choice(followers)
        self._crash(follower, "while quiesced (a follower)")
        self._restart(follower)
        self._run_until(quiet, "the group did not take back and quiesce with a restarted follower")
        self.stats["quiesced_follower_restarts"] += 1

        leader = self._leader()
        assert leader is not None
        others = [v for v in leader.live_core.voters if v != leader.id]
        if others:
            self.preferred = self.rng.choice(others)
            for node in self._alive():
                node.live_core.set_preferred_leader(self.preferred)
            self._trace(f"preferred leader {self.preferred} (while quiesced)")
            self._run_until(quiet, "a new preferred leader did not take over and quiesce")
            self.stats["quiesced_hand_overs"] += 1

        leader = self._leader()
        assert leader is not None
        before = self.stats["conf_changes"]
        self._change_membership(leader)
        if self.stats["conf_changes"] > before:
            self._run_until(quiet, "a membership change did not commit and quiesce")
            self.stats["quiesced_conf_changes"] += 1

    def _read_on_a_quiesced_follower(self) -> None:
        """A ReadIndex on a follower of the sleeping group is answered. A read lost to a leader change
        is never answered (the host times it out and asks again): a slow disk write can hold the
        woken leader's heartbeats past check-quorum, so a new leader gets the read again."""
        for _ in range(3):
            leader = self._leader()
            assert leader is not None
            followers = [m for m in leader.live_core.conf_state.members() if m != leader.id]
            follower = self.nodes[self.rng.choice(followers)]
            term = leader.live_core.term
            self.read_seq += 1
            ctx = b"read-%d" % self.read_seq
            follower.live_core.read_index(ctx, float(self.now))
            self.pending_reads[ctx] = (follower.id, leader.live_core.commit_index)
            self._run_until(
                lambda ctx=ctx, term=term: ctx not in self.pending_reads or not self._still_leads(term),
                "a read on a quiesced follower was neither answered nor lost to a new leader",
            )
            self._run_until(self._converged_and_quiesced, "the group did not quiesce after a read")
            if ctx not in self.pending_reads:
                self.stats["quiesced_reads"] += 1
                return
            del self.pending_reads[ctx]
        raise SafetyViolation("liveness: three reads on a quiesced follower were all lost to leader changes")

    def _still_leads(self, term: int) -> bool:
        leader = self._leader()
        return leader is not None and leader.live_core.term == term

    def _converged_and_quiesced(self) -> bool:
        return self._converged() and self._all_quiesced()

    def _commits_after_crash(self, leader: SimNode) -> bool:
        core = leader.live_core
        return core.commit_index == core.last_index and core.entry_term(core.commit_index) == core.term

    def _all_quiesced(self) -> bool:
        leader = self._leader()
        if leader is None:
            return False
        members = [self.nodes.get(m) for m in leader.live_core.conf_state.members()]
        return all(node is not None and node.alive and node.live_core.quiesced for node in members)

    def _run_until(self, done: Callable[[], bool], failure: str) -> None:
        for _ in range(SETTLE_STEPS):
            self.now += 1
            self._advance_time()
            if done():
                return
        raise SafetyViolation(f"liveness: {failure} within {SETTLE_STEPS} ticks")

    def _converged(self) -> bool:
        leader = self._leader()
        if leader is None:
            return False
        core = leader.live_core
        commit = core.commit_index
        if (
            commit < self.checker.max_acked
            or commit != core.last_index
            or core.entry_term(commit) != core.term
        ):
            return False
        for member in core.conf_state.members():
            node = self.nodes.get(member)
            if node is None or not node.alive or node.state_machine.index != commit:
                return False
        # a preferred voter ends up leading once the faults stop (leaders spread as placement says),
        # unless an explicit transfer put this leader there: that sticks until the next ordinary election
        return (
            self.preferred is None
            or self.preferred not in core.voters
            or leader.id == self.preferred
            or core.leads_by_transfer
        )


def run_seed(seed: int, options: SimOptions | None = None) -> SimResult:
    return Simulation(seed, options or SimOptions()).run()
