"""The entries a consumer's Raft group replicates: one op-code byte, then a fixed binary layout.

Op codes are append-only (a log must replay the same way forever). Every
entry carries the leader's clock where time matters, so applying is a pure
function of the entries: replicas never read their own clock.

- START: where the consumer begins, decided once by its first leader from the
  stream store (deliver policy), so every replica starts at the same place;
- DELIVERED: messages the leader handed out (stream seq, consumer seq,
  delivery count), first deliveries and redeliveries alike;
- ACK / NAK / PROGRESS / TERM: the client's acknowledgements (NAK with its delay);
- FORGET: stop tracking pending messages without an ack (max_deliver reached,
  or the message left the stream);
- ACKS: several ACK / NAK / PROGRESS / TERM entries in one, applied in order
  (the leader batches the acks that arrive together: one Raft entry per burst,
  not one per message);
- RESET: start over at a stream sequence (CONSUMER.RESET);
- PURGED: the stream was purged under the consumer, whose positions move past it.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import NamedTuple

import orjson


class ConsumerOp(enum.IntEnum):
    START = 1
    DELIVERED = 2
    ACK = 3
    NAK = 4
    PROGRESS = 5
    TERM = 6
    FORGET = 7
    ACKS = 8
    RESET = 9
    PURGED = 10
    RESTORED = 11


class ConsumerEntryDecodeError(ValueError):
    """Bytes that are not a consumer entry this version understands."""


@dataclass(frozen=True, slots=True)
class Start:
    """The first stream sequence to consider; for last_per_subject also the per-subject list and the
    stream's last sequence at creation (`resume`), after which delivery continues in stream order.
    `floor_on_record`: False where nats-server reports the ack floor as stream sequence 0 until the
    floor first moves (see ConsumerState.floor_on_record); START entries written before it say True."""

    start_seq: int
    last_per_subject: tuple[int, ...] = ()
    resume: int = 0
    floor_on_record: bool = True

    def encode(self) -> bytes:
        body: dict[str, object] = {
            "start": self.start_seq,
            "lps": list(self.last_per_subject),
            "resume": self.resume,
        }
        if not self.floor_on_record:
            body["unrecorded"] = True
        return bytes([ConsumerOp.START]) + orjson.dumps(body)


class Delivery(NamedTuple):
    """One message handed out (a named tuple: a DELIVERED entry carries hundreds of them)."""

    stream_seq: int
    consumer_seq: int
    deliveries: int


# op, timestamp, count; then per delivery: stream seq, consumer seq, delivery count
_DELIVERED_HEAD = struct.Struct(">Bqi")
_DELIVERY = struct.Struct(">QQI")


@dataclass(frozen=True, slots=True)
class Delivered:
    ts_ns: int
    deliveries: tuple[Delivery, ...]

    def encode(self) -> bytes:
        head = _DELIVERED_HEAD.pack(ConsumerOp.DELIVERED, self.ts_ns, len(self.deliveries))
        pack = _DELIVERY.pack
        return head + b"".join([pack(*d) for d in self.deliveries])


# op, stream seq, consumer seq, timestamp, delay (NAK only; 0 otherwise)
_ACK = struct.Struct(">BQQqq")


@dataclass(frozen=True, slots=True)
class Ack:
    """+ACK (or the ack part of +NXT); with ack policy all it acknowledges everything up to it."""

    stream_seq: int
    consumer_seq: int
    ts_ns: int

    def encode(self) -> bytes:
        return _ACK.pack(ConsumerOp.ACK, self.stream_seq, self.consumer_seq, self.ts_ns, 0)


@dataclass(frozen=True, slots=True)
class Nak:
    """-NAK: redeliver, not before `ts_ns + delay_ns`."""

    stream_seq: int
    consumer_seq: int
    ts_ns: int
    delay_ns: int = 0

    def encode(self) -> bytes:
        return _ACK.pack(ConsumerOp.NAK, self.stream_seq, self.consumer_seq, self.ts_ns, self.delay_ns)


@dataclass(frozen=True, slots=True)
class Progress:
    """+WPI: still working; the ack wait starts again at `ts_ns`."""

    stream_seq: int
    consumer_seq: int
    ts_ns: int

    def encode(self) -> bytes:
        return _ACK.pack(ConsumerOp.PROGRESS, self.stream_seq, self.consumer_seq, self.ts_ns, 0)


@dataclass(frozen=True, slots=True)
class Term:
    """+TERM: never redeliver; counts as handled for the ack floor."""

    stream_seq: int
    consumer_seq: int
    ts_ns: int

    def encode(self) -> bytes:
        return _ACK.pack(ConsumerOp.TERM, self.stream_seq, self.consumer_seq, self.ts_ns, 0)


class ForgetReason(enum.IntEnum):
    MAX_DELIVER = 1
    MSG_GONE = 2


_FORGET_HEAD = struct.Struct(">BqBi")
_SEQ = struct.Struct(">Q")


@dataclass(frozen=True, slots=True)
class Forget:
    ts_ns: int
    stream_seqs: tuple[int, ...]
    reason: ForgetReason = ForgetReason.MAX_DELIVER

    def encode(self) -> bytes:
        head = _FORGET_HEAD.pack(ConsumerOp.FORGET, self.ts_ns, self.reason, len(self.stream_seqs))
        return head + b"".join(_SEQ.pack(seq) for seq in self.stream_seqs)


AckLike = Ack | Nak | Progress | Term

_ACKS_HEAD = struct.Struct(">Bi")


@dataclass(frozen=True, slots=True)
class Acks:
    """Acks that arrived together, applied one after the other."""

    acks: tuple[AckLike, ...]

    def encode(self) -> bytes:
        return _ACKS_HEAD.pack(ConsumerOp.ACKS, len(self.acks)) + b"".join([a.encode() for a in self.acks])


@dataclass(frozen=True, slots=True)
class Reset:
    """CONSUMER.RESET: start over at stream sequence `seq` (nothing pending, nothing delivered before
    it, consumer sequences from 1 again), as nats-server's resetLocalStartingSeq does."""

    seq: int

    def encode(self) -> bytes:
        return bytes([ConsumerOp.RESET]) + orjson.dumps({"seq": self.seq})


@dataclass(frozen=True, slots=True)
class Purged:
    """The stream was purged under the consumer: its positions move up to stream sequence `start_seq`,
    as nats-server's consumer purge moves them; `gone`: messages pending at or after it that the purge
    removed too (for a consumer whose filter is wider than the purge's)."""

    start_seq: int
    gone: tuple[int, ...] = ()

    def encode(self) -> bytes:
        return bytes([ConsumerOp.PURGED]) + orjson.dumps({"start": self.start_seq, "gone": list(self.gone)})


@dataclass(frozen=True, slots=True)
class Restored:
    """A restored consumer's first entry, in place of START: the whole state its snapshot archived
    (ConsumerState.snapshot()), which every replica takes as its own (cluster/meta/restore.py)."""

    state: bytes

    def encode(self) -> bytes:
        return bytes([ConsumerOp.RESTORED]) + self.state


ConsumerEntry = Start | Delivered | Ack | Nak | Progress | Term | Forget | Acks | Reset | Purged | Restored

_ACK_KINDS: dict[ConsumerOp, type[Ack] | type[Progress] | type[Term]] = {
    ConsumerOp.ACK: Ack,
    ConsumerOp.PROGRESS: Progress,
    ConsumerOp.TERM: Term,
}


def decode_consumer_entry(data: bytes) -> ConsumerEntry:
    """Decode one replicated consumer entry; raises ConsumerEntryDecodeError."""
    if not data:
        raise ConsumerEntryDecodeError("empty entry")
    try:
        op = ConsumerOp(data[0])
    except ValueError:
        raise ConsumerEntryDecodeError(f"unknown consumer entry op {data[0]}") from None
    try:
        if op is ConsumerOp.START:
            body = orjson.loads(data[1:])
            return Start(
                int(body["start"]),
                tuple(int(s) for s in body.get("lps", ())),
                int(body.get("resume", 0)),
                not body.get("unrecorded", False),
            )
        if op is ConsumerOp.PURGED:
            body = orjson.loads(data[1:])
            return Purged(int(body["start"]), tuple(int(s) for s in body.get("gone", ())))
        if op is ConsumerOp.RESET:
            return Reset(int(orjson.loads(data[1:])["seq"]))
        if op is ConsumerOp.RESTORED:
            return Restored(bytes(data[1:]))
        if op is ConsumerOp.DELIVERED:
            _, ts, count = _DELIVERED_HEAD.unpack_from(data)
            if len(data) != _DELIVERED_HEAD.size + count * _DELIVERY.size:
                raise ConsumerEntryDecodeError("DELIVERED entry has the wrong length")
            make = Delivery._make
            body = memoryview(data)[_DELIVERED_HEAD.size :]
            return Delivered(ts, tuple([make(d) for d in _DELIVERY.iter_unpack(body)]))
        if op is ConsumerOp.FORGET:
            _, ts, reason, count = _FORGET_HEAD.unpack_from(data)
            if len(data) != _FORGET_HEAD.size + count * _SEQ.size:
                raise ConsumerEntryDecodeError("FORGET entry has the wrong length")
            seqs = tuple(_SEQ.unpack_from(data, _FORGET_HEAD.size + i * _SEQ.size)[0] for i in range(count))
            return Forget(ts, seqs, ForgetReason(reason))
        if op is ConsumerOp.ACKS:
            _, count = _ACKS_HEAD.unpack_from(data)
            if len(data) != _ACKS_HEAD.size + count * _ACK.size:
                raise ConsumerEntryDecodeError("ACKS entry has the wrong length")
            body = memoryview(data)[_ACKS_HEAD.size :]
            return Acks(tuple([_decode_ack(*fields) for fields in _ACK.iter_unpack(body)]))
        if len(data) != _ACK.size:
            raise ConsumerEntryDecodeError(f"{op.name} entry has the wrong length")
        return _decode_ack(*_ACK.unpack(data))
    except ConsumerEntryDecodeError:
        raise
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, struct.error) as exc:
        raise ConsumerEntryDecodeError(f"bad {op.name} entry: {exc}") from None


def _decode_ack(op_code: int, sseq: int, dseq: int, ts: int, delay: int) -> AckLike:
    op = ConsumerOp(op_code)
    if op is ConsumerOp.NAK:
        return Nak(sseq, dseq, ts, delay)
    kind = _ACK_KINDS.get(op)
    if kind is None:
        raise ConsumerEntryDecodeError(f"{op.name} is not an ack")
    return kind(sseq, dseq, ts)
