"""The sans-IO Raft core, shaped like etcd's RawNode.

The host drives it: `tick()` on a timer, `step(msg)` for every inbound
message, `propose*()` for commands, and whenever `has_ready()` it takes
`ready()`, handles it in the order `Ready` documents (persist, send, apply)
and calls `advance(ready)`. Between `ready()` and `advance()` the host may
keep stepping and ticking, but must not take another Ready.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from raft.log_storage import LogStorage
from raft.types import ConfChange, ConfState, Message, NodeId, Ready, Role


class RaftError(Exception):
    """Base of the errors the core raises to its host."""


class ProposalDroppedError(RaftError):
    """The proposal was not appended: this node is not the leader, or a transfer is under way."""


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

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("node id must not be empty")
        if self.heartbeat_tick <= 0:
            raise ValueError("heartbeat_tick must be positive")
        if self.election_tick <= self.heartbeat_tick:
            raise ValueError("election_tick must be greater than heartbeat_tick")
        if self.max_inflight_msgs <= 0 or self.max_entries_per_msg <= 0 or self.max_size_per_msg <= 0:
            raise ValueError("message and inflight limits must be positive")


class RaftCore:
    """One member of one Raft group. Deterministic given its inputs and `rng`."""

    def __init__(self, config: RaftConfig, storage: LogStorage, rng: random.Random) -> None:
        raise NotImplementedError

    # --- inputs ---

    def tick(self) -> None:
        """Advance the logical clock by one tick (elections, heartbeats, check-quorum)."""
        raise NotImplementedError

    def step(self, msg: Message) -> None:
        """Feed one message from a peer. Stale or malformed messages are ignored."""
        raise NotImplementedError

    def campaign(self) -> None:
        """Start an election now (pre-vote first when enabled), as if the timer fired."""
        raise NotImplementedError

    def propose(self, data: bytes) -> int:
        """Append one command; returns its index (in the current `term`)."""
        raise NotImplementedError

    def propose_many(self, datas: Sequence[bytes]) -> int:
        """Append commands as consecutive entries; returns the first index."""
        raise NotImplementedError

    def propose_conf_change(self, change: ConfChange) -> int:
        """Append a membership change; returns its index. One change at a time."""
        raise NotImplementedError

    def transfer_leader(self, to: NodeId) -> None:
        """Ask leadership to move to `to` (forwarded to the leader on a follower)."""
        raise NotImplementedError

    def read_index(self, ctx: bytes) -> None:
        """Request a linearizable read point; answered by a ReadState with `ctx`."""
        raise NotImplementedError

    def report_unreachable(self, node_id: NodeId) -> None:
        """The host failed to send to `node_id`: stop pipelining to it until it answers."""
        raise NotImplementedError

    def report_snapshot(self, node_id: NodeId, ok: bool) -> None:
        """The host finished (or failed) sending a snapshot to `node_id`."""
        raise NotImplementedError

    # --- outputs ---

    def has_ready(self) -> bool:
        raise NotImplementedError

    def ready(self) -> Ready:
        raise NotImplementedError

    def advance(self, ready: Ready) -> None:
        raise NotImplementedError

    # --- accessors ---

    @property
    def id(self) -> NodeId:
        raise NotImplementedError

    @property
    def role(self) -> Role:
        raise NotImplementedError

    @property
    def term(self) -> int:
        raise NotImplementedError

    @property
    def leader_id(self) -> NodeId | None:
        raise NotImplementedError

    @property
    def commit_index(self) -> int:
        raise NotImplementedError

    @property
    def applied(self) -> int:
        raise NotImplementedError

    @property
    def last_index(self) -> int:
        raise NotImplementedError

    @property
    def conf_state(self) -> ConfState:
        """Current membership: the latest conf-change entry in the log, committed or not."""
        raise NotImplementedError

    @property
    def voters(self) -> tuple[NodeId, ...]:
        raise NotImplementedError

    @property
    def learners(self) -> tuple[NodeId, ...]:
        raise NotImplementedError

    def conf_state_at(self, index: int) -> ConfState:
        """Membership as of applied `index`, for a snapshot the host takes there."""
        raise NotImplementedError
