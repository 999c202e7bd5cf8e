"""The entries a stream's Raft group replicates: one op-code byte, then the payload.

Op codes are append-only: a log written by an older version must replay the
same way forever, so a code is never reused or renumbered, only added.

`STORE_MSG` is the hot path and binary; it carries what every replica needs
to decide the publish deterministically: the leader-chosen timestamp, the
message, and the publish checks lifted out of its headers (msg id, expected
stream / last sequence / last subject sequence / last msg id, rollup), so
replicas never parse header blocks. The rarer ops are JSON.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

import orjson

from cluster.api.errors import ApiError
from cluster.stream.config import StreamConfig, stream_config_from_json


class EntryOp(enum.IntEnum):
    STORE_MSG = 1
    PURGE = 2
    DELETE_MSG = 3
    UPDATE_CONFIG = 4
    # a message copied from another stream at the origin's sequence (mirrors): gaps become deleted sequences
    STORE_AT_SEQ = 5
    SKIP_MSGS = 6
    # expiry (max_age, per-message TTL, delete markers) as of the leader's clock, so replicas agree
    EXPIRE = 7
    # RePublish progress: the leader republished every stored message up to this sequence
    REPUBLISHED = 8
    # an atomic batch (ADR-50): every message stored, or none
    STORE_BATCH = 9
    # many messages at their own sequences and times, in one entry: a restore's (cluster/meta/restore.py)
    STORE_AT_SEQS = 10


class Rollup(enum.IntEnum):
    NONE = 0
    SUBJECT = 1
    ALL = 2


class EntryDecodeError(ValueError):
    """Bytes that are not a stream entry this version understands."""


# flags for the optional fields of STORE_MSG, in payload order
_HAS_MSG_ID = 1 << 0
_HAS_EXPECTED_STREAM = 1 << 1
_HAS_EXPECTED_LAST_SEQ = 1 << 2
_HAS_EXPECTED_LAST_SUBJECT_SEQ = 1 << 3
_HAS_EXPECTED_SUBJECT = 1 << 4
_HAS_EXPECTED_LAST_MSG_ID = 1 << 5
_HAS_ROLLUP = 1 << 6

# op, flags, timestamp, subject length, header length, payload length
_STORE_HEAD = struct.Struct(">BBqHII")
_U16 = struct.Struct(">H")
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
# op, sequence, timestamp, subject length, header length, payload length
_AT_SEQ_HEAD = struct.Struct(">BQqHII")


# Not frozen, like every record built once per message: a frozen dataclass's __init__ costs several
# times a plain one's (one object.__setattr__ per field), and these are never changed after building.
@dataclass(slots=True)
class StoreMsg:
    """Store one published message, after the checks it carries pass on the replica applying it."""

    subject: str
    header: bytes
    payload: bytes
    timestamp_ns: int
    msg_id: str = ""
    expected_stream: str | None = None
    expected_last_seq: int | None = None
    expected_last_subject_seq: int | None = None
    expected_last_subject_seq_subject: str | None = None
    expected_last_msg_id: str | None = None
    rollup: Rollup = Rollup.NONE

    def encode(self) -> bytes:
        subject = self.subject.encode()
        flags = 0
        tail: list[bytes] = []
        if self.msg_id:
            flags |= _HAS_MSG_ID
            tail.append(_short(self.msg_id))
        if self.expected_stream is not None:
            flags |= _HAS_EXPECTED_STREAM
            tail.append(_short(self.expected_stream))
        if self.expected_last_seq is not None:
            flags |= _HAS_EXPECTED_LAST_SEQ
            tail.append(_U64.pack(self.expected_last_seq))
        if self.expected_last_subject_seq is not None:
            flags |= _HAS_EXPECTED_LAST_SUBJECT_SEQ
            tail.append(_U64.pack(self.expected_last_subject_seq))
        if self.expected_last_subject_seq_subject is not None:
            flags |= _HAS_EXPECTED_SUBJECT
            tail.append(_short(self.expected_last_subject_seq_subject))
        if self.expected_last_msg_id is not None:
            flags |= _HAS_EXPECTED_LAST_MSG_ID
            tail.append(_short(self.expected_last_msg_id))
        if self.rollup is not Rollup.NONE:
            flags |= _HAS_ROLLUP
            tail.append(bytes([self.rollup]))
        head = _STORE_HEAD.pack(
            EntryOp.STORE_MSG, flags, self.timestamp_ns, len(subject), len(self.header), len(self.payload)
        )
        return b"".join((head, subject, self.header, self.payload, *tail))


@dataclass(frozen=True, slots=True)
class StoreAtSeq:
    """Store a message copied from an origin stream at the origin's own sequence and time."""

    seq: int
    subject: str
    header: bytes
    payload: bytes
    timestamp_ns: int

    def encode(self) -> bytes:
        subject = self.subject.encode()
        head = _AT_SEQ_HEAD.pack(
            EntryOp.STORE_AT_SEQ,
            self.seq,
            self.timestamp_ns,
            len(subject),
            len(self.header),
            len(self.payload),
        )
        return b"".join((head, subject, self.header, self.payload))


@dataclass(frozen=True, slots=True)
class Purge:
    """STREAM.PURGE: everything, or by subject filter, below a sequence, or keeping the newest `keep`."""

    filter: str = ""
    seq: int = 0
    keep: int = 0

    def encode(self) -> bytes:
        return _json_entry(EntryOp.PURGE, {"filter": self.filter, "seq": self.seq, "keep": self.keep})


@dataclass(frozen=True, slots=True)
class DeleteMsg:
    """STREAM.MSG.DELETE; `erase` overwrites the message's bytes as well (nats-server's default)."""

    seq: int
    erase: bool = True

    def encode(self) -> bytes:
        return _json_entry(EntryOp.DELETE_MSG, {"seq": self.seq, "erase": self.erase})


@dataclass(frozen=True, slots=True)
class UpdateConfig:
    """A stream config change the meta group accepted, applied in log order with the messages."""

    config: StreamConfig

    def encode(self) -> bytes:
        return bytes([EntryOp.UPDATE_CONFIG]) + self.config.to_bytes()


@dataclass(frozen=True, slots=True)
class SkipMsgs:
    """Consume `count` sequences without storing anything (they read as deleted)."""

    count: int

    def encode(self) -> bytes:
        return _json_entry(EntryOp.SKIP_MSGS, {"count": self.count})


@dataclass(frozen=True, slots=True)
class Expire:
    """Expire what is due as of `now_ns` (the leader's clock when it proposed): messages past max_age
    or their own TTL, the lowest `limit` sequences of them (0: all), placing delete markers where the
    config asks for them. The limit travels in the entry so every replica removes the same ones."""

    now_ns: int
    limit: int = 0

    def encode(self) -> bytes:
        body = {"now": self.now_ns}
        if self.limit:
            body["max"] = self.limit
        return _json_entry(EntryOp.EXPIRE, body)


@dataclass(frozen=True, slots=True)
class Republished:
    """The proposing leader has republished every stored message up to `seq` (cluster/stream/republish.py)."""

    seq: int

    def encode(self) -> bytes:
        return _json_entry(EntryOp.REPUBLISHED, {"seq": self.seq})


@dataclass(frozen=True, slots=True)
class StoreBatch:
    """Store an atomic batch's messages in order, all or none (cluster/stream/atomic_batch.py).

    One entry, so the log can never hold half a batch: a leader change between
    two messages, which nats-server handles by discarding the partial batch on
    apply, cannot happen here."""

    batch_id: str
    messages: tuple[StoreMsg, ...]

    def encode(self) -> bytes:
        return bytes([EntryOp.STORE_BATCH]) + _short(self.batch_id) + _counted([m.encode() for m in self.messages])


@dataclass(frozen=True, slots=True)
class StoreAtSeqs:
    """Messages stored at their own sequences and times, in order, as one entry: a restore's messages
    go through the stream's group a few hundred kilobytes at a time rather than one entry each."""

    messages: tuple[StoreAtSeq, ...]

    def encode(self) -> bytes:
        return bytes([EntryOp.STORE_AT_SEQS]) + _counted([m.encode() for m in self.messages])


StreamEntry = (
    StoreMsg
    | StoreAtSeq
    | Purge
    | DeleteMsg
    | UpdateConfig
    | SkipMsgs
    | Expire
    | Republished
    | StoreBatch
    | StoreAtSeqs
)


def _counted(encoded: list[bytes]) -> bytes:
    """Entries inside an entry: how many, then each behind its length."""
    parts = [_U32.pack(len(encoded))]
    for one in encoded:
        parts.append(_U32.pack(len(one)))
        parts.append(one)
    return b"".join(parts)


def _inner(reader: _Reader, data: bytes, op: EntryOp, refusal: str) -> list[bytes]:
    """The entries `_counted` put in `data` from the reader's position on, each of op `op`, to its end."""
    inner = []
    for _ in range(reader.u32()):
        encoded = reader.take(reader.u32())
        if not encoded or encoded[0] != op:
            raise EntryDecodeError(refusal)
        inner.append(encoded)
    if reader.pos != len(data):
        raise EntryDecodeError("bytes after the entry's last message")
    return inner


def _short(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > 0xFFFF:
        raise ValueError("header value longer than 65535 bytes")
    return _U16.pack(len(raw)) + raw


def _json_entry(op: EntryOp, body: dict[str, Any]) -> bytes:
    return bytes([op]) + orjson.dumps(body)


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise EntryDecodeError("entry truncated")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def short_text(self) -> str:
        (n,) = _U16.unpack(self.take(2))
        return self.take(n).decode()

    def u64(self) -> int:
        return int(_U64.unpack(self.take(8))[0])

    def u32(self) -> int:
        return int(_U32.unpack(self.take(4))[0])


def _decode_store(data: bytes) -> StoreMsg:
    if len(data) < _STORE_HEAD.size:
        raise EntryDecodeError("entry truncated")
    _, flags, ts, subject_len, header_len, payload_len = _STORE_HEAD.unpack_from(data)
    header_at = _STORE_HEAD.size + subject_len
    payload_at = header_at + header_len
    end = payload_at + payload_len
    if end > len(data):
        raise EntryDecodeError("entry truncated")
    subject = data[_STORE_HEAD.size : header_at].decode()
    header = data[header_at:payload_at]
    payload = data[payload_at:end]
    if not flags:
        return StoreMsg(subject, header, payload, ts)
    reader = _Reader(data, end)
    msg_id = reader.short_text() if flags & _HAS_MSG_ID else ""
    expected_stream = reader.short_text() if flags & _HAS_EXPECTED_STREAM else None
    expected_last_seq = reader.u64() if flags & _HAS_EXPECTED_LAST_SEQ else None
    expected_subject_seq = reader.u64() if flags & _HAS_EXPECTED_LAST_SUBJECT_SEQ else None
    expected_subject = reader.short_text() if flags & _HAS_EXPECTED_SUBJECT else None
    expected_msg_id = reader.short_text() if flags & _HAS_EXPECTED_LAST_MSG_ID else None
    rollup = Rollup(reader.take(1)[0]) if flags & _HAS_ROLLUP else Rollup.NONE
    return StoreMsg(
        subject=subject,
        header=header,
        payload=payload,
        timestamp_ns=ts,
        msg_id=msg_id,
        expected_stream=expected_stream,
        expected_last_seq=expected_last_seq,
        expected_last_subject_seq=expected_subject_seq,
        expected_last_subject_seq_subject=expected_subject,
        expected_last_msg_id=expected_msg_id,
        rollup=rollup,
    )


def _decode_at_seq(data: bytes) -> StoreAtSeq:
    if len(data) < _AT_SEQ_HEAD.size:
        raise EntryDecodeError("entry truncated")
    _, seq, ts, subject_len, header_len, payload_len = _AT_SEQ_HEAD.unpack_from(data)
    reader = _Reader(data, _AT_SEQ_HEAD.size)
    subject = reader.take(subject_len).decode()
    return StoreAtSeq(seq, subject, reader.take(header_len), reader.take(payload_len), ts)


def _decode_batch(data: bytes) -> StoreBatch:
    reader = _Reader(data, 1)
    batch_id = reader.short_text()
    inner = _inner(reader, data, EntryOp.STORE_MSG, "a batch holds only stored messages")
    return StoreBatch(batch_id, tuple([_decode_store(encoded) for encoded in inner]))


def _decode_at_seqs(data: bytes) -> StoreAtSeqs:
    inner = _inner(_Reader(data, 1), data, EntryOp.STORE_AT_SEQ, "a STORE_AT_SEQS entry holds only messages at sequences")
    return StoreAtSeqs(tuple([_decode_at_seq(encoded) for encoded in inner]))


# by byte: calling EntryOp(byte) runs the enum machinery in Python, ~1 us for every applied entry
_OPS = {op.value: op for op in EntryOp}


def decode_entry(data: bytes) -> StreamEntry:
    """Decode one replicated entry; raises EntryDecodeError for bytes we cannot read."""
    if not data:
        raise EntryDecodeError("empty entry")
    op = _OPS.get(data[0])
    if op is None:
        raise EntryDecodeError(f"unknown stream entry op {data[0]}")
    try:
        if op is EntryOp.STORE_MSG:
            return _decode_store(data)
        if op is EntryOp.STORE_AT_SEQ:
            return _decode_at_seq(data)
        if op is EntryOp.STORE_BATCH:
            return _decode_batch(data)
        if op is EntryOp.STORE_AT_SEQS:
            return _decode_at_seqs(data)
        body = orjson.loads(data[1:])
        if op is EntryOp.PURGE:
            return Purge(
                filter=str(body.get("filter", "")), seq=int(body.get("seq", 0)), keep=int(body.get("keep", 0))
            )
        if op is EntryOp.DELETE_MSG:
            return DeleteMsg(seq=int(body["seq"]), erase=bool(body.get("erase", True)))
        if op is EntryOp.UPDATE_CONFIG:
            return UpdateConfig(stream_config_from_json(body))
        if op is EntryOp.EXPIRE:
            return Expire(now_ns=int(body["now"]), limit=int(body.get("max", 0)))
        if op is EntryOp.REPUBLISHED:
            return Republished(seq=int(body["seq"]))
        return SkipMsgs(count=int(body["count"]))
    except EntryDecodeError:
        raise
    except (ApiError, orjson.JSONDecodeError, KeyError, TypeError, ValueError, struct.error) as exc:
        raise EntryDecodeError(f"bad {op.name} entry: {exc}") from None
