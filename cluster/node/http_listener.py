"""A small HTTP/1.1 server for the monitoring port: GET (and HEAD) requests, one handler per path.

The monitoring port opens in every node and every worker at start, and aiohttp's import (its client and
TLS contexts come with its server) took a quarter of a node's start-up for half a dozen JSON endpoints.
h11 parses the protocol (sans-IO, as the NATS parser is); this module owns only the socket side: one
request at a time per connection, keep-alive between them, and bounded waits for idle connections.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

import h11
import structlog

log = structlog.get_logger(__name__)

# a connection with no request in progress is closed after this long, as aiohttp's keep-alive did
IDLE_TIMEOUT_S = 75.0
SERVER_HEADER = b"jetraft"
TEXT_PLAIN = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    # each parameter's first value, decoded as Go's url.Query decodes them ('+' is a space)
    query: Mapping[str, str]
    # header names in lower case
    headers: Mapping[str, str]

    def has_header(self, name: str) -> bool:
        return name.lower() in self.headers


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes = b""
    content_type: str = TEXT_PLAIN

    @classmethod
    def text(cls, status: int, text: str, content_type: str = TEXT_PLAIN) -> HttpResponse:
        return cls(status, text.encode(), content_type)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


def parse_target(target: bytes) -> tuple[str, dict[str, str]]:
    """The path and the query parameters (first value of each) of a request target."""
    parts = urlsplit(target.decode("latin-1"))
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        query.setdefault(key, value)
    return parts.path or "/", query


def reason_phrase(status: int) -> bytes:
    """The status line's words (`OK`, `Not Found`); none for a code HTTP does not name."""
    try:
        return HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


class HttpListener:
    """Answers requests on one port with `routes` (path -> handler); start() binds, stop() releases."""

    def __init__(self, host: str, port: int, routes: Mapping[str, Handler]) -> None:
        self._host = host
        self._port = port
        self._routes = dict(routes)
        self._server: asyncio.Server | None = None
        self._connections: set[_HttpConnection] = set()

    @property
    def port(self) -> int:
        """The bound port (the one asked for, or the one the OS chose for 0)."""
        return self._port

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _HttpConnection(self._routes, self._connections), self._host, self._port, reuse_address=True
        )
        if self._port == 0:
            self._port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for connection in list(self._connections):
            connection.close()
        await server.wait_closed()


class _HttpConnection(asyncio.Protocol):
    def __init__(self, routes: Mapping[str, Handler], registry: set[_HttpConnection]) -> None:
        self._routes = routes
        self._registry = registry
        self._h11 = h11.Connection(h11.SERVER)
        self._transport: asyncio.Transport | None = None
        self._request: h11.Request | None = None
        self._handling: asyncio.Task[None] | None = None
        self._idle: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._registry.add(self)
        self._arm_idle_timer()

    def data_received(self, data: bytes) -> None:
        self._h11.receive_data(data)
        self._next_events()

    def eof_received(self) -> bool | None:
        self._h11.receive_data(b"")
        self._next_events()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._registry.discard(self)
        self._transport = None
        if self._idle is not None:
            self._idle.cancel()
        if self._handling is not None:
            self._handling.cancel()

    # --- requests -----------------------------------------------------------------------------

    def _next_events(self) -> None:
        """Handle what h11 has parsed, up to the end of one request (the next waits for its answer)."""
        while self._transport is not None and self._handling is None:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                self._refuse(exc)
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._request = event
            elif isinstance(event, h11.EndOfMessage) and self._request is not None:
                # the idle bound covers a request's arrival too (a client that never finishes one)
                if self._idle is not None:
                    self._idle.cancel()
                    self._idle = None
                request, self._request = self._request, None
                # what the client sends meanwhile (a pipelined request) waits in its socket, not in memory
                if self._transport is not None:
                    self._transport.pause_reading()
                self._handling = asyncio.get_running_loop().create_task(self._answer(request))
            elif isinstance(event, h11.ConnectionClosed):
                self.close()
                return
            # a request's body (Data) is read and dropped: no endpoint takes one

    async def _answer(self, request: h11.Request) -> None:
        response = await self._respond(request)
        self._handling = None
        if self._transport is None:
            return
        self._send_response(response, head_only=request.method == b"HEAD")
        if self._h11.our_state is h11.DONE and self._h11.their_state is h11.DONE:
            self._h11.start_next_cycle()
            self._arm_idle_timer()
            self._transport.resume_reading()
            self._next_events()  # a request pipelined behind this one, already read
        else:
            self.close()

    async def _respond(self, raw: h11.Request) -> HttpResponse:
        try:
            path, query = parse_target(raw.target)
        except (UnicodeDecodeError, ValueError):
            return HttpResponse.text(400, "400: Bad Request")
        handler = self._routes.get(path)
        if handler is None:
            return HttpResponse.text(404, "404: Not Found")
        if raw.method not in (b"GET", b"HEAD"):
            return HttpResponse.text(405, "405: Method Not Allowed")
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in raw.headers}
        request = HttpRequest(raw.method.decode(), path, query, headers)
        try:
            return await handler(request)
        except Exception:
            # a bug in one endpoint answers 500 and keeps the port serving the others
            log.exception("http_handler_failed", path=path)
            return HttpResponse.text(500, "500: Internal Server Error")

    def _send_response(self, response: HttpResponse, *, head_only: bool) -> None:
        headers = [
            (b"content-type", response.content_type.encode()),
            (b"content-length", str(len(response.body)).encode()),
            (b"server", SERVER_HEADER),
        ]
        out = self._h11.send(
            h11.Response(status_code=response.status, headers=headers, reason=reason_phrase(response.status))
        ) or b""
        if response.body and not head_only:
            out += self._h11.send(h11.Data(data=response.body)) or b""
        out += self._h11.send(h11.EndOfMessage()) or b""
        assert self._transport is not None
        self._transport.write(out)

    def _refuse(self, exc: h11.RemoteProtocolError) -> None:
        """A request h11 cannot read: 400 (or what h11 says it was) if a response can still be sent."""
        if self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(h11.LocalProtocolError):
                text = f"{exc.error_status_hint}: {exc}"
                self._send_response(HttpResponse.text(exc.error_status_hint, text), head_only=False)
        self.close()

    # --- closing ------------------------------------------------------------------------------

    def _arm_idle_timer(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._idle = asyncio.get_running_loop().call_later(IDLE_TIMEOUT_S, self.close)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
