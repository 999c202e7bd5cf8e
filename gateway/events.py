"""What a NATS client sends a server, as the sans-IO parser reports it.

Events are frozen dataclasses (h11's shape): the parser creates them, the
server reads them, nobody changes them. `NEED_DATA` is the parser's answer
when the buffered bytes do not yet hold a whole command.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final


class _NeedData:
    """Sentinel type of `NEED_DATA`; a class so it has a readable repr and its own type."""

    _instance: _NeedData | None = None

    def __new__(cls) -> _NeedData:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()


@dataclass(frozen=True, slots=True)
class Connect:
    """`CONNECT {json}`: the raw options object; `ConnectOptions.from_event` checks its types."""

    options: dict[str, Any] = field(default_factory=dict)


# Pub and HPub are not frozen: one is built per published message, and a frozen dataclass's __init__
# costs several times a plain one's (one object.__setattr__ per field).
@dataclass(slots=True)
class Pub:
    """`PUB <subject> [reply] <size>` and its payload."""

    subject: str
    reply: str | None
    payload: bytes


@dataclass(slots=True)
class HPub:
    """`HPUB <subject> [reply] <header size> <total size>`: header block and payload, split."""

    subject: str
    reply: str | None
    headers: bytes
    payload: bytes


@dataclass(frozen=True, slots=True)
class Sub:
    """`SUB <subject> [queue group] <sid>`."""

    subject: str
    queue: str | None
    sid: str


@dataclass(frozen=True, slots=True)
class Unsub:
    """`UNSUB <sid> [max msgs]`: max_msgs None removes the subscription now."""

    sid: str
    max_msgs: int | None = None


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class Pong:
    pass


@dataclass(frozen=True, slots=True)
class Ok:
    """`+OK` sent by a client; servers ignore it."""


@dataclass(frozen=True, slots=True)
class Err:
    """`-ERR '<message>'` sent by a client; nats-server closes the connection on it."""

    message: str


@dataclass(frozen=True, slots=True)
class Info:
    """`INFO {json}` sent by a client; servers ignore it."""

    info: dict[str, Any] = field(default_factory=dict)


ClientEvent = Connect | Pub | HPub | Sub | Unsub | Ping | Pong | Ok | Err | Info

PING: Final = Ping()
PONG: Final = Pong()
OK: Final = Ok()


class ProtocolError(Exception):
    """The peer broke the protocol; `message` is the text of the `-ERR '...'` to send it.

    `fatal` says whether NATS closes the connection after sending the error.
    Parser errors are always fatal: the byte stream can no longer be framed.
    """

    def __init__(self, message: str, *, fatal: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.fatal = fatal


# nats-server's own wording for the errors it reports to clients.
ERR_UNKNOWN_OP: Final = "Unknown Protocol Operation"
ERR_MAX_PAYLOAD: Final = "Maximum Payload Violation"
ERR_MAX_CONTROL_LINE: Final = "maximum control line exceeded"
ERR_INVALID_PUBLISH_SUBJECT: Final = "Invalid Publish Subject"
ERR_INVALID_SUBJECT: Final = "Invalid Subject"
ERR_AUTHORIZATION: Final = "Authorization Violation"
ERR_AUTH_TIMEOUT: Final = "Authentication Timeout"
ERR_STALE_CONNECTION: Final = "Stale Connection"
ERR_SLOW_CONSUMER: Final = "Slow Consumer"
ERR_BAD_CLIENT_PROTOCOL: Final = "invalid client protocol"
ERR_NO_RESPONDERS_NEEDS_HEADERS: Final = "no responders requires headers support"
ERR_HEADERS_NOT_SUPPORTED: Final = "message headers not supported"
ERR_MAX_CONNECTIONS: Final = "maximum connections exceeded"
ERR_MAX_SUBSCRIPTIONS: Final = "maximum subscriptions exceeded"
