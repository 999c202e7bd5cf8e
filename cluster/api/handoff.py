"""Requests that meet a leader change on their way.

The meta, stream and consumer leaders each serve their own internal subjects, and a node forwards
a request to whichever peer its view of the interest names. When that leader steps down while the
request is on the route, the request lands on a node where nobody takes it any more, and its
client would wait its whole timeout. The landing node hands it on instead: once somebody serves
the subject again (the next leader, usually within an election), bounded by LEADER_WAIT, and only
once (the router refuses to hand on a request already handed on).
"""

from __future__ import annotations

import structlog

from cluster.api.consumer_subjects import CONSUMER_PREFIX, META_CONSUMER_PREFIX
from cluster.api.subjects import META_PREFIX, STREAM_PREFIX
from cluster.runtime.context import NodeContext
from cluster.runtime.leader_wait import wait_for_interest
from gateway.router import Message

log = structlog.get_logger(__name__)

LEADER_SUBJECT_PREFIXES = (META_PREFIX, STREAM_PREFIX, META_CONSUMER_PREFIX, CONSUMER_PREFIX)


def hand_on_requests_in_flight(ctx: NodeContext) -> None:
    """Register with the router: forwarded leader requests nobody here serves go to the next leader."""

    def unserved(msg: Message, reply_via: str | None) -> None:
        ctx.spawn(_when_served(ctx, msg, reply_via), "api-hand-on")

    for prefix in LEADER_SUBJECT_PREFIXES:
        ctx.router.on_unserved(prefix, unserved)


async def _when_served(ctx: NodeContext, msg: Message, reply_via: str | None) -> None:
    router = ctx.router
    if await wait_for_interest(router, msg.subject) and router.publish(
        msg.subject, msg.payload, msg.reply, msg.headers, reply_via=reply_via, rerouted=True
    ):
        return
    log.info("leader_request_unserved", subject=msg.subject)
