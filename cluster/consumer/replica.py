"""One consumer's replica on this node: its Raft group over the replicated `ConsumerState`.

Every replica applies the consumer's committed entries (start position,
deliveries, acks, naks, terms, forgets) to its `ConsumerState`, so a new
leader continues with the same delivered and ack-floor positions and the same
pending acks. The replica that leads the group also does the delivering
(`cluster/consumer/leader.py`), reading the local replica of the stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog

from cluster.consumer.assignment import ConsumerAssignment
from cluster.consumer.config import ConsumerConfig, consumer_config_from_json
from cluster.consumer.leader import ConsumerLeader
from cluster.consumer.state import ApplyResult, ConsumerState
from cluster.runtime.context import GROUP_OPTIONS, NodeContext
from cluster.stream.retention import Interest
from raft.driver import GroupNotFoundError
from raft.types import Entry, EntryType, NodeId, Role, Snapshot

if TYPE_CHECKING:
    from cluster.stream.machine import PurgeDone
    from cluster.stream.replica import StreamReplica

log = structlog.get_logger(__name__)


class ConsumerReplica:
    def __init__(self, ctx: NodeContext, assignment: ConsumerAssignment, stream: StreamReplica) -> None:
        self.ctx = ctx
        self.assignment = assignment
        self.stream = stream
        self.name = assignment.name
        self.group = assignment.group
        self.config: ConsumerConfig = consumer_config_from_json(assignment.config)
        self.state = ConsumerState(self.config.ack_policy)
        self.role = Role.FOLLOWER
        self.leader: ConsumerLeader | None = None
        self.stopped = False

    # -- the driver's StateMachine ---------------------------------------------------------

    @property
    def applied_index(self) -> int:
        return 0  # kept in memory: the log (or its snapshot) replays on start

    def apply(self, entries: Sequence[Entry]) -> Sequence[ApplyResult]:
        results = self.state.apply(
            (entry.index, entry.data if entry.type is EntryType.NORMAL else b"") for entry in entries
        )
        acked = [seq for result in results for seq in result.acked]
        if acked:
            self.stream.consumer_acked(acked, from_consumer_leader=self.leader is not None)
        for result in results:
            if result.reset_to > 1:
                self.stream.consumer_reset(result.reset_to)
        return results

    def snapshot(self) -> bytes:
        return self.state.snapshot()

    def restore(self, snapshot: Snapshot) -> None:
        self.state = (
            ConsumerState.restore(snapshot.data) if snapshot.data else ConsumerState(self.config.ack_policy)
        )
        self.state.applied_index = snapshot.index

    def interest(self) -> Interest:
        return Interest(self.config.filters, self.state.wants)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        # A replica placed when the consumer was made starts with the whole peer set; one placed
        # later (its stream's peer was replaced) starts with none and waits for the leader to add it,
        # so it can never campaign on a membership the group does not have.
        voters = self.assignment.peers if self.assignment.epoch == 1 else ()
        self.ctx.host.add_group(
            self.group, self, voters=voters, options=self.ctx.group_options(GROUP_OPTIONS)
        )
        # its peers are its stream's, first the node placement chose to lead the stream: the consumer
        # is led there too, and both come back there after a restart
        self.ctx.host.set_preferred_leader(
            self.group, self.assignment.peers[0] if self.assignment.peers else None
        )
        if voters and voters[0] == self.ctx.name and self.ctx.host.last_index(self.group) == 0:
            # a brand-new group: its first peer stands at once instead of waiting out an election timeout
            self.ctx.host.campaign(self.group)

    async def stop(self, delete: bool) -> None:
        self.stopped = True
        if self.leader is not None:
            self.leader.close()
            self.leader = None
        with contextlib.suppress(GroupNotFoundError):
            await self.ctx.host.remove_group(self.group, delete_data=delete)

    def assignment_changed(self, assignment: ConsumerAssignment) -> None:
        self.assignment = assignment
        self.ctx.host.set_preferred_leader(self.group, assignment.peers[0] if assignment.peers else None)
        self.config = consumer_config_from_json(assignment.config)
        if self.leader is not None:
            self.leader.config_changed()
            self.leader.reconcile_membership()

    def on_leader_change(self, leader: NodeId | None, role: Role, term: int) -> None:
        was_leader = self.role is Role.LEADER
        self.role = role
        if role is Role.LEADER and not was_leader and not self.stopped:
            self.leader = ConsumerLeader(self)
            self.leader.open()
        elif role is not Role.LEADER and self.leader is not None:
            self.leader.close()
            self.leader = None

    def stream_stored(self) -> None:
        """The local stream replica applied new messages: a waiting consumer may have work."""
        if self.leader is not None:
            self.leader.kick()

    def stream_purged(self, purge: PurgeDone) -> None:
        """The local stream replica applied a purge: the leader (only) moves the consumer past it."""
        if self.leader is not None:
            self.leader.stream_purged(purge)

    def stream_removed(self, seqs: list[int]) -> None:
        """The local stream replica removed these messages: the leader (only) drops pending ones."""
        if self.leader is not None:
            self.leader.stream_removed(seqs)

    def info_view_args(self) -> dict[str, Any]:
        return {"stream": self.assignment.stream, "name": self.name, "created_ns": self.assignment.created_ns}
