"""Replicas leaving this node: a stream whose peers no longer include it (STREAM.PEER.REMOVE, EVACUATE).

Dropping such a replica the moment the assignment changes can leave its Raft groups without a quorum:
the only replica of an R1 stream, or the leader of an R2 one, would go before the replacement that the
new peers bring is a voter holding the log, and the group could then never elect a leader again. So
the replica stays, with its consumers, and follows the new assignment (if it leads, it adds the
replacement, which catches up, and hands leadership over, cluster/runtime/group_membership.py); it goes
once none of its groups counts it as a voter any more. A removed voter is not always told (the leader
stops sending to it as it appends the change), so while it still believes itself a voter it asks each
group's leader elsewhere, through STREAM.INFO and CONSUMER.INFO, whether it is still among the replicas.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import structlog

from cluster.api.consumer_subjects import ConsumerOp, consumer_subject
from cluster.api.subjects import ApiOp, stream_subject
from cluster.consumer.assignment import ConsumerAssignment
from cluster.runtime.context import NodeContext
from cluster.runtime.internal_requests import NoRespondersError
from cluster.stream.assignment import StreamAssignment
from raft.driver import RaftHostError
from raft.types import Role

if TYPE_CHECKING:
    from cluster.consumer.replica import ConsumerReplica
    from cluster.stream.replica import StreamReplica

log = structlog.get_logger(__name__)

# seconds between a leaving replica's looks at its groups, give or take half: replicas leaving together
# (a stream scaled down) then leave `_sys_` at different moments, so a Direct Get on its way to one that
# has just left is handed on to a member still there (gateway/router.py, `deliver_routed`) rather than
# to another that is leaving in the same instant, where it would be lost
CHECK_INTERVAL = 0.5
ASK_TIMEOUT = 2.0  # seconds for a group's leader to say whether this node is still a voter


class Departures:
    """This node's leaving replicas, each with the task that waits until it may go."""

    def __init__(
        self,
        ctx: NodeContext,
        streams: Mapping[str, StreamAssignment],
        consumers: Mapping[str, Mapping[str, ConsumerAssignment]],
        forget: Callable[[StreamReplica | ConsumerReplica], None],
    ) -> None:
        self._ctx = ctx
        # the meta machine's assignments (read, never changed here)
        self._streams = streams
        self._consumers = consumers
        # takes a replica that goes (a stream's with its consumers) out of the meta service's group lookups
        self._forget = forget
        self._leaving: dict[str, tuple[StreamReplica, asyncio.Task[None]]] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._leaving

    def leave(self, replica: StreamReplica) -> None:
        """`replica`'s stream no longer has this node among its peers: follow it out."""
        self._leaving[replica.name] = (replica, self._ctx.spawn(self._leave(replica), f"leave-{replica.name}"))
        log.info("stream_replica_leaving", stream=replica.name, node=self._ctx.name)

    def take_back(self, name: str) -> StreamReplica | None:
        """The leaving replica of `name`, if the stream (the same one) has this node among its peers
        again: it stays (the caller hands it its assignment)."""
        held = self._leaving.get(name)
        current = self._streams.get(name)
        if held is None or current is None or current.created_ns != held[0].assignment.created_ns:
            return None
        del self._leaving[name]
        held[1].cancel()
        return held[0]

    async def stream_changed(self, name: str) -> None:
        """The meta group changed stream `name`: a leaving replica of it whose stream is gone (deleted,
        or made anew) goes now, not at its next look, so that it answers no Direct Get after the delete
        is acknowledged."""
        held = self._leaving.get(name)
        current = self._streams.get(name)
        if held is None or (current is not None and current.created_ns == held[0].assignment.created_ns):
            return
        del self._leaving[name]
        held[1].cancel()
        await self._gone(held[0])

    async def stop(self) -> None:
        """The node stops: leaving replicas stop with it, their data kept (they leave after a restart)."""
        leaving, self._leaving = list(self._leaving.values()), {}
        for replica, task in leaving:
            task.cancel()
            await replica.stop(delete=False)

    async def _leave(self, replica: StreamReplica) -> None:
        while True:
            current = self._streams.get(replica.name)
            if current is None or current.created_ns != replica.assignment.created_ns:
                break  # deleted (or made anew): nothing left to hand over
            await self._follow(replica, current)
            await asyncio.sleep(CHECK_INTERVAL * (0.5 + random.random()))
            if not await self._still_voter(replica):
                break
        self._leaving.pop(replica.name, None)
        await self._gone(replica)

    async def _gone(self, replica: StreamReplica) -> None:
        self._forget(replica)
        log.info("stream_replica_left", stream=replica.name, node=self._ctx.name)
        await replica.stop(delete=True)

    async def _follow(self, replica: StreamReplica, current: StreamAssignment) -> None:
        """Hand the replica and its consumers their assignments as the meta group has them now."""
        if current.to_json() != replica.assignment.to_json():
            replica.assignment_changed(StreamAssignment.from_json(current.to_json()))
        assigned = self._consumers.get(replica.name, {})
        for name, consumer in list(replica.consumers.items()):
            now = assigned.get(name)
            if now is None or now.created_ns != consumer.assignment.created_ns:
                del replica.consumers[name]
                self._forget(consumer)
                await consumer.stop(delete=True)
            elif now.to_json() != consumer.assignment.to_json():
                consumer.assignment_changed(ConsumerAssignment.from_json(now.to_json()))

    async def _still_voter(self, replica: StreamReplica) -> bool:
        asks = [(replica.group, stream_subject(replica.name, ApiOp.STREAM_INFO))]
        asks += [
            (c.group, consumer_subject(replica.name, c.name, ConsumerOp.INFO)) for c in replica.consumers.values()
        ]
        for group, subject in asks:
            if await self._voter_in(group, subject):
                return True
        return False

    async def _voter_in(self, group: str, info_subject: str) -> bool:
        """Whether `group` still counts this node as a voter: as far as it knows itself, and, while it
        does not lead, as the group's leader elsewhere answers (no answer: still a voter)."""
        me = self._ctx.name
        try:
            status = self._ctx.host.status(group)
        except RaftHostError:
            return False
        if me not in status.voters:
            return False
        if status.role is Role.LEADER:
            return True  # it hands leadership over first
        cluster = await cluster_info(self._ctx, info_subject, ASK_TIMEOUT)
        if cluster is None or cluster.get("leader") in (None, "", me):
            return True
        replicas = cluster.get("replicas") or []
        return any(isinstance(r, dict) and me in (r.get("name"), r.get("peer")) for r in replicas)


async def cluster_info(ctx: NodeContext, info_subject: str, timeout: float) -> dict[str, Any] | None:
    """The `cluster` object of a group leader's STREAM.INFO or CONSUMER.INFO answer (leader, replicas),
    or None without one in time."""
    try:
        reply = await ctx.requester.request(info_subject, b"", timeout)
        cluster = json.loads(reply.payload).get("cluster")
    except (TimeoutError, NoRespondersError, ValueError, AttributeError):
        return None
    return cluster if isinstance(cluster, dict) else None


__all__ = ["Departures", "cluster_info"]
