"""Stream RePublish: the subject transform, the header block, and each subject's previous sequence.

Sans-IO: the stream leader feeds it what it proposes and what was stored, and
publishes what comes back. What nats-server 2.15 sends (checked against the
real server, see tests/cluster/test_republish.py):
- the subject: `src` (default `>`) mapped to `dest` (subjects/transform.py);
- the headers: the stored message's own headers, then Nats-Stream,
  Nats-Subject, Nats-Sequence, Nats-Time-Stamp, Nats-Last-Sequence (the
  subject's previous sequence when the message was stored, even if limits
  removed it since), and with `headers_only` Nats-Msg-Size and no payload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import structlog

from cluster.stream.config import RePublish
from gateway.headers import extend_header_block
from storage.nats_time import format_rfc3339_nano
from subjects.transform import SubjectTransform, TransformError

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


@dataclass(frozen=True, slots=True)
class Outgoing:
    subject: str
    headers: bytes
    payload: bytes


class Republisher:
    """One stream's republishing, fed by the leader in log order.

    Nats-Last-Sequence is the subject's last sequence *before* the message was
    stored; by the time the leader hears of the store, limits may have removed
    that message (max_msgs_per_subject=1 does, at once). So the previous
    sequence is read when the first publish on a subject is proposed and then
    carried from one stored result to the next while publishes on that subject
    are in flight; the map holds only subjects with publishes in flight.
    """

    def __init__(self, stream: str, config: RePublish) -> None:
        self.config = config
        self.stream = stream
        self.transform: SubjectTransform | None = None
        try:
            self.transform = SubjectTransform.compile(config.src, config.dest)
        except TransformError as exc:
            log.warning("republish_unsupported", stream=stream, error=str(exc))
        # subject -> [publishes in flight, last sequence stored on it]
        self._in_flight: dict[str, list[int]] = {}

    def proposing(self, subject: str, last_seq_for_subject: Callable[[str], int]) -> None:
        """A publish on `subject` was proposed; call `settled` once for it, in proposal order."""
        if self.transform is None or self.transform.apply(subject) is None:
            return
        slot = self._in_flight.get(subject)
        if slot is None:
            self._in_flight[subject] = [1, last_seq_for_subject(subject)]
        else:
            slot[0] += 1

    def settled(
        self,
        subject: str,
        headers: bytes | None,
        payload: bytes,
        stored: tuple[int, int] | None,
    ) -> Outgoing | None:
        """The proposal ended: `stored` is (seq, ts_ns) if it was stored; what to publish, if anything."""
        slot = self._in_flight.get(subject)
        if slot is None:
            return None  # src does not match it
        previous = slot[1]
        slot[0] -= 1
        if slot[0] <= 0:
            del self._in_flight[subject]
        if stored is None:
            return None
        seq, ts_ns = stored
        slot[1] = seq
        return self.outgoing(subject, headers, payload, seq, ts_ns, previous)

    def outgoing(
        self, subject: str, headers: bytes | None, payload: bytes, seq: int, ts_ns: int, last_seq: int
    ) -> Outgoing | None:
        """The republished form of one stored message, None when `src` does not match it."""
        dest = None if self.transform is None else self.transform.apply(subject)
        if dest is None:
            return None
        if self.config.headers_only:
            block = republish_headers(headers, self.stream, subject, seq, ts_ns, last_seq, len(payload))
            return Outgoing(dest, block, b"")
        return Outgoing(dest, republish_headers(headers, self.stream, subject, seq, ts_ns, last_seq), payload)


def republisher_for(stream: str, config: RePublish | None, current: Republisher | None) -> Republisher | None:
    """The leader's Republisher for the stream's RePublish config now: `current` while the config keeps it."""
    if config is None:
        return None
    if current is not None and current.config == config:
        return current
    return Republisher(stream, config)
