"""The consumer leader's decisions: where to start, what to deliver next, what is due again.

Pure functions of (config, state, store, now): the leader calls them, proposes
the entries they return to the consumer's Raft group and applies them to its
working copy of the state at once (so the next decision does not hand out the
same message twice), then sends the messages. Followers only ever apply.

Order of a delivery batch, as nats-server: messages due for redelivery first
(a -NAK whose delay has passed, or an ack wait that ran out; the ack wait of
the n-th delivery is backoff[n-1], or ack_wait), by due time then sequence;
then new messages in stream order while max_ack_pending leaves room. A
pending message that has been delivered max_deliver times is dropped instead
(FORGET), as is one that left the stream.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from cluster.consumer.acks import ACK_PREFIX
from cluster.consumer.config import AckPolicy, ConsumerConfig, DeliverPolicy
from cluster.consumer.entries import ConsumerEntry, Delivered, Delivery, Forget, ForgetReason, Purged, Start
from cluster.consumer.state import ConsumerState
from cluster.stream.machine import PurgeDone
from gateway.headers import encode_headers
from storage.errors import MsgNotFoundError
from storage.interface import StreamStore
from storage.model import StoredMsg
from subjects.grammar import is_subset_filter

HDR_MSG_SIZE = "Nats-Msg-Size"
_ALL = ">"


def _filters(config: ConsumerConfig) -> tuple[str, ...]:
    return config.filters or (_ALL,)


def _load_next(store: StreamStore, filters: tuple[str, ...], seq: int) -> StoredMsg | None:
    """The first message at or after `seq` matching any filter (filters never overlap)."""
    best: StoredMsg | None = None
    for filter_ in filters:
        try:
            msg = store.load_next_msg(filter_, seq)
        except MsgNotFoundError:
            continue
        if best is None or msg.seq < best.seq:
            best = msg
    return best


def _load(store: StreamStore, seq: int) -> StoredMsg | None:
    try:
        return store.load_msg(seq)
    except MsgNotFoundError:
        return None


def start_position(config: ConsumerConfig, store: StreamStore, replicated: bool) -> Start:
    """The START entry for a new consumer, from its deliver policy and the stream as it is now.

    The ack floor starts just before the start. A replicated consumer (more than one peer) that
    acknowledges has no floor on record yet, as nats-server's store of one has none: info shows
    stream sequence 0 until an ack, a reset or a purge records one."""
    start = _start_seqs(config, store)
    if replicated and config.ack_policy is not AckPolicy.NONE:
        return dataclasses.replace(start, floor_on_record=False)
    return start


def _start_seqs(config: ConsumerConfig, store: StreamStore) -> Start:
    state = store.state()
    first, last = state.first_seq or 1, state.last_seq
    filters = _filters(config)
    policy = config.deliver_policy
    if policy is DeliverPolicy.ALL:
        return Start(first)
    if policy is DeliverPolicy.NEW:
        return Start(last + 1)
    if policy is DeliverPolicy.BY_START_SEQUENCE:
        return Start(config.opt_start_seq)
    if policy is DeliverPolicy.BY_START_TIME:
        assert config.opt_start_time_ns is not None
        return Start(store.get_seq_from_time(config.opt_start_time_ns))
    if policy is DeliverPolicy.LAST:
        lasts = []
        for filter_ in filters:
            try:
                lasts.append(store.load_last_msg(filter_).seq)
            except MsgNotFoundError:
                continue
        return Start(max(lasts) if lasts else last + 1)
    seqs = store.multi_last_seqs(list(filters), max_allowed=1 << 62)
    return Start(last + 1, tuple(seqs), last)


def purge_entry(
    config: ConsumerConfig, state: ConsumerState, store: StreamStore, purge: PurgeDone
) -> Purged | None:
    """The PURGED entry a purge of the stream calls for, as nats-server's stream purge decides which
    consumers it moves: all of them for a purge of everything; for a purge by subject, a consumer whose
    filters lie inside the purge's (it starts at the first message left on that subject, or after the
    stream's end), or else one whose filters take in the purge's subject (it starts at the stream's first
    sequence, and drops the pending messages the purge removed). Others: None."""
    if not purge.filter:
        return Purged(purge.first_seq or purge.last_seq + 1)
    filters = config.filters
    if any(is_subset_filter(own, purge.filter) for own in filters):
        return Purged(purge.filter_first_seq or purge.last_seq + 1)
    if filters and not any(is_subset_filter(purge.filter, own) for own in filters):
        return None
    start = purge.first_seq
    gone = tuple(seq for seq in state.pending if seq >= start and _load(store, seq) is None)
    return Purged(start, gone)


def num_pending(config: ConsumerConfig, state: ConsumerState, store: StreamStore) -> int:
    """Messages not yet delivered once (nats-server's num_pending; redeliveries do not count)."""
    if not state.started:
        return 0
    filters = _filters(config)
    start = state.next_stream_seq
    count = 0
    if state.last_per_subject:
        count += sum(1 for seq in state.last_per_subject if seq >= start and _load(store, seq) is not None)
        start = max(start, state.lps_resume + 1)
    return count + sum(store.num_pending(start, f) for f in filters)


def _due_time(config: ConsumerConfig, deliveries: int, ts_ns: int, nak_at_ns: int | None) -> int:
    return nak_at_ns if nak_at_ns is not None else ts_ns + config.ack_wait_for(deliveries)


def due_redeliveries(config: ConsumerConfig, state: ConsumerState, now_ns: int) -> list[int]:
    """Pending stream sequences due for redelivery at `now_ns`, in the order they go out."""
    if config.ack_policy is AckPolicy.NONE:
        return []
    due = []
    for seq, p in state.pending.items():
        at = _due_time(config, p.deliveries, p.ts_ns, p.nak_at_ns)
        if at <= now_ns:
            due.append((at, seq))
    due.sort()
    return [seq for _, seq in due]


def next_wakeup(config: ConsumerConfig, state: ConsumerState) -> int | None:
    """When the leader should look for redeliveries next (its timer), or None with nothing pending."""
    if config.ack_policy is AckPolicy.NONE or not state.pending:
        return None
    return min(_due_time(config, p.deliveries, p.ts_ns, p.nak_at_ns) for p in state.pending.values())


class StopReason(enum.Enum):
    BATCH_DONE = "batch done"
    NO_MESSAGES = "no messages"
    MAX_BYTES = "max bytes"
    MAX_ACK_PENDING = "max ack pending"


class OutgoingMsg(NamedTuple):
    """One message to send to the client: on its own subject, with the ack reply subject.

    A named tuple: the leader makes one per delivered message, and a tuple is the cheapest to build.
    """

    subject: str
    reply: str
    headers: bytes | None
    payload: bytes
    stream_seq: int
    consumer_seq: int
    deliveries: int

    @property
    def size(self) -> int:
        """What it counts towards a pull request's max_bytes (subject, reply, headers and payload)."""
        return len(self.subject) + len(self.reply) + len(self.headers or b"") + len(self.payload)


@dataclass(slots=True)
class DeliveryPlan:
    """What the leader proposes (in order) and then sends."""

    entries: list[ConsumerEntry] = field(default_factory=list)
    messages: list[OutgoingMsg] = field(default_factory=list)
    stop: StopReason = StopReason.NO_MESSAGES
    bytes_used: int = 0


def _headers_only(msg: StoredMsg) -> bytes:
    size = (HDR_MSG_SIZE, str(len(msg.payload)))
    if not msg.headers:
        return encode_headers([size])
    # keep the stored block and add the size before its closing empty line
    return msg.headers[:-2] + f"{size[0]}: {size[1]}\r\n\r\n".encode()


def _candidates(config: ConsumerConfig, state: ConsumerState, store: StreamStore) -> Iterator[StoredMsg]:
    """Messages not yet delivered once, in delivery order (the general case: several filters, or a
    last_per_subject consumer)."""
    filters = _filters(config)
    seq = state.next_stream_seq
    for lps_seq in state.last_per_subject:
        if lps_seq < seq:
            continue
        msg = _load(store, lps_seq)
        if msg is not None:
            yield msg
        seq = lps_seq + 1
    if state.last_per_subject or state.lps_resume:
        seq = max(seq, state.lps_resume + 1)
    while True:
        msg = _load_next(store, filters, seq)
        if msg is None:
            return
        yield msg
        seq = msg.seq + 1


def _single_filter(config: ConsumerConfig, state: ConsumerState) -> str | None:
    """The one filter to read a batch with in a single store call, when the simple case applies."""
    if state.last_per_subject or state.lps_resume or len(config.filters) > 1:
        return None
    return config.filters[0] if config.filters else _ALL


def plan_deliveries(
    stream: str,
    consumer: str,
    config: ConsumerConfig,
    state: ConsumerState,
    store: StreamStore,
    now_ns: int,
    max_msgs: int,
    max_bytes: int = 0,
) -> DeliveryPlan:
    """Up to `max_msgs` messages (and, when `max_bytes` > 0, no more bytes than that) for one pull
    request or one round of a push consumer. Does not change `state`.

    This runs for every delivered message, so the common case (one filter) reads its batch with one
    store call and builds each message's reply subject inline.
    """
    plan = DeliveryPlan()
    messages = plan.messages
    deliveries: list[Delivery] = []
    forget_max: list[int] = []
    forget_gone: list[int] = []
    consumer_seq = state.delivered_consumer_seq
    headers_only = config.headers_only
    reply_prefix = f"{ACK_PREFIX}{stream}.{consumer}."
    pending_total: int | None = None  # num_pending, computed only when needed

    def take(msg: StoredMsg, count: int, remaining: int) -> bool:
        nonlocal consumer_seq
        headers, payload = msg.headers, msg.payload
        if headers_only:
            headers, payload = _headers_only(msg), b""
        next_seq = consumer_seq + 1
        reply = f"{reply_prefix}{count}.{msg.seq}.{next_seq}.{msg.ts_ns}.{remaining}"
        out = OutgoingMsg(msg.subject, reply, headers, payload, msg.seq, next_seq, count)
        if max_bytes:
            size = out.size
            if plan.bytes_used + size > max_bytes:
                return False
            plan.bytes_used += size
        consumer_seq = next_seq
        messages.append(out)
        deliveries.append(Delivery(msg.seq, next_seq, count))
        return True

    stopped = False
    for seq in due_redeliveries(config, state, now_ns):
        pending = state.pending[seq]
        if config.max_deliver > 0 and pending.deliveries >= config.max_deliver:
            # dropped even when the batch is full, so a used-up message never blocks the queue
            forget_max.append(seq)
            continue
        if stopped or len(messages) >= max_msgs:
            continue
        msg = _load(store, seq)
        if msg is None:
            forget_gone.append(seq)
            continue
        if pending_total is None:
            pending_total = num_pending(config, state, store)
        if not take(msg, pending.deliveries + 1, pending_total):
            stopped = True

    ack_limited = False
    if not stopped and len(messages) < max_msgs:
        room = max_msgs - len(messages)
        if config.ack_policy is not AckPolicy.NONE and config.max_ack_pending > 0:
            ack_room = config.max_ack_pending - len(state.pending)
            if ack_room <= room:
                room, ack_limited = max(ack_room, 0), True
        taken = 0
        single = _single_filter(config, state) if room > 0 and state.started else None
        if single is not None:
            batch = store.load_batch(single, state.next_stream_seq, room)
            # what is still pending after each message: those after it in this batch, and after the batch
            remaining = batch.num_pending + len(batch.messages)
            for msg in batch.messages:
                remaining -= 1
                if not take(msg, 1, remaining):
                    stopped = True
                    break
                taken += 1
        elif room > 0:
            remaining = num_pending(config, state, store) if pending_total is None else pending_total
            for msg in _candidates(config, state, store):
                if taken >= room:
                    break
                remaining -= 1
                if not take(msg, 1, remaining):
                    stopped = True
                    break
                taken += 1
        if ack_limited and taken < room:
            ack_limited = False
    if stopped:
        plan.stop = StopReason.MAX_BYTES
    elif len(messages) >= max_msgs:
        plan.stop = StopReason.BATCH_DONE
    elif ack_limited:
        plan.stop = StopReason.MAX_ACK_PENDING
    else:
        plan.stop = StopReason.NO_MESSAGES

    if forget_max:
        plan.entries.append(Forget(now_ns, tuple(forget_max), ForgetReason.MAX_DELIVER))
    if forget_gone:
        plan.entries.append(Forget(now_ns, tuple(forget_gone), ForgetReason.MSG_GONE))
    if deliveries:
        plan.entries.append(Delivered(now_ns, tuple(deliveries)))
    return plan


__all__ = [
    "HDR_MSG_SIZE",
    "DeliveryPlan",
    "OutgoingMsg",
    "StopReason",
    "due_redeliveries",
    "next_wakeup",
    "num_pending",
    "plan_deliveries",
    "purge_entry",
    "start_position",
]
