"""The ack protocol on the wire: reply subjects of delivered messages and the ack bodies clients send.

A delivered message's reply subject names everything the server needs to
process its ack without a lookup:
`$JS.ACK.<stream>.<consumer>.<delivery count>.<stream seq>.<consumer seq>.<timestamp ns>.<pending>`
(trace 11). The 12-token form newer servers may send (with domain and
account hash in front and a random token at the end) is parsed too.

Bodies (deep dive, "Acknowledgement Models"; trace 11: nats-py's `ack()`
sends an empty body): empty, `+ACK` or `+OK` ack; `-NAK` optionally followed
by `{"delay": ns}` or a Go duration; `+WPI`; `+NXT` optionally followed by a
batch size or a pull request's JSON; `+TERM` optionally followed by a reason.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import NamedTuple

import orjson

from cluster.consumer.entries import Ack, AckLike, Nak, Progress, Term

ACK_PREFIX = "$JS.ACK."


class AckReply(NamedTuple):
    """The fields of an ack reply subject (a named tuple: one is parsed per ack)."""

    stream: str
    consumer: str
    deliveries: int
    stream_seq: int
    consumer_seq: int
    ts_ns: int
    pending: int

    def subject(self) -> str:
        return (
            f"{ACK_PREFIX}{self.stream}.{self.consumer}.{self.deliveries}.{self.stream_seq}."
            f"{self.consumer_seq}.{self.ts_ns}.{self.pending}"
        )


def ack_reply_subject(
    stream: str, consumer: str, deliveries: int, stream_seq: int, consumer_seq: int, ts_ns: int, pending: int
) -> str:
    return AckReply(stream, consumer, deliveries, stream_seq, consumer_seq, ts_ns, pending).subject()


def parse_ack_reply(subject: str) -> AckReply | None:
    """Parse a `$JS.ACK...` subject (9- or 12-token form); None when it is not one."""
    if not subject.startswith(ACK_PREFIX):
        return None
    tokens = subject.split(".")
    if len(tokens) == 9:
        stream, consumer, numbers = tokens[2], tokens[3], tokens[4:9]
    elif len(tokens) == 12:
        stream, consumer, numbers = tokens[4], tokens[5], tokens[6:11]
    else:
        return None
    if not all(n.isdigit() for n in numbers):
        return None
    deliveries, sseq, dseq, ts, pending = map(int, numbers)
    return AckReply(stream, consumer, deliveries, sseq, dseq, ts, pending)


class AckKind(enum.Enum):
    ACK = "+ACK"
    NAK = "-NAK"
    PROGRESS = "+WPI"
    NEXT = "+NXT"
    TERM = "+TERM"


@dataclass(frozen=True, slots=True)
class AckBody:
    kind: AckKind
    delay_ns: int = 0
    # +NXT: the pull request that follows the ack (raw JSON or a batch size), b"" for one message
    next_request: bytes = b""
    term_reason: str = ""


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000}
_UNIT_NS["h"] = 60 * _UNIT_NS["m"]


def _parse_go_duration(text: str) -> int | None:
    pos, total = 0, 0.0
    if not text:
        return None
    for match in _GO_DURATION.finditer(text):
        if match.start() != pos:
            return None
        total += float(match.group(1)) * _UNIT_NS[match.group(2)]
        pos = match.end()
    return int(total) if pos == len(text) else None


def _nak_delay(rest: bytes) -> int:
    text = rest.strip()
    if not text:
        return 0
    if text.startswith(b"{"):
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            return 0
        delay = body.get("delay") if isinstance(body, dict) else None
        return delay if isinstance(delay, int) and not isinstance(delay, bool) and delay > 0 else 0
    parsed = _parse_go_duration(text.decode(errors="replace"))
    return parsed if parsed and parsed > 0 else 0


_PLAIN_ACK = AckBody(AckKind.ACK)


def parse_ack_body(payload: bytes) -> AckBody | None:
    """What an ack body asks for; None for bodies a server ignores."""
    if not payload:
        return _PLAIN_ACK  # nats-py's ack(): the common case, answered without a new object
    body = bytes(payload)
    stripped = body.strip()
    if not stripped or stripped in (b"+ACK", b"+OK"):
        return _PLAIN_ACK
    if body.startswith(b"-NAK"):
        return AckBody(AckKind.NAK, delay_ns=_nak_delay(body[4:]))
    if stripped == b"+WPI":
        return AckBody(AckKind.PROGRESS)
    if body.startswith(b"+NXT"):
        return AckBody(AckKind.NEXT, next_request=body[4:].strip())
    if body.startswith(b"+TERM"):
        return AckBody(AckKind.TERM, term_reason=body[5:].strip().decode(errors="replace"))
    return None


def ack_entry(reply: AckReply, body: AckBody, now_ns: int) -> AckLike:
    """The entry the leader proposes for an ack (+NXT: the ack part; the leader queues the pull)."""
    sseq, dseq = reply.stream_seq, reply.consumer_seq
    if body.kind is AckKind.NAK:
        return Nak(sseq, dseq, now_ns, body.delay_ns)
    if body.kind is AckKind.PROGRESS:
        return Progress(sseq, dseq, now_ns)
    if body.kind is AckKind.TERM:
        return Term(sseq, dseq, now_ns)
    return Ack(sseq, dseq, now_ns)


__all__ = [
    "ACK_PREFIX",
    "AckBody",
    "AckKind",
    "AckReply",
    "ack_entry",
    "ack_reply_subject",
    "parse_ack_body",
    "parse_ack_reply",
]
