"""The consumer state machine and the leader's decisions, step by step against MemoryStreamStore:
trace 11 replayed (reply subjects and consumer info numbers as nats-server reported them), the deep
dive's ORDERS/DISPATCH walkthrough with the server's numbers (NOTES.md), every ack kind, deliver
policies, redelivery with backoff, max_deliver, max_ack_pending, snapshots."""

from __future__ import annotations

import dataclasses

from cluster.consumer.acks import ack_entry, parse_ack_body, parse_ack_reply
from cluster.consumer.config import AckPolicy, ConsumerConfig, DeliverPolicy
from cluster.consumer.config_check import normalize_consumer_config
from cluster.consumer.delivery import (
    DeliveryPlan,
    StopReason,
    due_redeliveries,
    next_wakeup,
    num_pending,
    plan_deliveries,
    purge_entry,
    start_position,
)
from cluster.consumer.entries import (
    Ack,
    Acks,
    ConsumerEntry,
    ConsumerOp,
    Delivered,
    Delivery,
    Purged,
    Reset,
    Restored,
    Start,
    decode_consumer_entry,
)
from cluster.consumer.reset import reset_seq
from cluster.consumer.state import ConsumerState
from cluster.stream.config import StreamConfig
from cluster.stream.machine import PurgeDone
from storage.memory import MemoryStreamStore

S = 1_000_000_000
T0 = 1_795_357_227_000_000_000


class Consumer:
    """A leader and a follower of one consumer group: the leader proposes, both apply the log."""

    def __init__(
        self,
        stream: StreamConfig,
        config: ConsumerConfig,
        store: MemoryStreamStore,
        name: str,
        replicated: bool = False,
    ) -> None:
        self.stream, self.name, self.store = stream.name, name, store
        self.config = normalize_consumer_config(config, stream)
        self.leader = ConsumerState(self.config.ack_policy)
        self.follower = ConsumerState(self.config.ack_policy)
        self.log: list[bytes] = []
        self.propose(start_position(self.config, store, replicated))

    def propose(self, entry: ConsumerEntry) -> None:
        self.log.append(entry.encode())
        index = len(self.log)
        self.leader.apply([(index, self.log[-1])])
        self.follower.apply([(index, self.log[-1])])

    def fetch(self, batch: int, now: int, max_bytes: int = 0) -> DeliveryPlan:
        plan = plan_deliveries(
            self.stream, self.name, self.config, self.leader, self.store, now, batch, max_bytes
        )
        for entry in plan.entries:
            self.propose(entry)
        return plan

    def ack(self, reply: str, body: bytes, now: int) -> None:
        parsed_reply, parsed_body = parse_ack_reply(reply), parse_ack_body(body)
        assert parsed_reply is not None and parsed_body is not None
        self.propose(ack_entry(parsed_reply, parsed_body, now))

    def numbers(self) -> dict[str, object]:
        s = self.leader
        assert s.snapshot() == self.follower.snapshot()
        return {
            "delivered": (s.delivered_consumer_seq, s.delivered_stream_seq),
            "ack_floor": (s.ack_floor_consumer_seq, s.ack_floor_stream_seq),
            "num_ack_pending": s.num_ack_pending,
            "num_redelivered": s.num_redelivered,
            "num_pending": num_pending(self.config, s, self.store),
        }


def _without_ts(reply: str) -> str:
    tokens = reply.split(".")
    return ".".join([*tokens[:7], "TS", *tokens[8:]])


def work_stream() -> tuple[StreamConfig, MemoryStreamStore]:
    store = MemoryStreamStore()
    for i in range(1, 7):
        store.store_msg("work.job", None, f"job {i}".encode(), T0 + i)
    return StreamConfig(name="WORK", subjects=("work.>",)), store


def test_trace_11_pull_consumer_step_by_step() -> None:
    stream, store = work_stream()
    config = ConsumerConfig(
        durable_name="worker",
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=30 * S,
        max_deliver=5,
        filter_subject="work.>",
    )
    c = Consumer(stream, config, store, "worker")
    assert c.numbers() == {
        "delivered": (0, 0),
        "ack_floor": (0, 0),
        "num_ack_pending": 0,
        "num_redelivered": 0,
        "num_pending": 6,
    }
    now = T0 + S
    first = c.fetch(3, now)
    assert [_without_ts(m.reply) for m in first.messages] == [
        "$JS.ACK.WORK.worker.1.1.1.TS.5",
        "$JS.ACK.WORK.worker.1.2.2.TS.4",
        "$JS.ACK.WORK.worker.1.3.3.TS.3",
    ]
    assert [m.payload for m in first.messages] == [b"job 1", b"job 2", b"job 3"]
    assert first.stop is StopReason.BATCH_DONE
    c.ack(first.messages[0].reply, b"", now)
    c.ack(first.messages[1].reply, b"-NAK", now)
    c.ack(first.messages[2].reply, b"+TERM", now)
    second = c.fetch(2, now + 1)
    assert [_without_ts(m.reply) for m in second.messages] == [
        "$JS.ACK.WORK.worker.2.2.4.TS.3",
        "$JS.ACK.WORK.worker.1.4.5.TS.2",
    ]
    # a redelivery carries the stream timestamp of the message, like the first delivery
    assert second.messages[0].reply.split(".")[7] == first.messages[1].reply.split(".")[7]
    c.ack(second.messages[0].reply, b"+WPI", now + 2)
    c.ack(second.messages[0].reply, b"", now + 3)
    c.ack(second.messages[0].reply, b"+ACK", now + 4)  # a second ack: ignored
    c.ack(second.messages[1].reply, b'-NAK {"delay": 5000000000}', now + 5)
    assert c.numbers() == {
        "delivered": (5, 4),
        "ack_floor": (4, 3),
        "num_ack_pending": 1,
        "num_redelivered": 0,
        "num_pending": 2,
    }
    third = c.fetch(5, now + 6)
    assert [m.payload for m in third.messages] == [b"job 5", b"job 6"]
    assert [_without_ts(m.reply) for m in third.messages] == [
        "$JS.ACK.WORK.worker.1.5.6.TS.1",
        "$JS.ACK.WORK.worker.1.6.7.TS.0",
    ]
    assert third.stop is StopReason.NO_MESSAGES
    # job 4 comes back once its NAK delay has passed
    assert next_wakeup(c.config, c.leader) == now + 5 + 5 * S
    assert c.fetch(1, now + 5 + 5 * S - 1).messages == []
    again = c.fetch(1, now + 5 + 5 * S)
    assert [(m.payload, m.deliveries) for m in again.messages] == [(b"job 4", 2)]


def test_deep_dive_orders_dispatch_walkthrough() -> None:
    """The walkthrough with the server's numbers: delivered starts at 0/0 (NOTES.md)."""
    store = MemoryStreamStore()
    stream = StreamConfig(name="ORDERS", subjects=("ORDERS.*",))
    c = Consumer(
        stream, ConsumerConfig(durable_name="DISPATCH", ack_policy=AckPolicy.EXPLICIT), store, "DISPATCH"
    )
    state = c.numbers
    assert (
        state()["delivered"] == (0, 0) and state()["ack_floor"] == (0, 0) and state()["num_ack_pending"] == 0
    )
    store.store_msg("ORDERS.processed", None, b"order 4", T0)
    now = T0 + S
    msg = c.fetch(1, now).messages[0]
    assert msg.payload == b"order 4"
    c.ack(msg.reply, b"+ACK", now)
    assert state() == {
        "delivered": (1, 1),
        "ack_floor": (1, 1),
        "num_ack_pending": 0,
        "num_redelivered": 0,
        "num_pending": 0,
    }
    store.store_msg("ORDERS.processed", None, b"order 5", now)
    msg = c.fetch(1, now).messages[0]  # --no-ack
    assert state() == {
        "delivered": (2, 2),
        "ack_floor": (1, 1),
        "num_ack_pending": 1,
        "num_redelivered": 0,
        "num_pending": 0,
    }
    assert c.fetch(1, now + 29 * S).messages == []  # still inside ack_wait
    msg = c.fetch(1, now + 30 * S).messages[0]  # redelivered after ack_wait
    assert (msg.payload, msg.deliveries) == (b"order 5", 2)
    assert state() == {
        "delivered": (3, 2),
        "ack_floor": (1, 1),
        "num_ack_pending": 1,
        "num_redelivered": 1,
        "num_pending": 0,
    }
    msg = c.fetch(1, now + 60 * S).messages[0]
    c.ack(msg.reply, b"", now + 60 * S)
    assert state() == {
        "delivered": (4, 2),
        "ack_floor": (4, 2),
        "num_ack_pending": 0,
        "num_redelivered": 0,
        "num_pending": 0,
    }


def orders_store() -> MemoryStreamStore:
    store = MemoryStreamStore()
    for i in range(1, 101):
        store.store_msg("ORDERS.processed", None, f"order {i}".encode(), T0 + i * 60 * S)
    return store


def test_deliver_policies_pick_the_first_message() -> None:
    store = orders_store()
    stream = StreamConfig(name="ORDERS", subjects=("ORDERS.*",))
    cases = {
        "ALL": (ConsumerConfig(durable_name="ALL"), b"order 1"),
        "LAST": (ConsumerConfig(durable_name="LAST", deliver_policy=DeliverPolicy.LAST), b"order 100"),
        "TEN": (
            ConsumerConfig(
                durable_name="TEN", deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=10
            ),
            b"order 10",
        ),
        "2MIN": (
            ConsumerConfig(
                durable_name="2MIN",
                deliver_policy=DeliverPolicy.BY_START_TIME,
                opt_start_time_ns=T0 + 99 * 60 * S,
            ),
            b"order 99",
        ),
    }
    for name, (config, first) in cases.items():
        c = Consumer(stream, dataclasses.replace(config, filter_subject="ORDERS.processed"), store, name)
        assert c.fetch(1, T0).messages[0].payload == first, name
    new = Consumer(stream, ConsumerConfig(durable_name="NEW", deliver_policy=DeliverPolicy.NEW), store, "NEW")
    assert new.numbers()["delivered"] == (0, 100) and new.fetch(1, T0).messages == []
    store.store_msg("ORDERS.processed", None, b"order 101", T0)
    assert new.fetch(1, T0).messages[0].payload == b"order 101"


def test_last_per_subject_as_kv_keys_and_watch() -> None:
    """Trace 10: keys app.color (5), app.size (7), app.name (8); delivered starts at 4."""
    store = MemoryStreamStore()
    for subject in [
        "app.color",
        "app.color",
        "app.size",
        "app.color",
        "app.color",
        "app.size",
        "app.size",
        "app.name",
    ]:
        store.store_msg("$KV.cfg." + subject, None, b"v", T0)
    store.remove_msg(6)
    stream = StreamConfig(name="KV_cfg", subjects=("$KV.cfg.>",))
    config = ConsumerConfig(
        deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
        filter_subject="$KV.cfg.>",
        headers_only=True,
        deliver_subject="_INBOX.x",
    )
    c = Consumer(stream, config, store, "vBCupzJ6")
    assert c.numbers()["delivered"] == (0, 4) and c.numbers()["num_pending"] == 3
    plan = c.fetch(10, T0)
    assert [(m.stream_seq, m.consumer_seq) for m in plan.messages] == [(5, 1), (7, 2), (8, 3)]
    assert (
        plan.messages[0].headers == b"NATS/1.0\r\nNats-Msg-Size: 1\r\n\r\n"
        and plan.messages[0].payload == b""
    )
    assert c.numbers() == {
        "delivered": (3, 8),
        "ack_floor": (3, 8),
        "num_ack_pending": 0,
        "num_redelivered": 0,
        "num_pending": 0,
    }
    store.store_msg("$KV.cfg.app.color", None, b"purple", T0)
    assert [m.stream_seq for m in c.fetch(10, T0).messages] == [9]


def test_ack_all_acknowledges_everything_below() -> None:
    stream, store = work_stream()
    c = Consumer(stream, ConsumerConfig(durable_name="w", ack_policy=AckPolicy.ALL), store, "w")
    msgs = c.fetch(4, T0).messages
    c.ack(msgs[2].reply, b"+ACK", T0)
    assert c.numbers()["ack_floor"] == (3, 3) and c.numbers()["num_ack_pending"] == 1
    c.ack(msgs[1].reply, b"+ACK", T0)  # below the floor: nothing
    assert c.numbers()["num_ack_pending"] == 1
    c.ack(msgs[3].reply, b"", T0)
    assert c.numbers()["ack_floor"] == (4, 4) and c.numbers()["num_ack_pending"] == 0


def test_ack_none_moves_the_floor_with_deliveries() -> None:
    stream, store = work_stream()
    c = Consumer(stream, ConsumerConfig(durable_name="w"), store, "w")
    c.fetch(2, T0)
    assert c.numbers()["ack_floor"] == (2, 2) and c.numbers()["num_ack_pending"] == 0
    assert due_redeliveries(c.config, c.leader, T0 + 10**6 * S) == []


def test_backoff_and_max_deliver() -> None:
    stream, store = work_stream()
    config = ConsumerConfig(
        durable_name="w", ack_policy=AckPolicy.EXPLICIT, backoff=(1 * S, 5 * S), max_deliver=3
    )
    c = Consumer(stream, config, store, "w")
    assert c.fetch(1, T0).messages[0].deliveries == 1
    assert c.fetch(1, T0 + S - 1).messages[0].stream_seq == 2  # job 1 not due yet
    assert [m.stream_seq for m in c.fetch(1, T0 + S).messages] == [1]  # after backoff[0]
    assert next_wakeup(c.config, c.leader) == T0 + 2 * S - 1  # job 2 (delivered at T0 + S - 1) is due first
    plan = c.fetch(5, T0 + 6 * S)
    assert [(m.stream_seq, m.deliveries) for m in plan.messages][:2] == [(2, 2), (1, 3)]
    plan = c.fetch(1, T0 + 100 * S)  # job 1 used its 3 deliveries: forgotten, not redelivered
    assert 1 not in c.leader.pending and all(m.stream_seq != 1 for m in plan.messages)


def test_max_ack_pending_and_max_bytes() -> None:
    stream, store = work_stream()
    c = Consumer(
        stream, ConsumerConfig(durable_name="w", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=2), store, "w"
    )
    plan = c.fetch(5, T0)
    assert len(plan.messages) == 2 and plan.stop is StopReason.MAX_ACK_PENDING
    c.ack(plan.messages[0].reply, b"", T0)
    assert [m.stream_seq for m in c.fetch(5, T0).messages] == [3]
    d = Consumer(stream, ConsumerConfig(durable_name="b"), store, "b")
    size = len("work.job") + len("job 1") + len(d.fetch(1, T0).messages[0].reply)
    plan = d.fetch(5, T0, max_bytes=2 * size + 1)
    assert len(plan.messages) == 2 and plan.stop is StopReason.MAX_BYTES


def test_snapshot_restore_and_stale_entries() -> None:
    stream, store = work_stream()
    c = Consumer(stream, ConsumerConfig(durable_name="w", ack_policy=AckPolicy.EXPLICIT), store, "w")
    plan = c.fetch(3, T0)
    c.ack(plan.messages[1].reply, b"", T0)
    restored = ConsumerState.restore(c.leader.snapshot())
    assert restored.snapshot() == c.leader.snapshot()
    # an old leader's delivery proposal arriving late changes nothing
    before = c.leader.snapshot()
    c.leader.apply_entry(plan.entries[-1])
    assert c.leader.snapshot() == before
    # replays of applied indexes are skipped
    assert all(r.skipped for r in c.follower.apply(list(enumerate(c.log, start=1))))


def test_acks_batched_in_one_entry_apply_as_one_by_one() -> None:
    """The leader proposes a burst of acks as one ACKS entry: same state, same acked sequences."""
    stream, store = work_stream()
    config = ConsumerConfig(durable_name="w", ack_policy=AckPolicy.EXPLICIT)
    one_by_one = Consumer(stream, config, store, "w")
    batched = Consumer(stream, config, store, "w")
    replies = [m.reply for m in one_by_one.fetch(5, T0).messages]
    assert replies == [m.reply for m in batched.fetch(5, T0).messages]
    bodies = [b"", b"-NAK", b"+TERM", b"+WPI", b"+ACK"]
    acks = []
    for reply, body in zip(replies, bodies, strict=True):
        one_by_one.ack(reply, body, T0 + 1)
        parsed_reply, parsed_body = parse_ack_reply(reply), parse_ack_body(body)
        assert parsed_reply is not None and parsed_body is not None
        acks.append(ack_entry(parsed_reply, parsed_body, T0 + 1))
    entry = Acks(tuple(acks))
    assert decode_consumer_entry(entry.encode()) == entry
    batched.log.append(entry.encode())
    (result,) = batched.follower.apply([(len(batched.log), batched.log[-1])])
    batched.leader.apply([(len(batched.log), batched.log[-1])])
    assert result.acked == (1, 3, 5)
    assert batched.numbers() == one_by_one.numbers()
    # the same burst again acknowledges nothing more (the NAK and WPI still touch pending 2 and 4)
    (again,) = batched.follower.apply([(len(batched.log) + 1, batched.log[-1])])
    assert again.acked == () and not again.skipped


def test_a_reset_starts_over_at_its_sequence_and_round_trips() -> None:
    assert decode_consumer_entry(Reset(7).encode()) == Reset(7)
    state = ConsumerState(AckPolicy.EXPLICIT)
    state.apply_entry(Start(1))
    state.apply_entry(Delivered(5, (Delivery(1, 1, 1), Delivery(2, 2, 1), Delivery(3, 3, 1))))
    state.apply_entry(Ack(1, 1, 6))
    # the node learns where it starts over: interest retention checks what lies below
    assert state.apply_entry(Reset(7)).reset_to == 7
    assert (state.delivered_stream_seq, state.ack_floor_stream_seq, state.next_stream_seq) == (6, 6, 7)
    assert (state.delivered_consumer_seq, state.ack_floor_consumer_seq, state.pending) == (0, 0, {})
    assert state.wants(7) and not state.wants(6)
    # consumer sequences start from 1 again
    state.apply_entry(Delivered(9, (Delivery(7, 1, 1),)))
    assert (state.delivered_consumer_seq, list(state.pending)) == (1, [7])


def test_a_replicated_consumer_shows_no_ack_floor_until_one_is_recorded_as_nats_server() -> None:
    """nats-server 2.15.1 on a cluster, over a stream whose first messages are gone: an R3 consumer that
    acknowledges shows delivered just before its start but ack floor 0 until its floor moves, while
    its RESET goes back to just after the start; an R1 or an ack-none one shows the floor at once."""
    stream, store = work_stream()
    store.remove_msg(1)
    store.remove_msg(2)
    explicit = ConsumerConfig(durable_name="r3", ack_policy=AckPolicy.EXPLICIT)
    r3 = Consumer(stream, explicit, store, "r3", replicated=True)
    assert (r3.numbers()["delivered"], r3.numbers()["ack_floor"]) == ((0, 2), (0, 2))
    assert r3.leader.reported_ack_floor_stream_seq == 0
    assert reset_seq(0, r3.config, r3.leader.ack_floor_stream_seq, store.get_seq_from_time) == 3
    r1 = Consumer(stream, dataclasses.replace(explicit, durable_name="r1"), store, "r1", replicated=False)
    assert r1.leader.reported_ack_floor_stream_seq == 2
    none = ConsumerConfig(durable_name="none", ack_policy=AckPolicy.NONE)
    assert Consumer(stream, none, store, "none", replicated=True).leader.reported_ack_floor_stream_seq == 2
    # an ack out of order moves no floor and records none; the first ack that moves it records it, on
    # every replica and in snapshots
    first, second, _ = r3.fetch(3, T0).messages
    r3.ack(second.reply, b"+ACK", T0)
    assert r3.leader.reported_ack_floor_stream_seq == 0
    assert ConsumerState.restore(r3.follower.snapshot()).reported_ack_floor_stream_seq == 0
    r3.ack(first.reply, b"+ACK", T0)
    assert r3.numbers()["ack_floor"] == (2, 4) and r3.follower.reported_ack_floor_stream_seq == 4
    # a reset records one too
    fresh = Consumer(stream, dataclasses.replace(explicit, durable_name="r3b"), store, "r3b", replicated=True)
    fresh.propose(Reset(4))
    assert fresh.follower.reported_ack_floor_stream_seq == 3


def test_a_start_entry_says_whether_its_floor_is_on_record_and_old_ones_still_decode() -> None:
    unrecorded = Start(3, floor_on_record=False)
    assert decode_consumer_entry(unrecorded.encode()) == unrecorded
    # a START written before it said so: on record, as then
    old = bytes([ConsumerOp.START]) + b'{"start": 3, "lps": [], "resume": 0}'
    assert decode_consumer_entry(old) == Start(3) == decode_consumer_entry(Start(3).encode())
    assert decode_consumer_entry(old).floor_on_record


def test_a_purge_moves_the_consumers_it_covers_as_nats_server_moves_them() -> None:
    """Six jobs on work.a (odd) and work.b (even); each consumer has had two delivered, none acked."""
    store = MemoryStreamStore()
    for i in range(1, 7):
        store.store_msg("work.a" if i % 2 else "work.b", None, f"job {i}".encode(), T0 + i)
    stream = StreamConfig(name="WORK", subjects=("work.>",))

    def consumer(name: str, filter_subject: str = "", fetch: int = 2) -> Consumer:
        config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, durable_name=name, filter_subject=filter_subject)
        c = Consumer(stream, config, store, name)
        c.fetch(fetch, T0)
        return c

    every, only_a, only_b = consumer("all"), consumer("a", "work.a"), consumer("b", "work.b")
    # everything below 4 purged: every consumer starts at 4 at the earliest; pending below it are dropped
    store.purge_ex("", 4, 0)
    below_4 = PurgeDone("", first_seq=4, last_seq=6, filter_first_seq=4)
    assert [purge_entry(c.config, c.leader, store, below_4) for c in (every, only_a, only_b)] == [Purged(4)] * 3
    for c in (every, only_a, only_b):
        c.propose(Purged(4))
    assert every.numbers()["delivered"] == (2, 3) and every.numbers()["ack_floor"] == (2, 3)
    assert only_a.numbers()["delivered"] == (2, 3) and only_a.numbers()["ack_floor"] == (2, 3)
    # only_b had 2 and 4 out: 2 is dropped (its consumer sequence becomes the floor), 4 stays pending
    assert only_b.numbers()["delivered"] == (2, 4) and only_b.numbers()["ack_floor"] == (1, 3)
    assert list(only_b.leader.pending) == [4]
    # by subject (4 and 6 go): a consumer inside it starts after what is left on it (nothing: after the
    # stream's end); one whose filter takes it in starts at the stream's first and drops the pending
    # messages the purge took past that; one that does not see the subject is not moved
    wider = consumer("wide", "work.>", fetch=3)  # 4, 5, 6
    store.purge_ex("work.b", 0, 0)
    of_b = PurgeDone("work.b", first_seq=5, last_seq=6, filter_first_seq=0)
    assert purge_entry(only_b.config, only_b.leader, store, of_b) == Purged(7)
    assert purge_entry(every.config, every.leader, store, of_b) == Purged(5)
    assert purge_entry(only_a.config, only_a.leader, store, of_b) is None
    assert purge_entry(wider.config, wider.leader, store, of_b) == Purged(5, gone=(6,))
    wider.propose(Purged(5, gone=(6,)))
    # as nats-server: the floor's consumer sequence is the highest dropped (6's, 3), 5 stays pending
    assert wider.numbers()["ack_floor"] == (3, 4) and list(wider.leader.pending) == [5]
    only_b.propose(Purged(7))
    assert only_b.numbers()["delivered"] == (2, 6) and only_b.numbers()["ack_floor"] == (2, 6)
    assert decode_consumer_entry(Purged(5, (5, 6)).encode()) == Purged(5, (5, 6))


def test_a_restored_consumer_takes_the_archived_state_but_keeps_its_own_log_position() -> None:
    original = ConsumerState(AckPolicy.EXPLICIT)
    original.apply_entry(Start(3))
    original.apply_entry(Delivered(50, (Delivery(3, 1, 1), Delivery(4, 2, 1), Delivery(5, 3, 1))))
    original.apply_entry(Ack(3, 1, 60))
    original.applied_index = 41
    entry = Restored(original.snapshot())
    assert decode_consumer_entry(entry.encode()) == entry

    restored = ConsumerState(AckPolicy.EXPLICIT)
    restored.apply([(1, entry.encode())])
    assert restored.started and restored.applied_index == 1  # its own log's, not the archived 41
    restored.applied_index = original.applied_index
    assert restored.snapshot() == original.snapshot()
    assert sorted(restored.pending) == [4, 5] and restored.ack_floor_stream_seq == 3
    # only as the first entry: a started consumer, or bytes that are no state, are skipped alike
    assert restored.apply_entry(Restored(ConsumerState(AckPolicy.EXPLICIT).snapshot())).skipped
    fresh = ConsumerState(AckPolicy.EXPLICIT)
    assert fresh.apply_entry(Restored(b"not a state")).skipped and not fresh.started
