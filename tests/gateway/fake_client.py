"""A ClientConnection on a transport that records what the connection does to it, for unit tests."""

from __future__ import annotations

from gateway.connection import ClientConnection
from gateway.server import GatewayServer


class RecordingTransport:
    """The parts of an asyncio transport a ClientConnection uses; keeps every write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.reading = True
        self.pauses = 0

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def get_extra_info(self, name: str) -> object:
        return ("127.0.0.1", 40000) if name == "peername" else None

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False
        self.pauses += 1

    def resume_reading(self) -> None:
        self.reading = True


def connect(server: GatewayServer, client_id: int) -> tuple[ClientConnection, RecordingTransport]:
    connection = ClientConnection(server, client_id)
    transport = RecordingTransport()
    connection.connection_made(transport)  # type: ignore[arg-type]
    connection.data_received(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
    transport.writes.clear()
    return connection, transport
