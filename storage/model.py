"""Values the store hands out: stored messages, write results, stream and subject state."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from storage.nats_time import format_optional_ts
from subjects.grammar import has_wildcard, subject_matches

# The deep dive's file-store record: length(4) + seq(8) + ts(8) + subject length(2)
# + subject + payload + hash(8); with headers also header length(4) + headers.
RECORD_OVERHEAD = 4 + 8 + 8 + 2 + 8
HEADERS_OVERHEAD = 4


def msg_size(subject_len: int, headers_len: int | None, payload_len: int) -> int:
    """Bytes a message counts towards `state.bytes` (and takes as a RocksDB record)."""
    size = RECORD_OVERHEAD + subject_len + payload_len
    if headers_len is not None:
        size += HEADERS_OVERHEAD + headers_len
    return size


def memory_msg_size(subject_len: int, headers_len: int | None, payload_len: int) -> int:
    """Bytes a message of a memory stream counts towards `state.bytes` and `max_bytes`.

    nats-server's memory store counts the subject, headers and payload plus 16 (a
    sequence and a timestamp), not the file record's framing: a client sees the
    difference in stream info and in where max_bytes and the node's memory limit cut.
    """
    return subject_len + (headers_len or 0) + payload_len + 16


class Rollup(StrEnum):
    """A `Nats-Rollup` write: after storing, keep only this message for its subject, or in the stream."""

    SUBJECT = "sub"
    ALL = "all"


def rolled_up_subjects(subject: str, stored: Iterable[str]) -> list[str]:
    """The stored subjects a subject roll-up written on `subject` clears. nats-server purges by the
    subject as a filter, so one with `*` or `>` tokens (a KV purge of `a.*`, written with key
    validation bypassed) clears every subject it matches; a literal one clears just itself."""
    if not has_wildcard(subject):
        return [subject]
    return [candidate for candidate in stored if subject_matches(subject, candidate)]


@dataclass(frozen=True, slots=True)
class StoredMsg:
    """One message as stored. `headers` is the raw NATS/1.0 block, or None when it had none."""

    subject: str
    headers: bytes | None
    payload: bytes
    seq: int
    ts_ns: int

    @property
    def size(self) -> int:
        return msg_size(
            len(self.subject.encode()),
            None if self.headers is None else len(self.headers),
            len(self.payload),
        )


# Not frozen: built once per stored message, and a frozen dataclass's __init__ costs several times a
# plain one's.
@dataclass(slots=True)
class StoreResult:
    """What a write did: the sequence and timestamp it got, and every sequence it removed.

    `removed` lists (ascending) the messages this write took out of the stream
    through limits, max_age or rollup, so consumers can drop them from their
    pending state. It may include `seq` itself (a message larger than
    max_bytes on a discard-old stream is stored and trimmed at once).
    """

    seq: int
    ts_ns: int
    removed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SimpleState:
    """Messages matching a filter: how many, and the first and last sequence (0 when none)."""

    msgs: int = 0
    first: int = 0
    last: int = 0


@dataclass(frozen=True, slots=True)
class MsgBatch:
    """A run of matching messages and how many more match after the last one."""

    messages: tuple[StoredMsg, ...]
    num_pending: int


@dataclass(frozen=True, slots=True)
class StreamState:
    """Stream state with nats-server's meaning: `first_seq` is last_seq + 1 when empty,
    `first_ts_ns` is 0 when empty, and `deleted` is filled only when asked for."""

    messages: int
    bytes: int
    first_seq: int
    first_ts_ns: int
    last_seq: int
    last_ts_ns: int
    num_subjects: int
    num_deleted: int
    deleted: tuple[int, ...] | None = None

    def to_api(self) -> dict[str, Any]:
        """The `state` object of STREAM.INFO, with nats-server's field names and omissions."""
        api: dict[str, Any] = {
            "messages": self.messages,
            "bytes": self.bytes,
            "first_seq": self.first_seq,
            "first_ts": format_optional_ts(self.first_ts_ns),
            "last_seq": self.last_seq,
            "last_ts": format_optional_ts(self.last_ts_ns),
        }
        if self.num_subjects:
            api["num_subjects"] = self.num_subjects
        if self.num_deleted:
            api["num_deleted"] = self.num_deleted
        if self.deleted:
            api["deleted"] = list(self.deleted)
        return api
