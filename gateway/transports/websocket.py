"""The NATS client protocol over WebSocket, as nats-server's `websocket { }` port serves it.

Browsers (nats.ws, nats.js's `wsconnect`) and nats-py (`ws://`, `wss://` URLs) speak the same protocol
inside WebSocket messages: each message the client sends is bytes of the protocol, and each batch the
server writes goes out as one binary message. So a WebSocket client is an ordinary `ClientConnection`
whose transport is the WebSocket: `WebSocketTransport` gives it the few calls of an asyncio transport
it makes (write, close, abort, pause/resume reading, the write buffer's size, the peer's address).

TLS, when configured, is the listener's (`wss://`), as in nats-server: the connection itself never
upgrades, and its INFO does not ask for TLS. aiohttp does the HTTP upgrade, the framing and the
pings of the WebSocket layer.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import structlog

from gateway.transports.tls import TlsSettings, server_context

if TYPE_CHECKING:  # aiohttp is imported when a listener starts: reading a config needs only the settings
    from aiohttp import web

log = structlog.get_logger()

STOP_TIMEOUT_S = 2.0


# headers a `headers { }` block may not set on the upgrade's answer (nats-server's list)
_RESERVED_HEADERS = frozenset({"host", "content-length", "connection", "upgrade", "nats-no-masking"})


@dataclass(frozen=True, slots=True)
class WebSocketSettings:
    """nats-server's `websocket { }` block, the part jetraft serves."""

    port: int
    host: str | None = None  # None: the node's own address
    no_tls: bool = False
    tls: TlsSettings | None = None
    compression: bool = False
    # a browser's page may connect only from the node's own origin (scheme, host and port of the request)
    same_origin: bool = False
    # ... or only from these origins ("https://app.example.com:8443"); empty: any origin
    allowed_origins: tuple[str, ...] = ()
    # seconds a new connection has to finish its HTTP upgrade; 0: no limit
    handshake_timeout: float = 0.0
    # added to every upgrade's answer
    headers: tuple[tuple[str, str], ...] = ()

    def problem(self) -> str | None:
        """nats-server's refusal of these settings, or None."""
        if self.tls is None and not self.no_tls:
            return "websocket requires TLS configuration"
        for origin in self.allowed_origins:
            try:
                parse_origin(origin)
            except ValueError as exc:
                return f"unable to parse allowed origin{exc}"
        for name, _ in self.headers:
            lowered = name.lower()
            if lowered in _RESERVED_HEADERS:
                return f'websocket: invalid header "{name}" not allowed'
            if lowered.startswith("sec-websocket-"):
                return f'websocket: invalid header "{name}", "Sec-WebSocket-" prefix not allowed'
        return None


def parse_origin(origin: str, *, allowed: bool = True) -> tuple[str, str, str]:
    """(scheme, host, port) of an origin URL, the port filled in from the scheme as nats-server does. For an
    allowed origin, a ValueError's message is nats-server's reason (after "unable to parse allowed origin")."""
    parts = urlsplit(origin)
    if not origin.startswith("/") and not (parts.scheme and origin.startswith(f"{parts.scheme}:")):
        raise ValueError(f': parse "{origin}": invalid URI for request')
    if allowed and parts.scheme not in ("http", "https"):
        raise ValueError(f' "{origin}": allowed origins must be absolute URLs with http or https scheme')
    if allowed and not parts.netloc:
        raise ValueError(f' "{origin}": host is required')
    host, port = _host_and_port(parts.netloc, tls=parts.scheme == "https")
    return parts.scheme, host, port


def _host_and_port(netloc: str, *, tls: bool) -> tuple[str, str]:
    """Host and port of `host:port`, `[v6]:port` or a bare host, the scheme's port when there is none
    (nats-server's wsGetHostAndPort)."""
    if netloc.startswith("["):
        end = netloc.find("]")
        host, rest = netloc[1:end], netloc[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
    elif netloc.count(":") == 1:
        host, port = netloc.split(":")
    else:
        host, port = netloc, ""
    return host.lower(), port or ("443" if tls else "80")


def origin_refusal(settings: WebSocketSettings, origin: str | None, request_host: str, tls: bool) -> str | None:
    """Why a WebSocket upgrade from a page of `origin` is refused (nats-server's checkOrigin), or None. No
    Origin header is allowed: only browsers send one, and any other client could send any."""
    if not settings.same_origin and not settings.allowed_origins:
        return None
    if not origin:
        return None
    try:
        scheme, host, port = parse_origin(origin, allowed=False)
    except ValueError as exc:
        return str(exc).lstrip(": ")  # the reason alone, without the prefix it has after "allowed origin"
    if settings.same_origin:
        request_host_only, request_port = _host_and_port(request_host, tls=tls)
        if (host, port, scheme.lower()) != (request_host_only, request_port, "https" if tls else "http"):
            return "not same origin"
    if settings.allowed_origins:
        for allowed in settings.allowed_origins:
            allowed_scheme, allowed_host, allowed_port = parse_origin(allowed)
            if (allowed_scheme, allowed_host, allowed_port) == (scheme, host, port):
                return None
        return "not in the allowed list"
    return None


class ClientPort(Protocol):
    """The client port a WebSocket listener hands its connections to (gateway.server.GatewayServer)."""

    reuse_port: bool

    def new_websocket_connection(self) -> asyncio.Protocol:
        """A new client, not yet connected, whose TLS (if any) is the WebSocket listener's."""
        ...


class WebSocketTransport:
    """A WebSocket seen as the asyncio transport a `ClientConnection` writes to: writes are queued and
    sent in order, one binary message per batch, by one task."""

    def __init__(self, ws: web.WebSocketResponse, peer: Any) -> None:
        self._ws = ws
        self._peer = peer
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._sender: asyncio.Task[None] | None = None
        self._closing = False
        self._reading = asyncio.Event()
        self._reading.set()

    # --- what ClientConnection calls -------------------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._peer if name == "peername" else default

    def write(self, data: bytes) -> None:
        if self._closing or not data:
            return
        self._pending.append(data)
        self._pending_size += len(data)
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send())

    def get_write_buffer_size(self) -> int:
        return self._pending_size

    def is_closing(self) -> bool:
        return self._closing

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def close(self) -> None:
        """Send what is queued, then close the WebSocket."""
        if self._closing:
            return
        self._closing = True
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send())

    def abort(self) -> None:
        """Close now, dropping what is queued."""
        self._closing = True
        self._pending.clear()
        self._pending_size = 0
        if self._sender is not None:
            self._sender.cancel()
        self._sender = asyncio.get_running_loop().create_task(self._close_ws())

    # --- the listener's side -------------------------------------------------------------------------

    async def may_read(self) -> None:
        """Returns once the connection wants to read again (its reading may be paused)."""
        await self._reading.wait()

    async def _send(self) -> None:
        try:
            while self._pending:
                batch = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
                self._pending.clear()
                await self._ws.send_bytes(batch)
                self._pending_size = max(self._pending_size - len(batch), 0)
        except (ConnectionError, RuntimeError) as exc:  # the peer went away under us
            log.debug("websocket write failed", error=repr(exc))
            self._closing = True
        finally:
            self._sender = None
        if self._closing:
            await self._close_ws()

    async def _close_ws(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._ws.close()


class WebSocketListener:
    """The node's WebSocket port: each connection becomes a client of `server`."""

    def __init__(self, server: ClientPort, settings: WebSocketSettings, default_host: str) -> None:
        self._server = server
        self._settings = settings
        self._host = settings.host or default_host
        self.port = settings.port
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/{path:.*}", self._connection)
        # the clients are closed before the listener stops (Node.stop): a handler left then is a peer that
        # does not finish the closing handshake, not worth a minute of the node's stop
        timeouts: dict[str, float] = {}
        if self._settings.handshake_timeout > 0:
            # aiohttp closes a connection that has not sent a whole request within its keepalive timeout,
            # counted from the connection's start; once upgraded, the connection is busy, never idle
            timeouts["keepalive_timeout"] = self._settings.handshake_timeout
        self._runner = web.AppRunner(
            app, access_log=None, handle_signals=False, shutdown_timeout=STOP_TIMEOUT_S, **timeouts
        )
        await self._runner.setup()
        ssl_context = server_context(self._settings.tls) if self._settings.tls is not None else None
        self._site = web.TCPSite(
            self._runner, self._host, self._settings.port, ssl_context=ssl_context,
            reuse_port=self._server.reuse_port or None,
        )  # fmt: skip
        await self._site.start()
        sockets = self._site._server.sockets if self._site._server is not None else ()  # type: ignore[union-attr]
        if sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("websocket_listening", host=self._host, port=self.port, tls=ssl_context is not None)

    async def stop_accepting(self) -> None:
        """Lame duck mode: no new WebSocket client; the connected ones stay."""
        if self._site is not None:
            await self._site.stop()
            self._site = None

    async def stop(self) -> None:
        await self.stop_accepting()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _connection(self, request: web.Request) -> web.StreamResponse:
        from aiohttp import WSMsgType, web

        settings = self._settings
        ws = web.WebSocketResponse(compress=settings.compression, max_msg_size=0)
        # the origin is checked once the request is a valid upgrade (an invalid one gets aiohttp's 400 below)
        refusal = ws.can_prepare(request).ok and origin_refusal(
            settings, request.headers.get("Origin") or request.headers.get("Sec-WebSocket-Origin"),
            request.host, settings.tls is not None,
        )  # fmt: skip
        if refusal:
            log.warning("websocket_handshake_refused", peer=request.remote, reason=f"origin not allowed: {refusal}")
            # as nats-server answers it (Go's http.Error)
            return web.Response(
                status=403, text="Forbidden\n", content_type="text/plain", charset="utf-8",
                headers={"Sec-Websocket-Version": "13", "X-Content-Type-Options": "nosniff"},
            )  # fmt: skip
        for name, value in settings.headers:
            ws.headers[name] = value
        await ws.prepare(request)
        peer = request.transport.get_extra_info("peername") if request.transport is not None else None
        transport = WebSocketTransport(ws, peer)
        client = self._server.new_websocket_connection()
        client.connection_made(transport)  # type: ignore[arg-type]
        try:
            async for message in ws:
                if message.type is WSMsgType.BINARY:
                    client.data_received(message.data)
                elif message.type is WSMsgType.TEXT:
                    client.data_received(message.data.encode())
                else:  # an error frame: the connection is over
                    break
                await transport.may_read()
        finally:
            client.connection_lost(None)
        return ws
