"""Requests that meet a leader change on their way.

The meta, stream and consumer leaders each serve their own internal subjects, and a node forwards
a request to whichever peer its view of the interest names. When that leader steps down while the
request is on the route, the request lands on a node where nobody takes it any more, and its
client would wait its whole timeout. The landing node hands it on instead: once somebody serves
the subject again (the next leader, usually within an election), bounded by HAND_ON_WAIT, and only
once (the router refuses to hand on a request already handed on).

The same gap on the sending side: a request forwarded to a leader whose node dies (or is cut off) in
that moment sits unread in the dead link, or still queued for it, and is lost with it. The route mesh
gives back every request its peer had not confirmed when the link went down
(`Router.on_lost_in_transit`), and this node hands it on the same way, if asking twice is harmless:
the peer may have read it after all, and a client that gets two answers to a read keeps the first,
while a create, delete, purge or pull request must not happen twice (that client times out, as
nats-server's does when a route drops its request).
"""

from __future__ import annotations

import structlog

from cluster.api.consumer_subjects import (
    CONSUMER_PREFIX,
    META_CONSUMER_PREFIX,
    ConsumerOp,
    parse_internal_consumer_subject,
)
from cluster.api.subjects import META_PREFIX, STREAM_PREFIX, ApiOp, parse_meta_subject, parse_stream_subject
from cluster.runtime.context import NodeContext
from cluster.runtime.leader_wait import wait_for_interest
from gateway.router import Message

log = structlog.get_logger(__name__)

# How long a request handed on waits for the next leader. Longer than the API entry's LEADER_WAIT,
# after which the entry answers 503: here nobody would answer, the client only times out, so giving up
# early gains nothing. A leader whose node died is replaced after an election timeout (1-2 s, more on
# a loaded machine, twice that if the first vote splits), then its interest has to reach this node.
# 10 s outlasts the JetStream timeout clients use by default (5 s in nats-py, nats.js and the CLI);
# the wait holds one task and the request's bytes.
HAND_ON_WAIT = 10.0

LEADER_SUBJECT_PREFIXES = (META_PREFIX, STREAM_PREFIX, META_CONSUMER_PREFIX, CONSUMER_PREFIX)

# What a leader may be asked twice with no effect but a second answer: reads. (CREATE_RESULT and
# LIST_ENTRY are a meta leader's requests for a create's answer and a list's entry, reads too.)
_META_READS = frozenset({ApiOp.STREAM_INFO, ApiOp.STREAM_NAMES, ApiOp.STREAM_LIST, ApiOp.ACCOUNT_INFO})
_STREAM_READS = frozenset({ApiOp.STREAM_INFO, ApiOp.STREAM_MSG_GET, ApiOp.CREATE_RESULT, ApiOp.LIST_ENTRY})
_META_CONSUMER_READS = frozenset({"INFO", "NAMES", "LIST"})
_CONSUMER_READS = frozenset({ConsumerOp.INFO, ConsumerOp.CREATE_RESULT, ConsumerOp.LIST_ENTRY})


def safe_to_ask_twice(subject: str) -> bool:
    """Whether the leader request on `subject` only reads, so a copy that may duplicate it is harmless."""
    if subject.startswith(META_CONSUMER_PREFIX):
        return subject[len(META_CONSUMER_PREFIX) :].partition(".")[0] in _META_CONSUMER_READS
    if subject.startswith(META_PREFIX):
        request = parse_meta_subject(subject)
        return request is not None and request.op in _META_READS
    if subject.startswith(STREAM_PREFIX):
        request = parse_stream_subject(subject)
        return request is not None and request.op in _STREAM_READS
    if subject.startswith(CONSUMER_PREFIX):
        parsed = parse_internal_consumer_subject(subject)
        return parsed is not None and parsed[2] in _CONSUMER_READS
    return False


def hand_on_requests_in_flight(ctx: NodeContext) -> None:
    """Register with the router: forwarded leader requests nobody here serves go to the next leader."""

    def unserved(msg: Message, reply_via: str | None) -> None:
        ctx.spawn(hand_on_when_served(ctx, msg, reply_via), "api-hand-on")

    def lost_in_transit(msg: Message, reply_via: str | None) -> None:
        if safe_to_ask_twice(msg.subject):
            ctx.spawn(hand_on_when_served(ctx, msg, reply_via), "api-hand-on-lost")
        else:
            # the peer may have read and answered it (its pong was still on the way): not "lost"
            log.info("leader_request_unconfirmed", subject=msg.subject, asked_again=False)

    for prefix in LEADER_SUBJECT_PREFIXES:
        ctx.router.on_unserved(prefix, unserved)
        ctx.router.on_lost_in_transit(prefix, lost_in_transit)


async def hand_on_when_served(ctx: NodeContext, msg: Message, reply_via: str | None) -> None:
    """Send `msg` on (once) as soon as somebody serves its subject, within HAND_ON_WAIT."""
    router = ctx.router
    if await wait_for_interest(router, msg.subject, HAND_ON_WAIT) and router.publish(
        msg.subject, msg.payload, msg.reply, msg.headers, reply_via=reply_via, rerouted=True
    ):
        return
    log.info("leader_request_unserved", subject=msg.subject)
