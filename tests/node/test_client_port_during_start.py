"""A client that connects to a node while it starts is taken at once and served once the node is up, on the
client port and on the WebSocket port (gateway/transports/listen.py). Before, both ports refused
connections for the node's first second, and a reconnecting client waited out its reconnect delay (nats-py's
own WebSocket reconnect tests failed on it)."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from local.ports import HOST, free_port_base

REPO = Path(__file__).resolve().parents[2]
START_BOUND_S = 60.0


async def _first_connection(port: int, deadline: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, float]:
    """The first connection the port takes (tried every few milliseconds), and when it was taken."""
    while True:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
            return reader, writer, time.monotonic()
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.002)


@pytest.mark.parametrize("port_kind", ["client", "websocket"])
async def test_a_connection_made_while_the_node_starts_is_taken_then_served(tmp_path: Path, port_kind: str) -> None:
    base = free_port_base(4)
    client_port, http_port, cluster_port, ws_port = base, base + 1, base + 2, base + 3
    config = tmp_path / "node.conf"
    config.write_text(f"websocket {{ host: {HOST}, port: {ws_port}, no_tls: true }}\n")
    command = [
        sys.executable, "-m", "cluster.node.command", "--name", "n1", "--host", HOST,
        "--port", str(client_port), "--http-port", str(http_port), "--cluster-port", str(cluster_port),
        "--data-dir", str(tmp_path / "data"), "--log-level", "WARNING", "--config", str(config),
    ]  # fmt: skip
    node = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        deadline = time.monotonic() + START_BOUND_S
        port = client_port if port_kind == "client" else ws_port
        reader, writer, taken_at = await _first_connection(port, deadline)
        try:
            if port_kind == "client":
                first = await asyncio.wait_for(reader.readline(), START_BOUND_S)
                served_at = time.monotonic()
                assert first.startswith(b"INFO ")
                writer.write(b"CONNECT {}\r\nPING\r\n")
                assert await asyncio.wait_for(reader.readline(), 10) == b"PONG\r\n"
            else:
                key = base64.b64encode(os.urandom(16)).decode()
                writer.write(
                    (
                        f"GET / HTTP/1.1\r\nHost: {HOST}:{ws_port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                    ).encode()
                )
                status = await asyncio.wait_for(reader.readline(), START_BOUND_S)
                served_at = time.monotonic()
                assert status.startswith(b"HTTP/1.1 101 ")
        finally:
            writer.close()
    finally:
        os.killpg(node.pid, signal.SIGKILL)
        node.wait()
    # The port listened before the node's imports were done: the connection waited in it, rather than being
    # refused until the node could answer at once (then it is served within a millisecond or two).
    assert served_at - taken_at > 0.05, (taken_at, served_at)
