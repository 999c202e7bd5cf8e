"""Deciding a publish to a stream, and the PubAck JSON nats-server answers with.

Two steps, the same rules in both:

- `prepare_publish` runs on the leader when a message arrives: it maps the
  subject with the stream's `subject_transform`, reads the `Nats-*` headers
  once, rejects what the config forbids (size, rollup, sealed, mirror, a
  `Nats-TTL` the stream does not allow or cannot parse), and, given a view
  of the applied state, fails fast on duplicates and expected-header
  mismatches. What passes becomes a `StoreMsg` entry to propose, with the
  subject it is stored under.
- `check_store` runs again when the entry is applied, on every replica,
  against the stream as it is at that point of the log. This is the
  authoritative decision: two publishes racing with the same msg id or the
  same expected sequence are settled by log order, identically everywhere.
  The TTL checks are the leader's alone, as in clustered nats-server: they
  depend on the header and on `allow_msg_ttl`, which can be turned on but
  never off, so what the leader let through still holds when it applies.

Nothing here does I/O; the caller passes the clock.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cluster.api import jsjson
from cluster.api.errors import ApiError, JSErrors
from cluster.runtime.account_limits import JetStreamAccountLimits
from cluster.runtime.account_usage import AccountUsage
from cluster.stream.config import StorageType, StreamConfig
from cluster.stream.entries import Rollup, StoreMsg
from cluster.stream.schedules import ScheduleError, check_schedule, check_schedule_stop
from gateway.headers import HeaderError, decode_headers
from storage.model import msg_size
from storage.msg_ttl import InvalidTTLError, header_ttl
from subjects.transform import SubjectTransform, TransformError, new_transform

HDR_MSG_ID = "Nats-Msg-Id"
HDR_EXPECTED_STREAM = "Nats-Expected-Stream"
HDR_EXPECTED_LAST_SEQ = "Nats-Expected-Last-Sequence"
HDR_EXPECTED_LAST_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
HDR_EXPECTED_LAST_SUBJECT_SEQ_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"
HDR_EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
HDR_ROLLUP = "Nats-Rollup"
# what a copy from a source is tagged with (cluster/mirror/origin_fetcher.py): never a client's to send
HDR_STREAM_SOURCE = "Nats-Stream-Source"

# in every header of message schedules (cluster/stream/schedules.py), Nats-Scheduler included
_SCHEDULE_MARK = b"Nats-Schedule"
MAX_HEADER_BYTES = 0xFFFF
# what Go's parse of a non-numeric expected sequence yields (uint64 of -1): it never matches
UNPARSABLE_SEQ = 2**64 - 1


class StreamView(Protocol):
    """The applied state the publish checks read."""

    @property
    def last_seq(self) -> int: ...

    @property
    def last_msg_id(self) -> str:
        """The `Nats-Msg-Id` of the last stored message ("" when it had none)."""
        ...

    def last_seq_for_subject(self, subject: str) -> int:
        """Sequence of the last message stored on `subject`, 0 when none is left (purges count)."""
        ...

    def duplicate_of(self, msg_id: str, now_ns: int) -> int | None:
        """Sequence already stored under `msg_id` within the duplicate window, else None."""
        ...

    def last_header_on(self, subject: str) -> bytes | None:
        """The header block of the last message on `subject` (b"" without headers); None when none."""
        ...


@dataclass(frozen=True, slots=True)
class Rejected:
    error: ApiError


@dataclass(frozen=True, slots=True)
class Duplicate:
    seq: int


@dataclass(frozen=True, slots=True)
class Accepted:
    entry: StoreMsg


PublishDecision = Rejected | Duplicate | Accepted


@functools.lru_cache(maxsize=256)
def _input_transform(src: str, dest: str) -> SubjectTransform | None:
    try:
        return new_transform(src, dest)
    except TransformError:  # refused by the config check: only a config from an older version holds one
        return None


def stored_subject(cfg: StreamConfig, subject: str) -> str:
    """The subject a message arriving on `subject` is stored under: the stream's `subject_transform`
    applied, as nats-server applies it to publishes, sourced and mirrored messages alike (a subject
    its source does not match is stored as it came). The leader maps once and replicates the result:
    `{{random(n)}}` could not give every replica the same answer."""
    transform = cfg.subject_transform
    if transform is None:
        return subject
    compiled = _input_transform(transform.src, transform.dest)
    mapped = None if compiled is None else compiled.apply(subject)
    return subject if mapped is None else mapped


def _parse_seq(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    text = raw.strip()
    return int(text) if text.isdigit() else UNPARSABLE_SEQ


def _rollup(raw: str | None) -> Rollup | ApiError:
    if not raw:
        return Rollup.NONE
    value = raw.lower()
    if value == "sub":
        return Rollup.SUBJECT
    if value == "all":
        return Rollup.ALL
    return JSErrors.STREAM_ROLLUP_FAILED(err=f'rollup value invalid: "{value}"')


def too_big(cfg: StreamConfig, header: bytes, payload: bytes) -> bool:
    """Headers and payload over the stream's max_msg_size (counted as nats-server counts them)."""
    limit = cfg.max_msg_size
    return limit >= 0 and (len(header) > limit or len(payload) > limit - len(header))


# a module name: `Rollup.NONE` goes through the enum class's attribute lookup (~0.2 us, every message)
_NO_ROLLUP = Rollup.NONE


def check_config_allows(cfg: StreamConfig, entry: StoreMsg) -> ApiError | None:
    """The checks that depend only on the stream config (which an update may change before apply)."""
    if cfg.sealed:
        return JSErrors.STREAM_SEALED()
    if cfg.mirror is not None:
        return JSErrors.STREAM_GENERAL(err="a mirror stream does not accept publishes")
    if too_big(cfg, entry.header, entry.payload):
        return JSErrors.STREAM_MESSAGE_EXCEEDS_MAXIMUM()
    if len(entry.header) > MAX_HEADER_BYTES:
        return JSErrors.STREAM_HEADER_EXCEEDS_MAXIMUM()
    if entry.expected_stream is not None and entry.expected_stream != cfg.name:
        return JSErrors.STREAM_NOT_MATCH()
    if entry.rollup is not _NO_ROLLUP and not (cfg.allow_rollup_hdrs and not cfg.deny_purge):
        return JSErrors.STREAM_ROLLUP_FAILED(err="rollup not permitted")
    return None


def check_msg_ttl(cfg: StreamConfig, header: bytes) -> ApiError | None:
    """A client's `Nats-TTL`: any value, valid or not, needs `allow_msg_ttl` (10166); then it must
    parse (10165). In that order, as clustered nats-server checks before proposing."""
    try:
        ttl = header_ttl(header)
    except InvalidTTLError:
        return JSErrors.MESSAGE_TTL_INVALID() if cfg.allow_msg_ttl else JSErrors.MESSAGE_TTL_DISABLED()
    if ttl != 0 and not cfg.allow_msg_ttl:
        return JSErrors.MESSAGE_TTL_DISABLED()
    return None


def check_store(cfg: StreamConfig, entry: StoreMsg, view: StreamView) -> Rejected | Duplicate | None:
    """Decide `entry` against the stream's config and state; None means: store it."""
    error = check_config_allows(cfg, entry)
    if error is not None:
        return Rejected(error)
    return check_state(entry, view)


def check_state(entry: StoreMsg, view: StreamView) -> Rejected | Duplicate | None:
    """The checks against the applied state: duplicates, then the expected-header checks."""
    if entry.msg_id:
        seq = view.duplicate_of(entry.msg_id, entry.timestamp_ns)
        if seq is not None:
            return Duplicate(seq)
    if entry.expected_last_seq is not None and entry.expected_last_seq != view.last_seq:
        return Rejected(JSErrors.STREAM_WRONG_LAST_SEQUENCE(seq=view.last_seq))
    if entry.expected_last_subject_seq is not None:
        subject = entry.expected_last_subject_seq_subject or entry.subject
        last = view.last_seq_for_subject(subject)
        if last != entry.expected_last_subject_seq:
            return Rejected(JSErrors.STREAM_WRONG_LAST_SEQUENCE(seq=last))
    if entry.expected_last_msg_id is not None and entry.expected_last_msg_id != view.last_msg_id:
        return Rejected(JSErrors.STREAM_WRONG_LAST_MSG_ID(id=view.last_msg_id))
    return None


def prepare_publish(
    cfg: StreamConfig,
    subject: str,
    header: bytes,
    payload: bytes,
    now_ns: int,
    view: StreamView | None = None,
) -> PublishDecision:
    """The leader's decision for an incoming publish: reject, answer as duplicate, or propose `entry`.

    `header` is the raw header block as received (b"" for a plain PUB). With
    `view` (the leader's applied state) duplicates and expected-header
    mismatches are answered at once; without it they are left to apply.
    """
    if not header:
        # a plain PUB, the common case: no id, no expectation, no TTL or schedule to read, so nothing
        # for the applied state to refuse (check_state passes an entry without them)
        plain = StoreMsg(
            subject=stored_subject(cfg, subject), header=b"", payload=bytes(payload), timestamp_ns=now_ns
        )
        error = check_config_allows(cfg, plain)
        return Rejected(error) if error is not None else Accepted(plain)
    try:
        headers = decode_headers(header)
    except HeaderError:
        return Rejected(JSErrors.BAD_REQUEST())
    if headers.get(HDR_STREAM_SOURCE) is not None:
        return Rejected(JSErrors.MESSAGE_SOURCE_HDR_NOT_ALLOWED())
    msg_id = headers.get(HDR_MSG_ID) or ""
    expected: dict[str, str | None] = {
        name: headers.get(name)
        for name in (
            HDR_EXPECTED_STREAM,
            HDR_EXPECTED_LAST_SEQ,
            HDR_EXPECTED_LAST_SUBJECT_SEQ,
            HDR_EXPECTED_LAST_SUBJECT_SEQ_SUBJECT,
            HDR_EXPECTED_LAST_MSG_ID,
        )
    }
    rollup = _rollup(headers.get(HDR_ROLLUP))
    if isinstance(rollup, ApiError):
        return Rejected(rollup)
    expected_subject = expected.get(HDR_EXPECTED_LAST_SUBJECT_SEQ_SUBJECT) or None
    expected_subject_seq = _parse_seq(expected.get(HDR_EXPECTED_LAST_SUBJECT_SEQ))
    if expected_subject is not None and expected_subject_seq is None:
        return Rejected(JSErrors.STREAM_EXPECTED_LAST_SEQ_PER_SUBJECT_INVALID())
    entry = StoreMsg(
        subject=stored_subject(cfg, subject),
        header=bytes(header),
        payload=bytes(payload),
        timestamp_ns=now_ns,
        msg_id=msg_id,
        expected_stream=expected.get(HDR_EXPECTED_STREAM) or None,
        expected_last_seq=_parse_seq(expected.get(HDR_EXPECTED_LAST_SEQ)),
        expected_last_subject_seq=expected_subject_seq,
        expected_last_subject_seq_subject=expected_subject,
        expected_last_msg_id=expected.get(HDR_EXPECTED_LAST_MSG_ID) or None,
        rollup=rollup,
    )
    error = check_config_allows(cfg, entry)
    if error is None:
        error = check_msg_ttl(cfg, entry.header)
    if error is not None:
        return Rejected(error)
    if _SCHEDULE_MARK in header:
        try:
            scheduled = check_schedule(cfg, entry.subject, entry.header, now_ns)
            check_schedule_stop(cfg, entry.subject, entry.header, None if view is None else view.last_header_on)
        except ScheduleError as exc:
            return Rejected(exc.error)
        if scheduled is not None:
            # a schedule replaces its subject's previous one: stored as a subject roll-up
            entry.header, entry.rollup = scheduled, Rollup.SUBJECT
    if view is None:
        return Accepted(entry)
    verdict = check_state(entry, view)
    return verdict if verdict is not None else Accepted(entry)


def pub_ack(stream: str, seq: int, domain: str = "") -> bytes:
    """`{"stream":"S","seq":N}` (with `"domain"` between them when set), as nats-server writes it."""
    return _ack_prefix(stream, domain) + b"%d}" % seq


def batch_ack(stream: str, seq: int, batch_id: str, count: int, domain: str = "") -> bytes:
    """A committed atomic batch: `seq` is its last message's; `count` how many it stored."""
    return _ack_prefix(stream, domain) + b'%d,"batch":%s,"count":%d}' % (seq, jsjson.dumps(batch_id), count)


def duplicate_ack(stream: str, seq: int, domain: str = "") -> bytes:
    """The duplicate PubAck, byte for byte: note nats-server's space in `"duplicate": true`."""
    return _ack_prefix(stream, domain) + b'%d,"duplicate": true}' % seq


def exceeds_account_bytes(
    cfg: StreamConfig,
    limits: JetStreamAccountLimits,
    usage: AccountUsage,
    stored_bytes: Callable[[], int],
    subject: str,
    header: bytes,
    payload: bytes,
) -> bool:
    """Whether storing this message (on every replica) would take the account past its max_memory or
    max_storage: what the other streams hold, as last heard, plus this stream's bytes and the message's
    (nats-server's wouldExceedLimits, which the publisher is told as 10002). `stored_bytes` is read only
    when the account limits this storage type: the common case reads no store state."""
    in_memory = cfg.storage is StorageType.MEMORY
    limit = limits.max_memory if in_memory else limits.max_storage
    if limit < 0:
        return False
    replicas = max(cfg.num_replicas, 1)
    size = msg_size(len(subject), len(header) if header else None, len(payload))
    held = usage.total(in_memory, except_stream=cfg.name) + stored_bytes() * replicas
    return held + size * replicas > limit


def error_ack(stream: str, error: ApiError) -> bytes:
    """A failed publish: the error object first, then `stream` and `"seq":0` (no domain, as nats-server)."""
    return jsjson.dumps({"error": error.to_json(), "stream": stream, "seq": 0})


def decision_ack(stream: str, decision: Rejected | Duplicate, domain: str = "") -> bytes:
    if isinstance(decision, Duplicate):
        return duplicate_ack(stream, decision.seq, domain)
    return error_ack(stream, decision.error)


# the same few streams and domains on every PubAck: the JSON escaping costs more than the rest of the ack
@functools.lru_cache(maxsize=1024)
def _ack_prefix(stream: str, domain: str) -> bytes:
    prefix = b'{"stream":' + jsjson.dumps(stream)
    if domain:
        prefix += b',"domain":' + jsjson.dumps(domain)
    return prefix + b',"seq":'
