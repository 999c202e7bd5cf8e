"""Consumer advisories byte for byte against what a real nats-server 2.15.1 cluster published
(captured by subscribing to `$JS.EVENT.ADVISORY.>` while a client created a consumer, sent +TERM,
-NAK and +TERM with a reason, let a message reach max_deliver, and deleted it)."""

from __future__ import annotations

import string

from cluster.api.advisories import (
    ConsumerEvent,
    StreamEvent,
    consumer_action,
    consumer_advisory_subject,
    max_deliveries,
    msg_naked,
    msg_terminated,
    new_event_id,
    stream_action,
    stream_advisory_subject,
)
from storage.nats_time import parse_rfc3339_nano

EVENT_ID = "yB1a0gXD1y7XSwZJL4lflT"
STAMP = "2026-11-23T11:17:41.303064163Z"

CREATED = (
    b'{"type":"io.nats.jetstream.advisory.v1.consumer_action","id":"yB1a0gXD1y7XSwZJL4lflT",'
    b'"timestamp":"2026-11-23T11:17:41.303064163Z","stream":"ADV","consumer":"d","action":"create"}'
)
DELETED = CREATED.replace(b'"action":"create"', b'"action":"delete"')
TERMINATED = (
    b'{"type":"io.nats.jetstream.advisory.v1.terminated","id":"yB1a0gXD1y7XSwZJL4lflT",'
    b'"timestamp":"2026-11-23T11:17:41.303064163Z","stream":"ADV","consumer":"d","consumer_seq":6,'
    b'"stream_seq":3,"deliveries":2,"reason":"because"}'
)
NAKED = (
    b'{"type":"io.nats.jetstream.advisory.v1.nak","id":"yB1a0gXD1y7XSwZJL4lflT",'
    b'"timestamp":"2026-11-23T11:17:41.303064163Z","stream":"ADV","consumer":"d","consumer_seq":2,'
    b'"stream_seq":2,"deliveries":1}'
)
MAX_DELIVER = (
    b'{"type":"io.nats.jetstream.advisory.v1.max_deliver","id":"yB1a0gXD1y7XSwZJL4lflT",'
    b'"timestamp":"2026-11-23T11:17:41.303064163Z","stream":"ADV","consumer":"d","stream_seq":2,'
    b'"deliveries":2}'
)


def now() -> int:
    return parse_rfc3339_nano(STAMP)


def test_consumer_created_and_deleted() -> None:
    assert consumer_action("ADV", "d", True, EVENT_ID, now()) == CREATED
    assert consumer_action("ADV", "d", False, EVENT_ID, now()) == DELETED
    with_domain = consumer_action("ADV", "d", True, EVENT_ID, now(), domain="hub")
    assert with_domain == CREATED[:-1] + b',"domain":"hub"}'


def test_stream_actions() -> None:
    # as a nats-server 2.15.1 published them for create, update and delete of stream ADV
    stamp = parse_rfc3339_nano("2026-11-23T12:14:49.516799114Z")
    for event, action in (
        (StreamEvent.CREATED, "create"),
        (StreamEvent.UPDATED, "modify"),
        (StreamEvent.DELETED, "delete"),
    ):
        assert stream_action("ADV", event, "0jvIpCoM6bUBfTll2xmu7i", stamp) == (
            b'{"type":"io.nats.jetstream.advisory.v1.stream_action","id":"0jvIpCoM6bUBfTll2xmu7i",'
            b'"timestamp":"2026-11-23T12:14:49.516799114Z","stream":"ADV","action":"%s"}' % action.encode()
        )
        assert stream_advisory_subject(event, "ADV") == f"$JS.EVENT.ADVISORY.STREAM.{event.value}.ADV"


def test_message_advisories() -> None:
    assert msg_terminated("ADV", "d", 6, 3, 2, "because", EVENT_ID, now()) == TERMINATED
    plain_term = msg_terminated("ADV", "d", 6, 3, 2, "", EVENT_ID, now())
    assert plain_term == TERMINATED.replace(b',"reason":"because"', b"")
    assert msg_naked("ADV", "d", 2, 2, 1, EVENT_ID, now()) == NAKED
    assert max_deliveries("ADV", "d", 2, 2, EVENT_ID, now()) == MAX_DELIVER


def test_subjects_and_ids() -> None:
    assert (
        consumer_advisory_subject(ConsumerEvent.CREATED, "ADV", "d")
        == "$JS.EVENT.ADVISORY.CONSUMER.CREATED.ADV.d"
    )
    assert (
        consumer_advisory_subject(ConsumerEvent.MAX_DELIVERIES, "ADV", "d")
        == "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ADV.d"
    )
    ids = {new_event_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(len(i) == 22 and set(i) <= set(string.digits + string.ascii_letters) for i in ids)
