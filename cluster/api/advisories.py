"""JetStream advisories about streams and consumers, as nats-server 2.15 publishes them on `$JS.EVENT.ADVISORY.>`.

Bodies and subjects checked against a real 3-node nats-server 2.15.1 cluster
(tests/cluster/test_advisories.py keeps what it sent). Each advisory is
published once, by the node that decided what it reports: the meta leader for
STREAM.CREATED, STREAM.UPDATED and STREAM.DELETED (after a CONSUMER.DELETED for
each of the stream's consumers, in that order, as the server does), and for
CONSUMER.CREATED and CONSUMER.DELETED, and CONSUMER.PAUSE when a consumer is
created paused or a PAUSE request sets or clears its pause; the consumer leader
for CONSUMER.MSG_TERMINATED, CONSUMER.MSG_NAKED, CONSUMER.MAX_DELIVERIES and the
CONSUMER.PAUSE that says a pause ran out; the stream leader for
STREAM.BATCH_ABANDONED (an atomic batch it was staging was dropped).
Builders are pure: the caller passes the event id and the clock.
"""

from __future__ import annotations

import enum
import secrets
import string
from typing import Any

from cluster.api import jsjson
from storage.nats_time import format_optional_ts, format_rfc3339_nano

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY."
CONSUMER_ACTION_TYPE = "io.nats.jetstream.advisory.v1.consumer_action"
STREAM_ACTION_TYPE = "io.nats.jetstream.advisory.v1.stream_action"
TERMINATED_TYPE = "io.nats.jetstream.advisory.v1.terminated"
NAK_TYPE = "io.nats.jetstream.advisory.v1.nak"
MAX_DELIVER_TYPE = "io.nats.jetstream.advisory.v1.max_deliver"
PAUSE_TYPE = "io.nats.jetstream.advisory.v1.consumer_pause"
GROUP_PINNED_TYPE = "io.nats.jetstream.advisory.v1.consumer_group_pinned"
GROUP_UNPINNED_TYPE = "io.nats.jetstream.advisory.v1.consumer_group_unpinned"
BATCH_ABANDONED_TYPE = "io.nats.jetstream.advisory.v1.stream_batch_abandoned"
STREAM_LEADER_ELECTED_TYPE = "io.nats.jetstream.advisory.v1.stream_leader_elected"
CONSUMER_LEADER_ELECTED_TYPE = "io.nats.jetstream.advisory.v1.consumer_leader_elected"
# the reason a MSG_TERMINATED advisory gives for a pending message the stream removed (nats-server's words)
UNACKED_MSG_DELETED = "Unacknowledged message was deleted"

_ID_ALPHABET = string.digits + string.ascii_letters
_ID_LENGTH = 22  # as long as a NUID, which is what nats-server uses


class ConsumerEvent(enum.StrEnum):
    CREATED = "CREATED"
    DELETED = "DELETED"
    MSG_TERMINATED = "MSG_TERMINATED"
    MSG_NAKED = "MSG_NAKED"
    MAX_DELIVERIES = "MAX_DELIVERIES"
    PAUSE = "PAUSE"
    PINNED = "PINNED"
    UNPINNED = "UNPINNED"


class StreamEvent(enum.StrEnum):
    CREATED = "CREATED"
    UPDATED = "UPDATED"
    DELETED = "DELETED"


_STREAM_ACTIONS = {
    StreamEvent.CREATED: "create",
    StreamEvent.UPDATED: "modify",
    StreamEvent.DELETED: "delete",
}


def stream_advisory_subject(event: StreamEvent, stream: str) -> str:
    return f"{ADVISORY_PREFIX}STREAM.{event.value}.{stream}"


def stream_action(stream: str, event: StreamEvent, event_id: str, now_ns: int, domain: str = "") -> bytes:
    """STREAM.CREATED / UPDATED / DELETED: `action` is create, modify or delete."""
    body: dict[str, Any] = {
        "type": STREAM_ACTION_TYPE,
        "id": event_id,
        "timestamp": format_rfc3339_nano(now_ns),
        "stream": stream,
        "action": _STREAM_ACTIONS[event],
    }
    if domain:
        body["domain"] = domain
    return jsjson.dumps(body)


SNAPSHOT_CREATE_TYPE = "io.nats.jetstream.advisory.v1.snapshot_create"
SNAPSHOT_COMPLETE_TYPE = "io.nats.jetstream.advisory.v1.snapshot_complete"
RESTORE_CREATE_TYPE = "io.nats.jetstream.advisory.v1.restore_create"
RESTORE_COMPLETE_TYPE = "io.nats.jetstream.advisory.v1.restore_complete"


def backup_advisory_subject(event: str, stream: str) -> str:
    """STREAM.SNAPSHOT_CREATE, SNAPSHOT_COMPLETE, RESTORE_CREATE or RESTORE_COMPLETE of `stream`."""
    return f"{ADVISORY_PREFIX}STREAM.{event}.{stream}"


def backup_advisory(
    kind: str,
    stream: str,
    client: dict[str, Any] | None,
    event_id: str,
    now_ns: int,
    domain: str = "",
    **fields: Any,
) -> bytes:
    """A snapshot's or a restore's advisory, in nats-server's field order: `fields` (its state, its start
    and end, its bytes) after the stream, then the client (null when the request named none), the domain
    and a snapshot's error."""
    error = fields.pop("error", "")
    body: dict[str, Any] = {
        "type": kind,
        "id": event_id,
        "timestamp": format_rfc3339_nano(now_ns),
        "stream": stream,
        **{key: format_rfc3339_nano(value) if key in ("start", "end") else value for key, value in fields.items()},
        "client": client,
    }
    if domain:
        body["domain"] = domain
    if error:
        body["error"] = error
    return jsjson.dumps(body)


def batch_abandoned_subject(stream: str) -> str:
    return f"{ADVISORY_PREFIX}STREAM.BATCH_ABANDONED.{stream}"


def batch_abandoned(
    stream: str, batch_id: str, reason: str, event_id: str, now_ns: int, domain: str = ""
) -> bytes:
    """STREAM.BATCH_ABANDONED: an atomic batch was dropped (`reason`: timeout, large or incomplete)."""
    body: dict[str, Any] = {
        "type": BATCH_ABANDONED_TYPE,
        "id": event_id,
        "timestamp": format_rfc3339_nano(now_ns),
        "stream": stream,
    }
    if domain:
        body["domain"] = domain
    body["batch"] = batch_id
    body["reason"] = reason
    return jsjson.dumps(body)


# random byte -> a character of the alphabet (256 is not a multiple of 62: the first few characters come
# up a little more often, which an id that only has to be unique does not mind)
_ID_TABLE = bytes(ord(_ID_ALPHABET[byte % len(_ID_ALPHABET)]) for byte in range(256))


def new_event_id() -> str:
    # one read of the OS's random source, where choosing each character on its own took 22
    return secrets.token_bytes(_ID_LENGTH).translate(_ID_TABLE).decode()


def consumer_advisory_subject(event: ConsumerEvent, stream: str, consumer: str) -> str:
    return f"{ADVISORY_PREFIX}CONSUMER.{event.value}.{stream}.{consumer}"


def _head(kind: str, event_id: str, now_ns: int, stream: str, consumer: str) -> dict[str, Any]:
    return {
        "type": kind,
        "id": event_id,
        "timestamp": format_rfc3339_nano(now_ns),
        "stream": stream,
        "consumer": consumer,
    }


def consumer_action(
    stream: str, consumer: str, created: bool, event_id: str, now_ns: int, domain: str = ""
) -> bytes:
    """CONSUMER.CREATED (`created`) or CONSUMER.DELETED."""
    body = _head(CONSUMER_ACTION_TYPE, event_id, now_ns, stream, consumer)
    body["action"] = "create" if created else "delete"
    if domain:
        body["domain"] = domain
    return jsjson.dumps(body)


def consumer_pause(
    stream: str, consumer: str, pause_until_ns: int | None, event_id: str, now_ns: int, domain: str = ""
) -> bytes:
    """CONSUMER.PAUSE: `paused` says whether `pause_until` (Go's zero time when cleared) is still ahead."""
    body = _head(PAUSE_TYPE, event_id, now_ns, stream, consumer)
    body["paused"] = pause_until_ns is not None and now_ns < pause_until_ns
    body["pause_until"] = format_optional_ts(pause_until_ns or 0)
    if domain:
        body["domain"] = domain
    return jsjson.dumps(body)


def _group_event(
    kind: str, account: str, stream: str, consumer: str, group: str, event_id: str, now_ns: int, domain: str
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": kind,
        "id": event_id,
        "timestamp": format_rfc3339_nano(now_ns),
        "account": account,
        "stream": stream,
        "consumer": consumer,
    }
    if domain:
        body["domain"] = domain
    body["group"] = group
    return body


def consumer_group_pinned(
    account: str, stream: str, consumer: str, group: str, pinned_id: str, event_id: str, now_ns: int, domain: str = ""
) -> bytes:
    """CONSUMER.PINNED: a priority group was pinned to a new client."""
    body = _group_event(GROUP_PINNED_TYPE, account, stream, consumer, group, event_id, now_ns, domain)
    body["pinned_id"] = pinned_id
    return jsjson.dumps(body)


def consumer_group_unpinned(
    account: str, stream: str, consumer: str, group: str, reason: str, event_id: str, now_ns: int, domain: str = ""
) -> bytes:
    """CONSUMER.UNPINNED: a priority group's pin was released, by an UNPIN request (`admin`) or because
    the pinned client stopped asking (`timeout`)."""
    body = _group_event(GROUP_UNPINNED_TYPE, account, stream, consumer, group, event_id, now_ns, domain)
    body["reason"] = reason
    return jsjson.dumps(body)


def msg_terminated(
    stream: str,
    consumer: str,
    consumer_seq: int,
    stream_seq: int,
    deliveries: int,
    reason: str,
    event_id: str,
    now_ns: int,
) -> bytes:
    """CONSUMER.MSG_TERMINATED: a client sent +TERM (with an optional reason) for a pending message."""
    body = _head(TERMINATED_TYPE, event_id, now_ns, stream, consumer)
    body.update(consumer_seq=consumer_seq, stream_seq=stream_seq, deliveries=deliveries)
    if reason:
        body["reason"] = reason
    return jsjson.dumps(body)


def msg_naked(
    stream: str,
    consumer: str,
    consumer_seq: int,
    stream_seq: int,
    deliveries: int,
    event_id: str,
    now_ns: int,
) -> bytes:
    """CONSUMER.MSG_NAKED: a client sent -NAK for a pending message."""
    body = _head(NAK_TYPE, event_id, now_ns, stream, consumer)
    body.update(consumer_seq=consumer_seq, stream_seq=stream_seq, deliveries=deliveries)
    return jsjson.dumps(body)


def max_deliveries(
    stream: str, consumer: str, stream_seq: int, deliveries: int, event_id: str, now_ns: int
) -> bytes:
    """CONSUMER.MAX_DELIVERIES: a message was delivered max_deliver times and is not sent again."""
    body = _head(MAX_DELIVER_TYPE, event_id, now_ns, stream, consumer)
    body.update(stream_seq=stream_seq, deliveries=deliveries)
    return jsjson.dumps(body)


__all__ = [
    "ADVISORY_PREFIX",
    "ConsumerEvent",
    "StreamEvent",
    "consumer_action",
    "consumer_advisory_subject",
    "consumer_pause",
    "max_deliveries",
    "msg_naked",
    "msg_terminated",
    "new_event_id",
    "stream_action",
    "stream_advisory_subject",
]


def stream_leader_elected_subject(stream: str) -> str:
    return f"{ADVISORY_PREFIX}STREAM.LEADER_ELECTED.{stream}"


def consumer_leader_elected_subject(stream: str, consumer: str) -> str:
    return f"{ADVISORY_PREFIX}CONSUMER.LEADER_ELECTED.{stream}.{consumer}"


def leader_elected(
    stream: str,
    consumer: str | None,
    leader: str,
    replicas: list[dict[str, Any]],
    event_id: str,
    now_ns: int,
    domain: str = "",
) -> bytes:
    """STREAM.LEADER_ELECTED (`consumer` None) or CONSUMER.LEADER_ELECTED: the new leader of a replicated
    group and every member of it, the leader included, as STREAM.INFO shows a replica."""
    body: dict[str, Any] = {
        "type": STREAM_LEADER_ELECTED_TYPE if consumer is None else CONSUMER_LEADER_ELECTED_TYPE,
        "id": event_id,
        "timestamp": format_rfc3339_nano(now_ns),
        "stream": stream,
    }
    if consumer is not None:
        body["consumer"] = consumer
    body["leader"] = leader
    body["replicas"] = replicas
    if domain:
        body["domain"] = domain
    return jsjson.dumps(body)
