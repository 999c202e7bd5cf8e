"""Bring a Raft group's voters to a wanted peer set, one single-server change at a time.

Used by a stream's leader and by each of its consumers' leaders when
STREAM.PEER.REMOVE moved the stream (and so its consumers) to a new peer set:
first add the replacement, then remove the old peer; a leader that is itself
being removed hands leadership to a peer that stays, which finishes the change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from raft.driver import RaftHost, RaftHostError
from raft.types import ConfChange, ConfChangeType

log = structlog.get_logger(__name__)

RETRY_DELAY_S = 0.5


def next_change(me: str, voters: set[str], wanted: set[str]) -> ConfChange | str | None:
    """The next step: a change to propose, the name of a staying peer to hand leadership to, or None
    when the voters are already the wanted set."""
    if voters == wanted:
        return None
    to_add = sorted(wanted - voters)
    if to_add:
        return ConfChange(ConfChangeType.ADD_VOTER, to_add[0])
    to_remove = sorted(voters - wanted)
    if me in to_remove:
        staying = sorted((wanted & voters) - {me})
        return staying[0] if staying else None
    return ConfChange(ConfChangeType.REMOVE_NODE, to_remove[0])


async def converge_membership(
    host: RaftHost, group: str, me: str, wanted: Callable[[], set[str]], closed: Callable[[], bool]
) -> None:
    """Change `group`'s voters until they are `wanted()` (read again after every step, so a newer
    assignment wins), while this node leads and `closed()` is false."""
    while not closed():
        try:
            voters = set(host.status(group).voters)
        except RaftHostError:
            return  # the group is gone (the consumer was deleted or moved away)
        step = next_change(me, voters, wanted())
        if step is None:
            return
        try:
            if isinstance(step, str):
                await host.transfer_leadership(group, step)
                return  # the new leader finishes the change
            log.info("group_membership_change", group=group, change=step.type.name, node=step.node_id)
            await host.change_membership(group, step)
        except (RaftHostError, TimeoutError) as exc:
            # another change still in flight, a leader change, or a slow transfer: try again shortly
            log.info("group_membership_change_failed", group=group, error=str(exc))
            await asyncio.sleep(RETRY_DELAY_S)


__all__ = ["converge_membership", "next_change"]
