"""Stream RePublish: what to send for a stored message, and a leader's progress through the stream.

Sans-IO: the stream leader feeds it what it applied (and, after taking over,
what it reads back from the store), and publishes what comes back. What
nats-server 2.15 sends (checked against the real server, see
tests/cluster/test_republish.py):
- the subject: `src` (default `>`) mapped to `dest` (subjects/transform.py),
  nothing when the mapping does not take the subject or gives no valid
  literal subject (nats-server suppresses those too);
- the headers: the stored message's own headers, then Nats-Stream,
  Nats-Subject, Nats-Sequence, Nats-Time-Stamp, Nats-Last-Sequence (the
  subject's previous sequence when the message was stored, even if limits
  removed it since), and with `headers_only` Nats-Msg-Size and no payload.

**The guarantee across leader changes.** nats-server republishes on whichever
node leads when it applies a message, so a message committed while leadership
moves may never be republished. jetraft keeps a replicated position instead:
the leader republishes each message once it has applied it as stored, then
proposes a `Republished(seq)` entry (one in flight at a time, so one per commit
round under load), and every replica records the highest. A new leader first
republishes, in order, every message after that position up to what it had
applied when it took over, read back from its store, holding newer messages
until it has. So:
- every message stored while RePublish is set is republished by the cluster,
  at least once, in sequence order, provided it is still in the store when a
  new leader catches up (one that limits or a rollup removed before any leader
  republished it is lost, as it is from the stream);
- without a leader change, exactly once;
- across a leader change, the messages the old leader republished after its
  last committed `Republished` entry are republished again by the new one
  (receivers tell them apart by Nats-Stream and Nats-Sequence). The window is
  one commit round while publishes flow, nothing once they stop.
Followers never republish.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from cluster.stream.config import RePublish
from gateway.headers import extend_header_block
from storage.model import StoredMsg
from storage.nats_time import format_rfc3339_nano
from subjects.grammar import is_valid_subject
from subjects.transform import SubjectTransform, TransformError, new_transform

log = structlog.get_logger(__name__)


def republish_headers(
    stored_headers: bytes | None,
    stream: str,
    subject: str,
    seq: int,
    ts_ns: int,
    last_seq: int,
    msg_size: int | None = None,
) -> bytes:
    """The header block of a republished message; `msg_size` (headers_only) adds Nats-Msg-Size."""
    lines = (
        b"Nats-Stream: %s\r\nNats-Subject: %s\r\nNats-Sequence: %d\r\nNats-Time-Stamp: %s\r\n"
        b"Nats-Last-Sequence: %d\r\n"
        % (stream.encode(), subject.encode(), seq, format_rfc3339_nano(ts_ns).encode(), last_seq)
    )
    if msg_size is not None:
        lines += b"Nats-Msg-Size: %d\r\n" % msg_size
    return extend_header_block(stored_headers, lines)


@functools.lru_cache(maxsize=256)
def _compiled(src: str, dest: str) -> SubjectTransform | None:
    try:
        return new_transform(src, dest)
    except TransformError as exc:  # the config check refuses these: only an old config can hold one
        log.warning("republish_transform_invalid", src=src, dest=dest, error=str(exc))
        return None


def republish_transform(config: RePublish | None) -> SubjectTransform | None:
    """The compiled mapping of a RePublish config; None when it republishes nothing (no config, empty dest)."""
    if config is None:
        return None
    return _compiled(config.src or ">", config.dest)


def republish_subject(transform: SubjectTransform, subject: str) -> str | None:
    """Where a message stored on `subject` is republished, None if nowhere."""
    dest = transform.apply(subject)
    return dest if dest is not None and is_valid_subject(dest) else None


# Not frozen: built once per applied message on the leader.
@dataclass(slots=True)
class StoredForRepublish:
    """What the state machine hands the leader about a stored message the mapping takes."""

    dest: str
    subject: str
    header: bytes
    payload: bytes
    last_subject_seq: int


@dataclass(frozen=True, slots=True)
class Outgoing:
    subject: str
    headers: bytes
    payload: bytes


def outgoing(
    config: RePublish,
    stream: str,
    dest: str,
    subject: str,
    headers: bytes | None,
    payload: bytes,
    seq: int,
    ts_ns: int,
    last_seq: int,
) -> Outgoing:
    """The republished form of one stored message."""
    if config.headers_only:
        block = republish_headers(headers, stream, subject, seq, ts_ns, last_seq, len(payload))
        return Outgoing(dest, block, b"")
    return Outgoing(dest, republish_headers(headers, stream, subject, seq, ts_ns, last_seq), payload)


class Republisher:
    """One leader's republishing of one stream, in sequence order (see the module's guarantee).

    `position`: every stored message up to it has been republished by this
    leader or an earlier one. The messages after `recorded` (the replicated
    position) up to `catch_up_until` (the last sequence applied when this node
    took over) come from the store through `caught_up`; the messages applied
    meanwhile are held until those are out, so that the order holds.
    """

    def __init__(self, stream: str, config: RePublish, recorded: int, last_seq: int) -> None:
        self.stream = stream
        self.config = config
        self.recorded = recorded
        self.position = recorded
        self.catch_up_until = last_seq
        self.catching_up = last_seq > recorded
        self._held: list[tuple[int, Outgoing]] = []
        self._marker_in_flight: int | None = None

    def applied(self, seq: int, ts_ns: int, stored: StoredForRepublish) -> list[Outgoing]:
        """A message this leader applied as stored at `seq`: what to publish now (nothing while catching up)."""
        out = outgoing(
            self.config,
            self.stream,
            stored.dest,
            stored.subject,
            stored.header or None,
            stored.payload,
            seq,
            ts_ns,
            stored.last_subject_seq,
        )
        if self.catching_up:
            self._held.append((seq, out))
            return []
        self.position = max(self.position, seq)
        return [out]

    def caught_up(
        self, messages: Sequence[StoredMsg], last_subject_seq: Callable[[str, int], int]
    ) -> list[Outgoing]:
        """The next messages read from the store after `position` (an empty batch: nothing more is
        stored); `last_subject_seq(subject, seq)` is the subject's last sequence before `seq` in the store."""
        transform = republish_transform(self.config)
        out: list[Outgoing] = []
        for msg in messages:
            if msg.seq > self.catch_up_until:
                break
            self.position = msg.seq
            dest = None if transform is None else republish_subject(transform, msg.subject)
            if dest is None:
                continue
            previous = last_subject_seq(msg.subject, msg.seq)
            out.append(
                outgoing(
                    self.config,
                    self.stream,
                    dest,
                    msg.subject,
                    msg.headers,
                    msg.payload,
                    msg.seq,
                    msg.ts_ns,
                    previous,
                )
            )
        if not messages or messages[-1].seq >= self.catch_up_until:
            # everything up to the takeover is out: the held messages follow, and the leader is live
            self.catching_up = False
            self.position = max(self.position, self.catch_up_until)
            for seq, held in self._held:
                self.position = max(self.position, seq)
                out.append(held)
            self._held = []
        return out

    def marker_to_propose(self) -> int | None:
        """The position to record in a `Republished` entry, if it moved and none is in flight."""
        if self._marker_in_flight is not None or self.position <= self.recorded:
            return None
        self._marker_in_flight = self.position
        return self.position

    def marker_settled(self, recorded: bool) -> None:
        if recorded and self._marker_in_flight is not None:
            self.recorded = max(self.recorded, self._marker_in_flight)
        self._marker_in_flight = None
