"""Fixtures for the embedded Toxiproxy: the server as a real child process, a TCP echo server, helpers.

toxiproxy-python keeps its server address in class attributes, so the
fixture points it at the child once per module.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.proxy import Proxy

from chaos.toxiproxy import ToxiproxyProcess

HOST = "127.0.0.1"
IO_TIMEOUT = 5.0


@dataclass
class Transcript:
    """What the echo server received on one connection, and whether that connection has ended."""

    received: bytearray = field(default_factory=bytearray)
    ended: threading.Event = field(default_factory=threading.Event)


class _EchoHandler(socketserver.BaseRequestHandler):
    server: EchoServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        transcript = Transcript()
        with self.server.arrived:
            self.server.transcripts.append(transcript)
            self.server.arrived.notify_all()
        try:
            while data := sock.recv(65536):
                transcript.received += data
                sock.sendall(data)
        except OSError:
            pass
        finally:
            transcript.ended.set()


class EchoServer(socketserver.ThreadingTCPServer):
    """Echoes every byte back and keeps a transcript per connection; closes when the client closes."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__((HOST, 0), _EchoHandler)
        self.transcripts: list[Transcript] = []
        self.arrived = threading.Condition()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def wait_connections(self, count: int, timeout: float = IO_TIMEOUT) -> list[Transcript]:
        """The transcripts once `count` connections have arrived (a proxy may dial after its client left)."""
        with self.arrived:
            arrived = self.arrived.wait_for(lambda: len(self.transcripts) >= count, timeout)
        assert arrived, f"{len(self.transcripts)} of {count} connections reached the echo server"
        return list(self.transcripts)

    def __enter__(self) -> EchoServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()


@pytest.fixture(scope="module")
def toxiproxy_process() -> Iterator[ToxiproxyProcess]:
    process = ToxiproxyProcess(seed=7)
    process.start()
    try:
        yield process
    finally:
        process.stop()
        process.kill()


@pytest.fixture
def toxiproxy(toxiproxy_process: ToxiproxyProcess) -> Iterator[Toxiproxy]:
    """The client pointed at the module's server; every proxy is deleted after the test."""
    APIConsumer.host, APIConsumer.port = HOST, toxiproxy_process.port
    client = Toxiproxy()
    try:
        yield client
    finally:
        APIConsumer.host, APIConsumer.port = HOST, toxiproxy_process.port
        client.destroy_all()


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoServer]:
    with EchoServer() as server:
        yield server


def listen_address(proxy: Proxy) -> tuple[str, int]:
    host, port = proxy.listen.rsplit(":", 1)
    return host, int(port)


def connect(proxy: Proxy, timeout: float = IO_TIMEOUT) -> socket.socket:
    sock = socket.create_connection(listen_address(proxy), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    received = bytearray()
    while len(received) < size:
        data = sock.recv(size - len(received))
        if not data:
            raise ConnectionError(f"closed after {len(received)} of {size} bytes")
        received += data
    return bytes(received)


def round_trip(sock: socket.socket, payload: bytes = b"ping") -> float:
    """Seconds to send `payload` through the echo server and get it all back (checked)."""
    started = time.monotonic()
    sock.sendall(payload)
    assert recv_exactly(sock, len(payload)) == payload
    return time.monotonic() - started


def wait_closed(sock: socket.socket) -> tuple[float, bytes, BaseException | None]:
    """Read until the peer closes: seconds it took, bytes read meanwhile, and the error if it was a reset."""
    started = time.monotonic()
    received = bytearray()
    try:
        while data := sock.recv(65536):
            received += data
    except ConnectionResetError as exc:
        return time.monotonic() - started, bytes(received), exc
    return time.monotonic() - started, bytes(received), None
