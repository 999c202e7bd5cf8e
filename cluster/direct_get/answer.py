"""Answering a Direct Get from a replica's (or mirror's) local store: the reply frames, as nats-server sends them.

A reply frame is (header block or None, payload): None means a plain MSG
(`no_hdr`). Message replies carry the stored headers first, then
`Nats-Stream`, `Nats-Subject`, `Nats-Sequence`, `Nats-Time-Stamp`, and in
batches `Nats-Num-Pending` / `Nats-Last-Sequence`; batches end with a
zero-length `204 EOB`. Errors are a lone status frame.

jetraft adds `Jetraft-Node`, `Jetraft-Role` and `Jetraft-Last-Sequence` (the
responder's last applied sequence) after nats-server's headers on every
frame that has a header block, so a client can see who answered and how
current it was.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field

import structlog

from cluster.direct_get.request import BadDirectGet, DirectGetRequest
from gateway.headers import extend_header_block
from storage.errors import CorruptStoreError, InvalidSubjectError, MsgNotFoundError, TooManyResultsError
from storage.interface import StreamStore
from storage.model import StoredMsg
from storage.nats_time import format_optional_ts
from subjects.grammar import is_valid_filter

log = structlog.get_logger(__name__)

# what nats-server uses when a request sets no max_bytes (its max_pending default)
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_MULTI_LAST_SUBJECTS = 1024
ALL = ">"

ReplyFrame = tuple[bytes | None, bytes]


class ResponderRole(enum.StrEnum):
    LEADER = "leader"
    FOLLOWER = "follower"
    MIRROR = "mirror"


@dataclass(frozen=True, slots=True)
class Responder:
    """Who answers: the node, its role for this stream, and the stream name replies carry.

    A mirror answering its origin's Direct Gets names itself (`stream` is the mirror's name).
    """

    node: str
    role: ResponderRole
    stream: str
    # Encoded once per responder rather than once per answer: the node and role lines every answer
    # ends with, and the stream line every message answer starts with.
    identity: bytes = field(init=False, repr=False, compare=False)
    stream_line: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        identity = b"Jetraft-Node: %s\r\nJetraft-Role: %s\r\n" % (self.node.encode(), self.role.value.encode())
        object.__setattr__(self, "identity", identity)
        object.__setattr__(self, "stream_line", b"Nats-Stream: %s\r\n" % self.stream.encode())

    def extra_headers(self, last_seq: int) -> bytes:
        return self.identity + b"Jetraft-Last-Sequence: %d\r\n" % last_seq


def status_frame(status: int, description: str, responder: Responder | None, last_seq: int = 0) -> ReplyFrame:
    """A header-only status reply (`NATS/1.0 404 Message Not Found`, ...)."""
    line = b"NATS/1.0 %d" % status
    if description:
        line += b" " + description.encode()
    extra = responder.extra_headers(last_seq) if responder is not None else b""
    return line + b"\r\n" + extra + b"\r\n", b""


def bad_request_frames(bad: BadDirectGet, responder: Responder, last_seq: int) -> list[ReplyFrame]:
    return [status_frame(bad.status, bad.description, responder, last_seq)]


def min_last_seq_frames(responder: Responder, last_seq: int) -> list[ReplyFrame]:
    """The answer when the responder stayed behind the request's `min_last_seq` for the whole wait."""
    return [status_frame(412, "Min Last Sequence", responder, last_seq)]


def is_behind(request: DirectGetRequest, last_seq: int) -> bool:
    """Whether the responder must wait before answering (read-your-writes)."""
    return request.min_last_seq > last_seq


def _message_frame(
    msg: StoredMsg,
    responder: Responder,
    last_seq: int,
    no_hdr: bool,
    batch_state: tuple[int, int] | None = None,
) -> ReplyFrame:
    if no_hdr:
        return None, msg.payload
    # one formatting of every added line: this runs for every message a Direct Get sends
    stamp = format_optional_ts(msg.ts_ns).encode()
    if batch_state is None:
        lines = b"%sNats-Subject: %s\r\nNats-Sequence: %d\r\nNats-Time-Stamp: %s\r\n%sJetraft-Last-Sequence: %d\r\n" % (
            responder.stream_line,
            msg.subject.encode(),
            msg.seq,
            stamp,
            responder.identity,
            last_seq,
        )
    else:
        lines = (
            b"%sNats-Subject: %s\r\nNats-Sequence: %d\r\nNats-Time-Stamp: %s\r\n"
            b"Nats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n%sJetraft-Last-Sequence: %d\r\n"
            % (
                responder.stream_line,
                msg.subject.encode(),
                msg.seq,
                stamp,
                batch_state[0],
                batch_state[1],
                responder.identity,
                last_seq,
            )
        )
    return extend_header_block(msg.headers, lines), msg.payload


def _sent_bytes(msg: StoredMsg) -> int:
    # nats-server's accounting for max_bytes: subject + stored headers + payload
    return len(msg.subject) + len(msg.headers or b"") + len(msg.payload)


def answer_direct_get(
    request: DirectGetRequest, store: StreamStore, responder: Responder, last_seq: int | None = None
) -> list[ReplyFrame]:
    """The frames to send for a valid request, read from `store` now.

    `last_seq` is the responder's last applied sequence for `Jetraft-Last-Sequence`
    (the state machine tracks it; reading the store's state costs more than the get).
    """
    return list(direct_get_frames(request, store, responder, last_seq))


def direct_get_frames(
    request: DirectGetRequest, store: StreamStore, responder: Responder, last_seq: int | None = None
) -> Iterator[ReplyFrame]:
    """`answer_direct_get`'s frames as they are read: a batch reads each message when it is taken,
    so a responder can send a long batch in slices while the store keeps changing (as
    nats-server reads each message of a batch under the stream's lock only for that message)."""
    if last_seq is None:
        last_seq = store.state().last_seq
    if request.multi_last:
        return iter(_answer_multi_last(request, store, responder, last_seq))
    if request.is_batch:
        return _batch_frames(request, store, responder, last_seq)
    return iter((single_frame(request, store, responder, last_seq),))


def single_frame(request: DirectGetRequest, store: StreamStore, responder: Responder, last_seq: int) -> ReplyFrame:
    """The one frame answering a request that is neither a batch nor `multi_last`."""
    try:
        msg = _load_single(request, store)
    except (MsgNotFoundError, InvalidSubjectError):  # a subject that is no valid filter matches nothing
        return status_frame(404, "Message Not Found", responder, last_seq)
    except CorruptStoreError as exc:
        # never the damaged bytes; nats-server folds every load error into a 404
        log.error("stored_message_damaged", error=str(exc))
        return status_frame(404, "Message Not Found", responder, last_seq)
    return _message_frame(msg, responder, last_seq, request.no_hdr)


def _start_seq(request: DirectGetRequest, store: StreamStore) -> int:
    if request.start_time_ns is not None:
        return store.get_seq_from_time(max(request.start_time_ns, 0))
    return request.seq


def _load_single(request: DirectGetRequest, store: StreamStore) -> StoredMsg:
    seq = _start_seq(request, store)
    if request.next_by_subj:
        return store.load_next_msg(request.next_by_subj, seq)
    if seq > 0:
        return store.load_msg(seq)
    return store.load_last_msg(request.last_by_subj)


def _batch_frames(
    request: DirectGetRequest, store: StreamStore, responder: Responder, last_seq: int
) -> Iterator[ReplyFrame]:
    seq = _start_seq(request, store)
    filter_ = request.next_by_subj or ALL
    if not is_valid_filter(filter_):  # matches nothing, as in nats-server
        yield status_frame(404, "Message Not Found", responder, last_seq)
        return
    valid_through = last_seq
    pending = store.num_pending(seq, filter_)
    max_bytes = request.max_bytes or DEFAULT_MAX_BYTES
    previous = 0
    sent_bytes = 0
    for sent in range(request.batch):
        try:
            msg = store.load_next_msg(filter_, seq)
        except (MsgNotFoundError, CorruptStoreError) as exc:
            if isinstance(exc, CorruptStoreError):
                log.error("stored_message_damaged", error=str(exc))
            if not sent:
                yield status_frame(404, "Message Not Found", responder, last_seq)
                return
            break
        seq = msg.seq + 1
        pending = max(pending - 1, 0)
        yield _message_frame(msg, responder, last_seq, request.no_hdr, (pending, previous))
        previous = msg.seq
        sent_bytes += _sent_bytes(msg)
        if sent_bytes >= max_bytes:
            break
    now_last = store.state().last_seq
    if now_last > valid_through:
        # writes landed while we read: count what is pending now, as nats-server does
        pending = store.num_pending(seq, filter_)
        last_seq = now_last
    eob = b"NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\n" % (pending, previous)
    yield (eob + responder.extra_headers(last_seq) + b"\r\n", b"")


def _answer_multi_last(
    request: DirectGetRequest, store: StreamStore, responder: Responder, last_seq: int
) -> list[ReplyFrame]:
    up_to = request.up_to_seq
    if request.up_to_time_ns is not None:
        state = store.state()
        from_time = store.get_seq_from_time(max(request.up_to_time_ns, 0))
        if state.messages == 0 or from_time <= state.first_seq:
            return [status_frame(404, "No Results", responder, last_seq)]
        up_to = from_time - 1
    if up_to == 0:
        up_to = last_seq
    # a subject that is no valid filter matches nothing, as in nats-server
    filters = [subject for subject in request.multi_last if is_valid_filter(subject)]
    try:
        seqs = store.multi_last_seqs(filters, up_to, max_allowed=MAX_MULTI_LAST_SUBJECTS) if filters else []
    except TooManyResultsError:
        return [status_frame(413, "Too Many Results", responder, last_seq)]
    if request.seq:
        seqs = [s for s in seqs if s >= request.seq]
    messages = []
    for seq in seqs:
        try:
            messages.append(store.load_msg(seq))
        except MsgNotFoundError:
            continue  # removed since the seqs were read
        except CorruptStoreError as exc:
            # as nats-server: a message resolved but failed to load answers 404, whatever the cause
            log.error("stored_message_damaged", error=str(exc))
            return [status_frame(404, "Message Not Found", responder, last_seq)]
    if not messages:
        return [status_frame(404, "No Results", responder, last_seq)]
    max_bytes = request.max_bytes or DEFAULT_MAX_BYTES
    frames: list[ReplyFrame] = []
    previous = 0
    sent_bytes = 0
    total = len(messages)
    for msg in messages:
        remaining = total - len(frames) - 1
        # nats-server sends headers on multi_last replies even when no_hdr is set
        frames.append(_message_frame(msg, responder, last_seq, False, (remaining, previous)))
        previous = msg.seq
        sent_bytes += _sent_bytes(msg)
        if sent_bytes >= max_bytes or (request.batch > 0 and len(frames) >= request.batch):
            break
    eob = (
        b"NATS/1.0 204 EOB\r\nNats-Num-Pending: %d\r\nNats-Last-Sequence: %d\r\nNats-UpTo-Sequence: %d\r\n"
        % (
            total - len(frames),
            previous,
            up_to,
        )
    )
    frames.append((eob + responder.extra_headers(last_seq) + b"\r\n", b""))
    return frames
