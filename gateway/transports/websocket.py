"""The NATS client protocol over WebSocket, as nats-server's `websocket { }` port serves it.

Browsers (nats.ws, nats.js's `wsconnect`) and nats-py (`ws://`, `wss://` URLs) speak the same protocol
inside WebSocket messages: each message the client sends is bytes of the protocol, and each batch the
server writes goes out as one binary message. So a WebSocket client is an ordinary `ClientConnection`
whose transport is the WebSocket: `WebSocketTransport` gives it the few calls of an asyncio transport
it makes (write, close, abort, pause/resume reading, the write buffer's size, the peer's address).

TLS, when configured, is the listener's (`wss://`), as in nats-server: the connection itself never
upgrades, and its INFO does not ask for TLS. h11 reads the opening handshake, which
`websocket_handshake.py` answers as nats-server does; wsproto (sans-IO, like h11) does the framing,
masking, compression and the control frames after it; this module moves the bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any, Protocol

import h11
import structlog
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping, TextMessage
from wsproto.extensions import PerMessageDeflate
from wsproto.utilities import LocalProtocolError

from gateway.transports.listen import server_address
from gateway.transports.tls import server_context
from gateway.transports.websocket_handshake import Refusal, answer_upgrade, http_error
from gateway.transports.websocket_settings import WebSocketSettings

log = structlog.get_logger()

# A connection that has not finished its opening handshake after this long is closed when the settings
# give no `handshake_timeout`. nats-server then waits without bound; a bound keeps a port scan's
# half-open connections from piling up, and no real client takes this long to send one request.
DEFAULT_HANDSHAKE_BOUND_S = 75.0
# the status of the close frame a node sends when it closes a client (RFC 6455: normal closure)
NORMAL_CLOSURE = 1000


class ClientPort(Protocol):
    """The client port a WebSocket listener hands its connections to (gateway.server.GatewayServer)."""

    reuse_port: bool

    def new_websocket_connection(self) -> asyncio.Protocol:
        """A new client, not yet connected, whose TLS (if any) is the WebSocket listener's."""
        ...


class WebSocketTransport:
    """A WebSocket seen as the asyncio transport a `ClientConnection` writes to: each write goes out at once
    as one binary message on the TCP (or TLS) transport below."""

    def __init__(self, ws: Connection, tcp: asyncio.Transport) -> None:
        self._ws = ws
        self._tcp = tcp
        self._closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._tcp.get_extra_info(name, default)

    def write(self, data: bytes) -> None:
        # after a close frame either way, nothing more may be sent (wsproto refuses it): the connection ends
        if self._closing or not data or self._ws.state is not ConnectionState.OPEN:
            return
        self._tcp.write(self._ws.send(BytesMessage(data=data)))

    def get_write_buffer_size(self) -> int:
        return self._tcp.get_write_buffer_size()

    def is_closing(self) -> bool:
        return self._closing or self._tcp.is_closing()

    def pause_reading(self) -> None:
        self._tcp.pause_reading()

    def resume_reading(self) -> None:
        self._tcp.resume_reading()

    def close(self) -> None:
        """A close frame after what was written, then close the connection (what the socket still
        buffers goes out first)."""
        if self._closing:
            return
        self._closing = True
        if self._ws.state is ConnectionState.OPEN:
            self._tcp.write(self._ws.send(CloseConnection(code=NORMAL_CLOSURE)))
        self._tcp.close()

    def abort(self) -> None:
        """Close now, dropping what is queued."""
        self._closing = True
        self._tcp.abort()


class _WebSocketConnection(asyncio.Protocol):
    """One TCP connection of the WebSocket port: an HTTP request until the upgrade, then a client."""

    def __init__(self, listener: WebSocketListener) -> None:
        self._listener = listener
        self._h11: h11.Connection | None = h11.Connection(h11.SERVER)
        self._request: h11.Request | None = None
        self._tcp: asyncio.Transport | None = None
        self._ws: Connection | None = None
        self._client: asyncio.Protocol | None = None
        self._transport: WebSocketTransport | None = None
        self._handshake_timer: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._tcp = transport  # type: ignore[assignment]
        self._listener.connections.add(self)
        bound = self._listener.settings.handshake_timeout or DEFAULT_HANDSHAKE_BOUND_S
        self._handshake_timer = asyncio.get_running_loop().call_later(bound, self._handshake_timed_out)

    def data_received(self, data: bytes) -> None:
        if self._ws is not None:
            if self._ws.state is ConnectionState.CLOSED:
                return  # bytes after the closing handshake, while the socket closes
            self._ws.receive_data(data)
            self._frames()
        elif self._h11 is not None:
            self._h11.receive_data(data)
            self._handshake()

    def eof_received(self) -> bool | None:
        if self._ws is not None and self._ws.state is not ConnectionState.CLOSED:
            self._ws.receive_data(None)
            self._frames()
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._listener.connections.discard(self)
        self._cancel_handshake_timer()
        self._tcp = None
        client, self._client = self._client, None
        if client is not None:
            client.connection_lost(exc)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        elif self._tcp is not None:
            self._tcp.close()

    # --- the opening handshake ------------------------------------------------------------------

    def _handshake(self) -> None:
        assert self._h11 is not None
        while self._tcp is not None:
            try:
                event = self._h11.next_event()
            except h11.RemoteProtocolError as exc:
                self._refuse(Refusal(http_error(exc.error_status_hint), str(exc)))
                return
            if event is h11.NEED_DATA:
                return
            if isinstance(event, h11.Request):
                self._request = event
            elif event is h11.PAUSED or isinstance(event, h11.EndOfMessage):
                # an upgrade pauses h11 after the request; any other request is refused below anyway
                self._answer()
                return
            elif isinstance(event, h11.ConnectionClosed):
                self.close()
                return

    def _answer(self) -> None:
        assert self._h11 is not None and self._tcp is not None
        if self._request is None:
            self._refuse(Refusal(http_error(400), "no request"))
            return
        settings = self._listener.settings
        answer = answer_upgrade(self._request, settings, tls=settings.tls is not None)
        if isinstance(answer, Refusal):
            self._refuse(answer)
            return
        self._cancel_handshake_timer()
        extensions = []
        if answer.compress:
            deflate = PerMessageDeflate(client_no_context_takeover=True, server_no_context_takeover=True)
            deflate.accept("")  # nats-server's fixed terms (websocket_handshake.COMPRESSION_RESPONSE)
            extensions.append(deflate)
        # bytes the client sent after its request (frames it did not wait to send) are the first frames
        trailing, _ = self._h11.trailing_data
        self._h11 = self._request = None
        self._tcp.write(answer.response)
        self._ws = Connection(ConnectionType.SERVER, extensions=extensions, trailing_data=bytes(trailing))
        self._transport = WebSocketTransport(self._ws, self._tcp)
        self._client = self._listener.server.new_websocket_connection()
        self._client.connection_made(self._transport)  # type: ignore[arg-type]
        if trailing:
            self._frames()

    def _refuse(self, refusal: Refusal) -> None:
        peer = self._tcp.get_extra_info("peername") if self._tcp is not None else None
        log.warning("websocket_handshake_refused", peer=peer, reason=refusal.reason)
        if self._tcp is not None:
            self._tcp.write(refusal.response)
            self._tcp.close()

    def _handshake_timed_out(self) -> None:
        self._handshake_timer = None
        if self._ws is None and self._tcp is not None:
            self._tcp.close()

    def _cancel_handshake_timer(self) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None

    # --- after it -------------------------------------------------------------------------------

    def _frames(self) -> None:
        """Hand the messages wsproto has read to the client; answer pings and the closing handshake.

        The messages of one read go to the client as one run of protocol bytes (NATS over WebSocket is
        a byte stream: a command may span messages), so what the client answers to them leaves in one
        message too, as nats-server's does: a client that sent SUB, PUB and PING as three messages gets
        MSG and PONG in one, not two."""
        ws, tcp = self._ws, self._tcp
        assert ws is not None
        received: list[bytes] = []
        for event in ws.events():
            if tcp is None or self._client is None:
                return
            if isinstance(event, Message):
                # a text message is protocol bytes too (some browser libraries send them)
                data = event.data.encode() if isinstance(event, TextMessage) else event.data
                received.append(bytes(data))
                continue
            self._deliver(received)  # what came before a ping or a close goes first
            received = []
            if self._tcp is None or self._client is None or self._client_closed():
                return  # what it was handed ended the connection (a protocol error): nothing more goes out
            if isinstance(event, Ping):
                # once the node sent its close frame (the client closed), no pong may follow it
                if ws.state is ConnectionState.OPEN:
                    tcp.write(ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                with contextlib.suppress(LocalProtocolError):
                    if ws.state is ConnectionState.REMOTE_CLOSING:  # the peer's close: answered
                        tcp.write(ws.send(event.response()))
                    elif ws.state is ConnectionState.OPEN:  # a frame wsproto could not read: say why (1002)
                        tcp.write(ws.send(CloseConnection(code=event.code, reason=event.reason)))
                tcp.close()
                return
        self._deliver(received)

    def _client_closed(self) -> bool:
        return self._transport is not None and self._transport.is_closing()

    def _deliver(self, received: list[bytes]) -> None:
        if received and self._client is not None and self._tcp is not None:
            self._client.data_received(received[0] if len(received) == 1 else b"".join(received))


class WebSocketListener:
    """The node's WebSocket port: each connection becomes a client of `server`."""

    def __init__(self, server: ClientPort, settings: WebSocketSettings, default_host: str) -> None:
        self.server = server
        self.settings = settings
        self.host = settings.listen_host(default_host)
        self.port = settings.port
        self.connections: set[_WebSocketConnection] = set()
        self._listening: asyncio.Server | None = None

    async def start(self, listening: socket.socket | None = None) -> None:
        """Serve on `listening` (bound already, gateway/transports/listen.py), or bind the port now."""
        ssl_context = server_context(self.settings.tls) if self.settings.tls is not None else None
        self._listening = await asyncio.get_running_loop().create_server(
            lambda: _WebSocketConnection(self),
            ssl=ssl_context,
            **server_address(listening, self.host, self.settings.port, reuse_port=self.server.reuse_port),
        )
        self.port = self._listening.sockets[0].getsockname()[1]
        log.info("websocket_listening", host=self.host, port=self.port, tls=ssl_context is not None)

    async def stop_accepting(self) -> None:
        """Lame duck mode: no new WebSocket client; the connected ones stay."""
        if self._listening is not None:
            self._listening.close()

    async def stop(self) -> None:
        """Stop listening and close every connection left (the node closes its clients before this)."""
        listening, self._listening = self._listening, None
        if listening is not None:
            listening.close()
        for connection in list(self.connections):
            connection.close()
        if listening is not None:
            await listening.wait_closed()
