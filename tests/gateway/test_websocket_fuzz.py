"""Any bytes on the WebSocket port, before the upgrade or after it, in any split: an HTTP answer, frames for
the client, or a closed connection; never an exception out of the connection (which would crash the
node's handling of it and log a traceback per client)."""

from __future__ import annotations

import asyncio
import base64
import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from wsproto import ConnectionType
from wsproto.connection import Connection
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage

from gateway.transports.websocket import WebSocketListener, _WebSocketConnection
from gateway.transports.websocket_settings import WebSocketSettings

KEY = base64.b64encode(b"0123456789abcdef").decode()
UPGRADE = (
    "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
).encode()


class _Socket:
    """The TCP transport under the WebSocket: what the node wrote, and whether it closed."""

    def __init__(self) -> None:
        self.written = bytearray()
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed or not data, "written after close"
        self.written += data

    def close(self) -> None:
        self.closed = True

    abort = close

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


# a message holding this makes the client close its connection at once, as a client connection does after
# a protocol error (-ERR, then close)
QUIT = b"QUIT"


class _Client(asyncio.Protocol):
    """The NATS client a WebSocket becomes: the protocol bytes it is handed. It answers each read later,
    from the loop, as a client connection answers commands it has queued for its next slice."""

    def __init__(self) -> None:
        self.received = bytearray()
        self.lost = False
        self.transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(b"INFO {}\r\n")  # as a client connection does at once

    def data_received(self, data: bytes) -> None:
        assert isinstance(data, bytes)
        self.received += data
        transport = self.transport
        assert transport is not None
        asyncio.get_running_loop().call_soon(transport.write, b"+OK\r\n")
        if QUIT in data:
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True


class _Port:
    reuse_port = False

    def __init__(self) -> None:
        self.clients: list[_Client] = []

    def new_websocket_connection(self) -> asyncio.Protocol:
        self.clients.append(_Client())
        return self.clients[-1]


def _feed(chunks: list[bytes], *, compression: bool) -> tuple[_Socket, _Port]:
    """A connection of the port fed `chunks` one read at a time, then the end of its input."""

    async def run() -> tuple[_Socket, _Port]:
        errors: list[dict[str, Any]] = []
        asyncio.get_running_loop().set_exception_handler(lambda _loop, context: errors.append(context))
        port = _Port()
        settings_ = WebSocketSettings(port=8080, no_tls=True, compression=compression, allowed_origins=("http://a.example",))
        connection = _WebSocketConnection(WebSocketListener(port, settings_, "127.0.0.1"))  # type: ignore[arg-type]
        sock = _Socket()
        connection.connection_made(sock)  # type: ignore[arg-type]
        for chunk in chunks:
            if sock.closed:
                break
            connection.data_received(chunk)
            await asyncio.sleep(0)  # the client's answers to this read
        if not sock.closed:
            connection.eof_received()
        await asyncio.sleep(0)
        connection.connection_lost(None)
        assert errors == [], errors  # an exception in a callback (the loop would only log it)
        return sock, port

    return asyncio.run(run())


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.lists(st.integers(min_value=0), max_size=6))
def test_any_bytes_before_the_upgrade_get_an_http_answer_or_nothing(data: bytes, cuts: list[int]) -> None:
    sock, port = _feed(_split(data, cuts), compression=False)
    assert not sock.written or sock.written.startswith(b"HTTP/1.1 ")
    assert not port.clients or sock.written.startswith(b"HTTP/1.1 101 ")


_client_events = st.lists(
    st.one_of(
        st.binary(max_size=200).map(lambda data: BytesMessage(data=data)),
        st.text(max_size=50).map(lambda text: TextMessage(data=text)),
        st.binary(max_size=100).map(lambda payload: Ping(payload=payload)),
        st.just(CloseConnection(code=1000)),
        st.just(BytesMessage(data=QUIT)),
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(_client_events, st.binary(max_size=100), st.lists(st.integers(min_value=0), max_size=6), st.booleans())
def test_frames_of_any_kind_and_garbage_after_the_upgrade_never_raise(
    events: list[Any], garbage: bytes, cuts: list[int], compression: bool
) -> None:
    client = Connection(ConnectionType.CLIENT)  # frames as a browser masks them (no compression offered)
    frames = b""
    for event in events:
        if client.state.name != "OPEN":
            break
        frames += client.send(event)
    sock, port = _feed([UPGRADE, *_split(frames + garbage, cuts)], compression=compression)
    assert sock.written.startswith(b"HTTP/1.1 101 ")
    assert len(port.clients) == 1 and port.clients[0].lost
    # every message up to the end of the connection (the client's close frame, or the message the NATS
    # client closed on) reached the NATS client, in order (garbage after them may end the connection, or
    # rarely read as one more frame)
    sent = b""
    for event in events:
        if isinstance(event, CloseConnection):
            break
        if isinstance(event, BytesMessage):
            sent += event.data
        elif isinstance(event, TextMessage):
            sent += event.data.encode()
        if QUIT in sent:
            break
    assert bytes(port.clients[0].received).startswith(sent)


def test_a_ping_behind_a_message_that_ends_the_client_is_not_answered() -> None:
    """The client closed on a message (the node's close frame went out), and a ping came in the same read:
    no pong may follow a close frame, and answering it raised out of the connection."""
    client = Connection(ConnectionType.CLIENT)
    frames = client.send(BytesMessage(data=QUIT)) + client.send(Ping(payload=b"late"))
    sock, port = _feed([UPGRADE, frames], compression=False)
    assert port.clients[0].received == QUIT
    assert sock.closed
