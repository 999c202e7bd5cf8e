"""Batches of committed messages, fetched from a stream's leader: how mirrors copy their origin.

The mirror's leader asks the origin's leader on `$JSR.S.<origin>.FETCH` for
messages from a sequence on; the answer is one binary frame (no JSON and
base64 on this path), holding the origin's first and last sequence and up
to `batch` messages. When nothing is there yet the origin's leader holds the
request up to `wait_ms` for the next message (a long poll), so a caught-up
mirror learns of a new message as soon as the origin has applied it.

Each answer also says how fresh the origin's data was when it was sent (the
origin leader's clock, less its own staleness if it copies from elsewhere):
the mirror measures its staleness against the origin from these, as a
follower does from its leader's position beacons (cluster/direct_get/staleness.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import orjson

from cluster.api.errors import JSErrors

_HEAD = struct.Struct(">QQQI")
_MSG = struct.Struct(">QQHII")

DEFAULT_BATCH = 512
DEFAULT_MAX_BYTES = 1 << 20
MAX_WAIT_MS = 5_000


@dataclass(frozen=True, slots=True)
class FetchRequest:
    seq: int
    batch: int = DEFAULT_BATCH
    max_bytes: int = DEFAULT_MAX_BYTES
    wait_ms: int = 0
    filter: str = ""
    # several filters (a copy's subject_transforms): messages matching any; `filter` when empty
    filters: tuple[str, ...] = ()
    # a copy's first request with opt_start_time: start at the first message stored at or after it
    start_time_ns: int | None = None

    @property
    def all_filters(self) -> tuple[str, ...]:
        return self.filters or (self.filter or ">",)

    def encode(self) -> bytes:
        body: dict[str, object] = {
            "seq": self.seq,
            "batch": self.batch,
            "max_bytes": self.max_bytes,
            "wait_ms": self.wait_ms,
            "filter": self.filter,
        }
        if self.filters:
            body["filters"] = list(self.filters)
        if self.start_time_ns is not None:
            body["start_time"] = self.start_time_ns
        return orjson.dumps(body)


def parse_fetch_request(payload: bytes) -> FetchRequest:
    try:
        body = orjson.loads(payload)
        request = FetchRequest(
            seq=max(int(body["seq"]), 1),
            batch=min(max(int(body.get("batch", DEFAULT_BATCH)), 1), 10_000),
            max_bytes=min(max(int(body.get("max_bytes", DEFAULT_MAX_BYTES)), 1), 16 << 20),
            wait_ms=min(max(int(body.get("wait_ms", 0)), 0), MAX_WAIT_MS),
            filter=str(body.get("filter", "")),
            filters=tuple(str(f) for f in body.get("filters", ())),
            start_time_ns=int(body["start_time"]) if body.get("start_time") is not None else None,
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise JSErrors.BAD_REQUEST() from None
    return request


@dataclass(frozen=True, slots=True)
class FetchedMsg:
    seq: int
    ts_ns: int
    subject: str
    header: bytes
    payload: bytes


@dataclass(frozen=True, slots=True)
class FetchedBatch:
    first_seq: int
    last_seq: int
    messages: tuple[FetchedMsg, ...]
    # the origin's data was current as of this time (Unix ns): everything up to last_seq
    fresh_as_of_ns: int = 0


def encode_batch(first_seq: int, last_seq: int, messages: list[FetchedMsg], fresh_as_of_ns: int) -> bytes:
    parts = [_HEAD.pack(first_seq, last_seq, fresh_as_of_ns, len(messages))]
    for msg in messages:
        subject = msg.subject.encode()
        parts.append(_MSG.pack(msg.seq, msg.ts_ns, len(subject), len(msg.header), len(msg.payload)))
        parts += (subject, msg.header, msg.payload)
    return b"".join(parts)


def decode_batch(data: bytes) -> FetchedBatch:
    """Raises ValueError for a frame that is not a fetch batch (an error reply, say)."""
    if len(data) < _HEAD.size:
        raise ValueError("short fetch batch")
    first, last, fresh_as_of_ns, count = _HEAD.unpack_from(data, 0)
    offset = _HEAD.size
    messages = []
    for _ in range(count):
        seq, ts, subject_len, header_len, payload_len = _MSG.unpack_from(data, offset)
        offset += _MSG.size
        end = offset + subject_len + header_len + payload_len
        if end > len(data):
            raise ValueError("truncated fetch batch")
        subject = data[offset : offset + subject_len].decode()
        offset += subject_len
        header = data[offset : offset + header_len]
        offset += header_len
        messages.append(FetchedMsg(seq, ts, subject, header, data[offset:end]))
        offset = end
    return FetchedBatch(first, last, tuple(messages), fresh_as_of_ns)
