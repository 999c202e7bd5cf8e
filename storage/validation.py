"""Checks on what callers hand the store, so bad input is refused before anything changes."""

from __future__ import annotations

from storage.errors import InvalidHeadersError, InvalidRequestError, InvalidSubjectError
from subjects.grammar import is_message_subject, is_valid_filter

ALL_SUBJECTS = ">"
# The record keeps the subject length in two bytes.
MAX_SUBJECT_BYTES = 0xFFFF
# Timestamps and sequences are stored as 8-byte integers.
MAX_SEQ = 2**63 - 1
MIN_TS = -MAX_SEQ - 1
MAX_TS = MAX_SEQ
_HEADER_START = b"NATS/1.0"
_HEADER_END = b"\r\n\r\n"


def check_subject(subject: str) -> bytes:
    """A subject a message may be stored on; returns its UTF-8 bytes.

    As in nats-server, a `*` or `>` token is stored as a literal token (nats-py's tests write KV keys
    like `a.*` with key validation bypassed); empty tokens and whitespace are refused."""
    if not isinstance(subject, str) or not is_message_subject(subject):
        raise InvalidSubjectError(f"invalid subject {subject!r}: dot-separated, non-empty tokens")
    encoded = subject.encode()
    if len(encoded) > MAX_SUBJECT_BYTES:
        raise InvalidSubjectError(f"subject is {len(encoded)} bytes, at most {MAX_SUBJECT_BYTES} allowed")
    return encoded


def check_filter(filter_: str) -> str:
    """A subject filter for reads; the empty filter means every subject, as in nats-server."""
    if filter_ == "":
        return ALL_SUBJECTS
    if not isinstance(filter_, str) or not is_valid_filter(filter_):
        raise InvalidSubjectError(f"invalid subject filter {filter_!r}")
    return filter_


def is_literal(filter_: str) -> bool:
    return "*" not in filter_ and ">" not in filter_


def check_headers(headers: bytes | bytearray | memoryview | None) -> bytes | None:
    """A raw header block as carried by HPUB; an empty block counts as no headers."""
    if headers is None:
        return None
    block = bytes(headers)
    if not block:
        return None
    if not block.startswith(_HEADER_START) or not block.endswith(_HEADER_END):
        raise InvalidHeadersError("header block must start with NATS/1.0 and end with an empty line")
    return block


def check_payload(payload: bytes | bytearray | memoryview) -> bytes:
    if not isinstance(payload, bytes | bytearray | memoryview):
        raise InvalidRequestError(f"payload must be bytes, got {type(payload).__name__}")
    return bytes(payload)


def check_seq(seq: int, name: str = "sequence") -> int:
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0 or seq > MAX_SEQ:
        raise InvalidRequestError(f"{name} must be an integer in 0..{MAX_SEQ}, got {seq!r}")
    return seq


def check_count(count: int, name: str) -> int:
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise InvalidRequestError(f"{name} must be a non-negative integer, got {count!r}")
    return count


def check_ts(ts_ns: int) -> int:
    if not isinstance(ts_ns, int) or isinstance(ts_ns, bool) or not MIN_TS <= ts_ns <= MAX_TS:
        raise InvalidRequestError(f"timestamp must be a 64-bit integer of nanoseconds, got {ts_ns!r}")
    return ts_ns
