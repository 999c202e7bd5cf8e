"""Sans-IO NATS client protocol: a parser for what clients send, and pure encoders.

`ClientCommandParser` follows h11's shape: `receive_data(bytes)` only buffers,
`next_event()` returns one event from `gateway.events` or `NEED_DATA`, and a
broken byte stream raises `ProtocolError` (then keeps raising it). No sockets,
no clocks, no asyncio: the same bytes give the same events however they are
split. Limits (max_payload, max_control_line) are checked as soon as a
control line is seen, before any payload is buffered.

Subjects and other tokens are decoded as UTF-8 with `surrogateescape`, so
any byte string a client sends survives the round trip back to bytes
(`encode_token`) unchanged, as nats-server treats subjects as raw bytes.
"""

from __future__ import annotations

import re
from typing import Any, Final

import orjson

from gateway.events import (
    ERR_MAX_CONTROL_LINE,
    ERR_MAX_PAYLOAD,
    ERR_UNKNOWN_OP,
    NEED_DATA,
    OK,
    PING,
    PONG,
    ClientEvent,
    Connect,
    Err,
    HPub,
    Info,
    ProtocolError,
    Pub,
    Sub,
    Unsub,
    _NeedData,
)

DEFAULT_MAX_PAYLOAD: Final = 1024 * 1024
DEFAULT_MAX_CONTROL_LINE: Final = 4096

CRLF: Final = b"\r\n"
PING_BYTES: Final = b"PING\r\n"
PONG_BYTES: Final = b"PONG\r\n"
OK_BYTES: Final = b"+OK\r\n"

# bytes.split() with no argument also splits on \v and \f, which NATS treats as
# ordinary token characters; lines holding them take the exact (slower) path.
_RARE_WHITESPACE = re.compile(rb"[\x0b\x0c]")
_ARG_SEPARATOR = re.compile(rb"[ \t]+")


def decode_token(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def encode_token(token: str) -> bytes:
    return token.encode("utf-8", "surrogateescape")


def _split_args(line: bytes) -> list[bytes]:
    if _RARE_WHITESPACE.search(line) is None:
        return line.split()
    return [arg for arg in _ARG_SEPARATOR.split(line) if arg]


def _parse_size(raw: bytes) -> int:
    # int() would also accept "+1", "-1", "1_0" and spaces; NATS takes plain digits only
    # (bytes.isdigit is ASCII-only).
    if not raw.isdigit():
        raise ProtocolError(ERR_UNKNOWN_OP)
    return int(raw)


class ClientCommandParser:
    """Turns the bytes a client sends into events, one at a time.

    Accepts what nats-server accepts: verbs in any case, arguments separated
    by runs of spaces or tabs, control lines ended by CRLF or a bare LF; a
    payload must be followed by exactly CRLF.
    """

    def __init__(
        self,
        max_payload: int = DEFAULT_MAX_PAYLOAD,
        max_control_line: int = DEFAULT_MAX_CONTROL_LINE,
    ) -> None:
        self.max_payload = max_payload
        self.max_control_line = max_control_line
        self._buf = b""
        self._pos = 0
        # Chunks held back while a large payload is still incomplete, so that a
        # 1 MiB message arriving in 64 KiB reads is joined once, not 16 times.
        self._held: list[bytes] = []
        self._held_len = 0
        self._need = 0
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet turned into events."""
        return len(self._buf) - self._pos + self._held_len

    def receive_data(self, data: bytes) -> None:
        if not data:
            return
        if self._need:
            self._held.append(data)
            self._held_len += len(data)
            if len(self._buf) - self._pos + self._held_len < self._need:
                return
            data = b"".join(self._held)
            self._held.clear()
            self._held_len = 0
            self._need = 0
        if self._pos >= len(self._buf):
            self._buf = bytes(data)
        else:
            self._buf = self._buf[self._pos :] + data
        self._pos = 0

    def next_event(self) -> ClientEvent | _NeedData:
        if self._error is not None:
            raise self._error
        try:
            return self._next_event()
        except ProtocolError as exc:
            self._error = exc
            raise

    def _next_event(self) -> ClientEvent | _NeedData:
        buf, pos = self._buf, self._pos
        if self._need:
            return NEED_DATA
        end = buf.find(b"\n", pos)
        if end < 0:
            if len(buf) - pos > self.max_control_line:
                raise ProtocolError(ERR_MAX_CONTROL_LINE)
            return NEED_DATA
        if end - pos > self.max_control_line:
            raise ProtocolError(ERR_MAX_CONTROL_LINE)
        line_end = end - 1 if end > pos and buf[end - 1] == 13 else end
        line = buf[pos:line_end]
        head = line[:4]
        if head == b"PUB " or head == b"pub ":
            return self._message(line, end + 1, with_headers=False)
        if head == b"HPUB" or head == b"hpub":
            return self._message(line, end + 1, with_headers=True)
        args = _split_args(line)
        if not args or line[:1] in (b" ", b"\t"):
            raise ProtocolError(ERR_UNKNOWN_OP)
        verb = args[0].upper()
        self._pos = end + 1
        if verb == b"PING":
            return PING
        if verb == b"PONG":
            return PONG
        if verb == b"SUB":
            return self._sub(args)
        if verb == b"UNSUB":
            return self._unsub(args)
        if verb == b"PUB" or verb == b"HPUB":
            self._pos = pos
            return self._message(line, end + 1, with_headers=verb == b"HPUB")
        if verb == b"CONNECT":
            return Connect(self._json_object(line, len(b"CONNECT")))
        if verb == b"INFO":
            return Info(self._json_object(line, len(b"INFO")))
        if verb == b"+OK":
            return OK
        if verb == b"-ERR":
            return Err(decode_token(line[4:].strip().strip(b"'")))
        raise ProtocolError(ERR_UNKNOWN_OP)

    def _message(self, line: bytes, body_start: int, *, with_headers: bool) -> Pub | HPub | _NeedData:
        args = _split_args(line)
        if with_headers:
            if len(args) == 4:
                subject, reply, hdr_raw, size_raw = args[1], None, args[2], args[3]
            elif len(args) == 5:
                subject, reply, hdr_raw, size_raw = args[1], args[2], args[3], args[4]
            else:
                raise ProtocolError(ERR_UNKNOWN_OP)
            header_size = _parse_size(hdr_raw)
        else:
            if len(args) == 3:
                subject, reply, size_raw = args[1], None, args[2]
            elif len(args) == 4:
                subject, reply, size_raw = args[1], args[2], args[3]
            else:
                raise ProtocolError(ERR_UNKNOWN_OP)
            header_size = 0
        size = _parse_size(size_raw)
        if size > self.max_payload:
            raise ProtocolError(ERR_MAX_PAYLOAD)
        if header_size > size:
            raise ProtocolError(ERR_UNKNOWN_OP)
        buf = self._buf
        body_end = body_start + size
        if len(buf) < body_end + 2:
            # Not all here yet: leave the control line in the buffer and parse it
            # again once the body has arrived (cheap next to waiting for the bytes).
            self._need = body_end + 2 - self._pos
            return NEED_DATA
        if buf[body_end : body_end + 2] != CRLF:
            raise ProtocolError(ERR_UNKNOWN_OP)
        self._pos = body_end + 2
        reply_str = decode_token(reply) if reply is not None else None
        if with_headers:
            hdr_end = body_start + header_size
            return HPub(decode_token(subject), reply_str, buf[body_start:hdr_end], buf[hdr_end:body_end])
        return Pub(decode_token(subject), reply_str, buf[body_start:body_end])

    @staticmethod
    def _sub(args: list[bytes]) -> Sub:
        if len(args) == 3:
            return Sub(decode_token(args[1]), None, decode_token(args[2]))
        if len(args) == 4:
            return Sub(decode_token(args[1]), decode_token(args[2]), decode_token(args[3]))
        raise ProtocolError(ERR_UNKNOWN_OP)

    @staticmethod
    def _unsub(args: list[bytes]) -> Unsub:
        if len(args) == 2:
            return Unsub(decode_token(args[1]))
        if len(args) == 3:
            return Unsub(decode_token(args[1]), _parse_size(args[2]))
        raise ProtocolError(ERR_UNKNOWN_OP)

    @staticmethod
    def _json_object(line: bytes, verb_len: int) -> dict[str, Any]:
        try:
            value = orjson.loads(line[verb_len:])
        except orjson.JSONDecodeError:
            raise ProtocolError(ERR_UNKNOWN_OP) from None
        if not isinstance(value, dict):
            raise ProtocolError(ERR_UNKNOWN_OP)
        return value


# --- encoders: what a server sends -------------------------------------------------


def encode_info(info: dict[str, Any]) -> bytes:
    """`INFO {json} \\r\\n`, with the trailing space nats-server writes."""
    return b"INFO " + orjson.dumps(info) + b" \r\n"


def encode_msg(subject: bytes, sid: bytes, reply: bytes | None, payload: bytes) -> bytes:
    if reply:
        return b"MSG %s %s %s %d\r\n%s\r\n" % (subject, sid, reply, len(payload), payload)
    return b"MSG %s %s %d\r\n%s\r\n" % (subject, sid, len(payload), payload)


def encode_hmsg(subject: bytes, sid: bytes, reply: bytes | None, headers: bytes, payload: bytes) -> bytes:
    hdr_len = len(headers)
    total = hdr_len + len(payload)
    if reply:
        return b"HMSG %s %s %s %d %d\r\n%s%s\r\n" % (subject, sid, reply, hdr_len, total, headers, payload)
    return b"HMSG %s %s %d %d\r\n%s%s\r\n" % (subject, sid, hdr_len, total, headers, payload)


def encode_err(message: str) -> bytes:
    return b"-ERR '" + message.encode("utf-8", "replace") + b"'\r\n"


# --- encoders: what a client sends (tests, benchmarks, fuzzing) --------------------


def encode_connect(options: dict[str, Any]) -> bytes:
    return b"CONNECT " + orjson.dumps(options) + CRLF


def encode_pub(subject: str, payload: bytes, reply: str | None = None) -> bytes:
    reply_part = b" " + encode_token(reply) if reply else b""
    return b"PUB %s%s %d\r\n%s\r\n" % (encode_token(subject), reply_part, len(payload), payload)


def encode_hpub(subject: str, headers: bytes, payload: bytes, reply: str | None = None) -> bytes:
    reply_part = b" " + encode_token(reply) if reply else b""
    total = len(headers) + len(payload)
    return b"HPUB %s%s %d %d\r\n%s%s\r\n" % (
        encode_token(subject),
        reply_part,
        len(headers),
        total,
        headers,
        payload,
    )


def encode_sub(subject: str, sid: str, queue: str | None = None) -> bytes:
    queue_part = b" " + encode_token(queue) if queue else b""
    return b"SUB %s%s %s\r\n" % (encode_token(subject), queue_part, encode_token(sid))


def encode_unsub(sid: str, max_msgs: int | None = None) -> bytes:
    if max_msgs is None:
        return b"UNSUB %s\r\n" % encode_token(sid)
    return b"UNSUB %s %d\r\n" % (encode_token(sid), max_msgs)
