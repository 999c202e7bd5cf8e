"""Consumer API JSON, pull status frames and push control frames byte for byte against the traces;
pull request limits; retention decisions; replica determinism (hypothesis)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.consumer.acks import AckKind, ack_entry, parse_ack_body, parse_ack_reply
from cluster.consumer.api import (
    ConsumerView,
    flow_control_request,
    idle_heartbeat,
    info_response,
    names_response,
)
from cluster.consumer.config import AckPolicy, ConsumerConfig
from cluster.consumer.config_check import normalize_consumer_config
from cluster.consumer.delivery import plan_deliveries, start_position
from cluster.consumer.pull import (
    PullRequestError,
    WaitingQueue,
    batch_completed,
    check_pull_request,
    go_duration,
    no_messages,
    no_wait_answer,
    parse_pull_request,
)
from cluster.consumer.state import ConsumerState
from cluster.stream.config import StreamConfig
from cluster.stream.retention import Interest, interest_removals, workqueue_removals
from storage.memory import MemoryStreamStore
from storage.nats_time import parse_rfc3339_nano
from tests.cluster.trace_data import section, server_replies

S = 1_000_000_000
T0 = 1_795_357_227_000_000_000
WORK = StreamConfig(name="WORK", subjects=("work.>",))
WORKER = ConsumerConfig(
    durable_name="worker",
    ack_policy=AckPolicy.EXPLICIT,
    ack_wait=30 * S,
    max_deliver=5,
    filter_subject="work.>",
)


def test_info_response_is_the_servers_json() -> None:
    lines = section("11-pull-consumer.txt", "pull_subscribe")
    expected = next(x for x in lines if x.startswith("S: {")).split(": ", 1)[1].encode()
    obj = json.loads(expected)
    state = ConsumerState(AckPolicy.EXPLICIT)
    store = MemoryStreamStore()
    for i in range(6):
        store.store_msg("work.job", None, b"x", T0 + i)
    state.apply_entry(start_position(WORKER, store, replicated=False))
    view = ConsumerView(
        "WORK",
        "worker",
        parse_rfc3339_nano(obj["created"]),
        normalize_consumer_config(WORKER, WORK),
        state,
        6,
    )
    assert info_response(view, parse_rfc3339_nano(obj["ts"])) == expected


def test_status_and_control_frames_match_the_traces() -> None:
    pulls = server_replies("11-pull-consumer.txt", "psub.fetch(5")
    assert pulls[-1].header == no_messages()
    # the 128 KiB payloads of trace 12 are cut, so read the flow-control HMSG by hand
    lines = section("12-ordered-push-flow-control.txt", "js.subscribe")
    index = next(i for i, x in enumerate(lines) if "$JS.FC.FLOW." in x)
    assert lines[index].endswith(f" {len(flow_control_request())} {len(flow_control_request())}")
    assert flow_control_request() == (lines[index + 1][3:] + "\r\n\r\n").encode()
    idle = server_replies("12-ordered-push-flow-control.txt", "(idle:")
    state = ConsumerState(AckPolicy.NONE)
    state.delivered_consumer_seq = state.delivered_stream_seq = 16
    assert [r.header for r in idle] == [idle_heartbeat(state)] * 2


def test_names_paging() -> None:
    body = json.loads(names_response(["P1", "D1b", "F3"], 2))
    assert body == {
        "type": "io.nats.jetstream.api.v1.consumer_names_response",
        "total": 3,
        "offset": 2,
        "limit": 1024,
        "consumers": ["P1"],
    }


def test_pull_requests_and_their_limits() -> None:
    assert parse_pull_request(b'{"batch": 3, "expires": 1999900000, "no_wait": true}').no_wait
    assert parse_pull_request(b"3").batch == 3 and parse_pull_request(b"").batch == 1
    limited = ConsumerConfig(max_batch=2, max_expires=S, max_bytes=50)
    cases = [
        (b'{"batch": 5}', b"NATS/1.0 409 Exceeded MaxRequestBatch of 2\r\n\r\n"),
        (b'{"expires": 5000000000}', b"NATS/1.0 409 Exceeded MaxRequestExpires of 1s\r\n\r\n"),
        (b'{"max_bytes": 500}', b"NATS/1.0 409 Exceeded MaxRequestMaxBytes of 50\r\n\r\n"),
        (
            b'{"expires": 100000000, "idle_heartbeat": 200000000}',
            b"NATS/1.0 400 Bad Request - heartbeat value too large\r\n\r\n",
        ),
    ]
    for body, frame in cases:
        try:
            check_pull_request(limited, parse_pull_request(body))
        except PullRequestError as exc:
            assert exc.frame == frame
        else:
            raise AssertionError(body)
    assert (go_duration(1_500_000_000), go_duration(500_000_000), go_duration(90 * S)) == (
        "1.5s",
        "500ms",
        "1m30s",
    )


def test_waiting_requests_expire_with_408() -> None:
    queue = WaitingQueue(max_waiting=1)
    waiting = queue.add("_INBOX.1", parse_pull_request(b'{"batch": 1, "expires": 999900000}'), T0)
    try:
        queue.add("_INBOX.2", parse_pull_request(b"1"), T0)
    except PullRequestError as exc:
        assert exc.frame == b"NATS/1.0 409 Exceeded MaxWaiting\r\n\r\n"
    assert queue.prune(T0 + 999_899_999, lambda _reply: True) == []
    [(reply, frame)] = queue.prune(waiting.deadline_ns or 0, lambda _reply: True)
    expected = server_replies("11-pull-consumer.txt", "psub.fetch(1")[-1].header
    assert (reply, frame) == ("_INBOX.1", expected) and len(queue) == 0


def test_ack_subjects_and_bodies() -> None:
    reply = parse_ack_reply("$JS.ACK.WORK.worker.2.2.4.1795357227645884981.3")
    assert reply is not None and (reply.deliveries, reply.stream_seq, reply.consumer_seq, reply.pending) == (
        2,
        2,
        4,
        3,
    )
    assert reply.subject() == "$JS.ACK.WORK.worker.2.2.4.1795357227645884981.3"
    assert parse_ack_reply("$JS.ACK.WORK.worker.x.2.4.1.3") is None
    nak = parse_ack_body(b'-NAK {"delay": 5000000000}')
    assert nak is not None and (nak.kind, nak.delay_ns) == (AckKind.NAK, 5 * S)
    assert parse_ack_body(b"-NAK 1.5s").delay_ns == 1_500_000_000  # type: ignore[union-attr]
    assert [parse_ack_body(b).kind for b in (b"", b"+ACK", b"+WPI", b"+NXT 10", b"+TERM bad")] == [  # type: ignore[union-attr]
        AckKind.ACK,
        AckKind.ACK,
        AckKind.PROGRESS,
        AckKind.NEXT,
        AckKind.TERM,
    ]
    assert parse_ack_body(b"bogus") is None


def test_retention_decisions() -> None:
    store = MemoryStreamStore()
    for subject in ["o.a", "o.b", "o.a"]:
        store.store_msg(subject, None, b"x", T0)
    assert workqueue_removals([3, 1, 3]) == (1, 3)
    a = ConsumerState(AckPolicy.EXPLICIT)
    a_cfg = ConsumerConfig(durable_name="a", ack_policy=AckPolicy.EXPLICIT, filter_subject="o.a")
    a.apply_entry(start_position(a_cfg, store, replicated=False))
    b = ConsumerState(AckPolicy.EXPLICIT)
    b_cfg = ConsumerConfig(durable_name="b", ack_policy=AckPolicy.EXPLICIT)
    b.apply_entry(start_position(b_cfg, store, replicated=False))
    consumers = [Interest(a_cfg.filters, a.wants), Interest(b_cfg.filters, b.wants)]
    candidates = [(1, "o.a"), (2, "o.b"), (3, "o.a")]
    assert interest_removals(candidates, consumers) == ()
    for state, cfg, name in ((a, a_cfg, "a"), (b, b_cfg, "b")):
        plan = plan_deliveries("O", name, cfg, state, store, T0, 10)
        for entry in plan.entries:
            state.apply_entry(entry)
        for msg in plan.messages:
            if msg.stream_seq != 3:
                state.apply_entry(ack_entry(parse_ack_reply(msg.reply), parse_ack_body(b""), T0))  # type: ignore[arg-type]
    assert interest_removals(candidates, consumers) == (1, 2)
    assert interest_removals(candidates, []) == (1, 2, 3)


_ACTIONS = st.lists(
    st.tuples(st.sampled_from(["fetch", "ack", "nak", "term", "wpi", "tick"]), st.integers(0, 9)), max_size=40
)


@settings(max_examples=60, deadline=None)
@given(_ACTIONS)
def test_replicas_applying_the_same_log_agree(actions: list[tuple[str, int]]) -> None:
    store = MemoryStreamStore()
    for i in range(10):
        store.store_msg(f"work.{i % 3}", None, b"job", T0 + i)
    config = normalize_consumer_config(
        ConsumerConfig(durable_name="w", ack_policy=AckPolicy.EXPLICIT, ack_wait=S, max_deliver=3), WORK
    )
    leader = ConsumerState(config.ack_policy)
    log = [start_position(config, store, replicated=False).encode()]
    leader.apply([(1, log[0])])
    now, sent = T0, []
    for action, n in actions:
        now += S // 2
        if action == "fetch":
            plan = plan_deliveries("WORK", "w", config, leader, store, now, n + 1)
            entries = plan.entries
            sent.extend(m.reply for m in plan.messages)
        elif action == "tick" or not sent:
            continue
        else:
            body = {"ack": b"", "nak": b"-NAK", "term": b"+TERM", "wpi": b"+WPI"}[action]
            reply = parse_ack_reply(sent[n % len(sent)])
            entries = [ack_entry(reply, parse_ack_body(body), now)]  # type: ignore[arg-type]
        for entry in entries:
            log.append(entry.encode())
            leader.apply([(len(log), log[-1])])
        assert leader.ack_floor_stream_seq <= leader.delivered_stream_seq
        assert all(seq > leader.ack_floor_stream_seq for seq in leader.pending)
    follower = ConsumerState(config.ack_policy)
    follower.apply(list(enumerate(log, start=1)))
    assert follower.snapshot() == leader.snapshot()
    assert ConsumerState.restore(follower.snapshot()).snapshot() == leader.snapshot()


def test_no_wait_is_decided_on_arrival_as_the_server_does() -> None:
    plain = parse_pull_request(b'{"batch": 5}')
    no_wait = parse_pull_request(b'{"batch": 5, "no_wait": true}')
    lingering = parse_pull_request(b'{"batch": 5, "no_wait": true, "expires": 300000000}')
    assert no_wait_answer(plain, 0, 0) is None
    assert no_wait_answer(no_wait, 0, 0) == b"NATS/1.0 404 No Messages\r\n\r\n"
    # with an expiry it waits (for a message, or its 408) like any request: nats-server 2.15 does so
    assert no_wait_answer(lingering, 0, 0) is None
    # fewer messages than the requests already waiting want: this one would get none
    assert no_wait_answer(no_wait, 3, 10) == b"NATS/1.0 408 Requests Pending\r\n\r\n"
    assert no_wait_answer(no_wait, 3, 2) is None


def test_out_of_messages_ends_only_no_wait_requests_that_cannot_wait() -> None:
    queue = WaitingQueue(max_waiting=10)
    queue.add("plain", parse_pull_request(b'{"batch": 2, "expires": 1000000000}'), T0)
    queue.add("bare", parse_pull_request(b'{"batch": 2, "no_wait": true}'), T0)
    lingering = queue.add("lingering", parse_pull_request(b'{"batch": 2, "no_wait": true, "expires": 1000000000}'), T0)
    served = queue.add("served", parse_pull_request(b'{"batch": 2, "no_wait": true, "expires": 1000000000}'), T0)
    assert not queue.served(served, 1, 10, T0)
    assert queue.out_of_messages() == [("bare", no_messages()), ("served", no_messages())]
    assert queue.peek() is not None and len(queue) == 2 and lingering.delivered == 0
    assert queue.batch_pending() == 4


def test_requests_nobody_receives_leave_the_queue_unanswered() -> None:
    queue = WaitingQueue(max_waiting=10)
    queue.add("_INBOX.gone", parse_pull_request(b'{"batch": 1, "expires": 5000000000}'), T0)
    expired = queue.add("_INBOX.late", parse_pull_request(b'{"batch": 3, "expires": 1000000000}'), T0)
    queue.add("_INBOX.here", parse_pull_request(b"1"), T0)
    frames = queue.prune(expired.deadline_ns or 0, lambda reply: reply != "_INBOX.gone")
    assert frames == [
        (
            "_INBOX.late",
            b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n",
        )
    ]
    assert [w.reply for w in [queue.peek()] if w] == ["_INBOX.here"] and len(queue) == 1


def test_max_bytes_left_over_and_used_up() -> None:
    queue = WaitingQueue(max_waiting=10)
    roomy = queue.add("a", parse_pull_request(b'{"batch": 2, "max_bytes": 1000}'), T0)
    assert queue.served(roomy, 2, 92, T0) and roomy.completed_with_bytes_left
    # nats-server 2.15.1 after two messages of a batch of 2 with max_bytes 1000
    assert batch_completed(roomy.bytes_left) == (
        b"NATS/1.0 409 Batch Completed\r\nNats-Pending-Messages: 0\r\nNats-Pending-Bytes: 908\r\n\r\n"
    )
    exact = queue.add("b", parse_pull_request(b'{"batch": 5, "max_bytes": 100}'), T0)
    # used up exactly: done (a next plan would read the 0 left as no limit at all), nothing to tell
    assert queue.served(exact, 1, 100, T0) and not exact.completed_with_bytes_left
    plain = queue.add("c", parse_pull_request(b'{"batch": 1}'), T0)
    assert queue.served(plain, 1, 50, T0) and not plain.completed_with_bytes_left
    assert len(queue) == 0


def test_a_full_queue_refuses_quietly_when_the_client_has_heartbeats() -> None:
    queue = WaitingQueue(max_waiting=1)
    queue.add("a", parse_pull_request(b"1"), T0)
    frames = []
    for body in (b"1", b'{"batch": 1, "expires": 2000000000, "idle_heartbeat": 500000000}'):
        try:
            queue.add("b", parse_pull_request(body), T0)
        except PullRequestError as exc:
            frames.append(exc.frame)
    assert frames == [b"NATS/1.0 409 Exceeded MaxWaiting\r\n\r\n", b""]
