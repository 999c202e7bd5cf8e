"""The WebSocket opening handshake as nats-server answers it (RFC 6455 section 4.2), sans-IO.

Given a request h11 has parsed, `answer_upgrade` decides: the `101 Switching Protocols` bytes (with the
compression nats-server agrees to and the configured `headers { }`), or the refusal nats-server sends, in
its order of checks and with its status codes. The listener (gateway/transports/websocket.py) only moves
the bytes.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from http import HTTPStatus

import h11
from wsproto.utilities import generate_accept_token

from gateway.transports.websocket_settings import WebSocketSettings, origin_refusal

# the only extension nats-server agrees to, always without context takeover either way (its
# wsPMCFullResponse), whatever window sizes the client offers: a deflate window of 15 bits reads them all
COMPRESSION_EXTENSION = "permessage-deflate"
COMPRESSION_RESPONSE = b"permessage-deflate; server_no_context_takeover; client_no_context_takeover"


@dataclass(frozen=True, slots=True)
class Upgrade:
    """The request is a WebSocket upgrade nats-server would take: send `response`, then speak WebSocket."""

    response: bytes
    compress: bool


@dataclass(frozen=True, slots=True)
class Refusal:
    """Not taken: send `response` and close. `reason` is nats-server's, for the log."""

    response: bytes
    reason: str


def header_values(request: h11.Request, name: bytes) -> list[str]:
    """Every comma-separated token of every `name` header (h11 gives names in lower case)."""
    return [
        token.strip(" \t")
        for header, value in request.headers
        if header == name
        for token in value.decode("latin-1").split(",")
    ]


def _has_token(request: h11.Request, name: bytes, wanted: str) -> bool:
    return any(token.lower() == wanted.lower() for token in header_values(request, name))


def _first_value(request: h11.Request, name: bytes) -> str:
    for header, value in request.headers:
        if header == name:
            return value.decode("latin-1")
    return ""


def offers_compression(request: h11.Request) -> bool:
    """Whether the client offers permessage-deflate, with whatever parameters (nats-server's check)."""
    return any(
        param.strip(" \t").lower() == COMPRESSION_EXTENSION
        for extension in header_values(request, b"sec-websocket-extensions")
        for param in extension.split(";")
    )


def http_error(status: int) -> bytes:
    """An error answer as Go's http.Error writes it for nats-server: the status text as a plain-text body."""
    phrase = HTTPStatus(status).phrase
    body = f"{phrase}\n".encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        "Sec-Websocket-Version: 13\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


def _refuse(status: int, reason: str) -> Refusal:
    return Refusal(http_error(status), reason)


def _valid_key(key: str) -> bool:
    try:
        return len(base64.b64decode(key, validate=True)) == 16
    except (binascii.Error, ValueError):
        return False


def answer_upgrade(request: h11.Request, settings: WebSocketSettings, *, tls: bool) -> Upgrade | Refusal:
    """nats-server's answer to an opening handshake (its wsUpgrade), checks in its order."""
    if request.method != b"GET":
        return _refuse(405, "request method must be GET")
    host = _first_value(request, b"host")
    if not host:
        return _refuse(400, "'Host' missing in request")
    if not _has_token(request, b"upgrade", "websocket"):
        return _refuse(400, "invalid value for header 'Upgrade'")
    if not _has_token(request, b"connection", "Upgrade"):
        return _refuse(400, "invalid value for header 'Connection'")
    key = _first_value(request, b"sec-websocket-key")
    if not key:
        return _refuse(400, "key missing")
    if not _valid_key(key):
        return _refuse(400, "invalid websocket key")
    if not _has_token(request, b"sec-websocket-version", "13"):
        return _refuse(400, "invalid version")
    origin = _first_value(request, b"origin") or _first_value(request, b"sec-websocket-origin")
    refusal = origin_refusal(settings, origin, host, tls)
    if refusal:
        return _refuse(403, f"origin not allowed: {refusal}")
    compress = settings.compression and offers_compression(request)
    lines = [
        b"HTTP/1.1 101 Switching Protocols",
        b"Upgrade: websocket",
        b"Connection: Upgrade",
        b"Sec-WebSocket-Accept: " + generate_accept_token(key.encode("latin-1")),
    ]
    if compress:
        lines.append(b"Sec-WebSocket-Extensions: " + COMPRESSION_RESPONSE)
    lines.extend(f"{name}: {value}".encode() for name, value in settings.headers)
    return Upgrade(b"\r\n".join(lines) + b"\r\n\r\n", compress)
