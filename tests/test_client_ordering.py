"""The order nats-py puts SUB and PING on the wire, with and without tests/conftest.py's patch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import nats
import pytest
from nats.aio.client import Client

from local.ports import HOST
from tests.conftest import ORIGINAL_SEND_PING

INFO = b'INFO {"server_id":"FAKE","version":"2.15.1","proto":1,"headers":true,"max_payload":1048576}\r\n'


@pytest.fixture
async def wire() -> AsyncIterator[tuple[int, bytearray]]:
    """A server that answers each PING with a PONG and keeps every byte a client sent after CONNECT's PING."""
    received = bytearray()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(INFO)
        connected = False
        while line := await reader.readline():
            if line == b"PING\r\n":
                writer.write(b"PONG\r\n")
                await writer.drain()
                if not connected:
                    connected = True
                    continue
            if connected:
                received.extend(line)

    server = await asyncio.start_server(serve, HOST, 0)
    try:
        yield server.sockets[0].getsockname()[1], received
    finally:
        server.close()


async def _subscribe_then_flush(port: int, received: bytearray) -> bytes:
    nc = await nats.connect(f"nats://{HOST}:{port}", allow_reconnect=False)
    try:
        await nc.subscribe("greet")
        await nc.flush()
        await nc.flush()  # the second PONG: whatever the order, the SUB has reached the server by now
        return bytes(received)
    finally:
        await nc.close()


async def test_a_flush_after_a_subscribe_puts_the_sub_on_the_wire_first(wire: tuple[int, bytearray]) -> None:
    port, received = wire
    sent = await _subscribe_then_flush(port, received)
    assert sent.startswith(b"SUB greet  1\r\nPING\r\n"), sent


async def test_without_the_patch_nats_py_sends_the_ping_first(
    wire: tuple[int, bytearray], monkeypatch: pytest.MonkeyPatch
) -> None:
    """nats-py's own order (2.16): PING first. A later nats-py that keeps the order itself is skipped
    here, with the word that tests/conftest.py's patch can go (pyproject takes any nats-py >= 2.16)."""
    if ORIGINAL_SEND_PING is None:
        pytest.skip("this nats-py has no _send_ping: tests/conftest.py's patch is not installed")
    monkeypatch.setattr(Client, "_send_ping", ORIGINAL_SEND_PING)
    port, received = wire
    sent = await _subscribe_then_flush(port, received)
    if sent.startswith(b"SUB greet  1\r\nPING\r\n"):
        pytest.skip("this nats-py puts SUB before PING itself: tests/conftest.py's patch can go")
    assert sent.startswith(b"PING\r\nSUB greet  1\r\n"), sent
