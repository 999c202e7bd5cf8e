"""A node of two workers holds `max_connections` for the node, as one nats-server holds it for the
server: with a client on each worker and `max_connections: 2`, the third client is refused with
nats-server's own lines, wherever the kernel sends it; a client leaving makes room again, and a worker
that crashed gives back the room its clients held."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import urllib.error
import urllib.request
from pathlib import Path

from local.ports import HOST
from tests.node.config_file_node import node_from_config
from tests.node.raw_client import RawClient
from tests.node.reference_server import nats_server_from_config

WORKERS = 2
LIMIT = "max_connections: 2\n"
REFUSED = ["-ERR 'maximum connections exceeded'", "<closed>"]
# bounded tries for what has no event to await: the kernel's choice of worker, a close reaching the server
ATTEMPTS = 200


async def try_connect(port: int) -> RawClient | None:
    """An admitted client, or None when the server refused it (INFO, the error, closed; the CONNECT and
    PING sent after the INFO may meet the closed socket and reset the connection before the error is read:
    refusal_lines reads a refusal without sending anything)."""
    client = None
    try:
        client = await RawClient.connect(HOST, port)
        lines = await client.exchange()
    except (ConnectionResetError, BrokenPipeError):
        lines = REFUSED
    if not lines and client is not None:
        return client
    assert lines == REFUSED, lines
    if client is not None:
        await client.close()
    return None


async def admitted(port: int, within: float = 30.0) -> RawClient:
    """A client admitted once the server has seen an earlier one leave, or a crashed worker start again
    (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        client = await try_connect(port)
        if client is not None:
            return client
        await asyncio.sleep(0.05)
    raise AssertionError(f"the server made no room for a client within {within} s")


async def one_client_on_each(port: int, servers: set[str] | None) -> list[RawClient]:
    """Two admitted clients: on the two workers named in `servers`, or any two (one nats-server)."""
    held: dict[str, RawClient] = {}
    kept: list[RawClient] = []
    for _ in range(ATTEMPTS):
        if len(kept) == 2:
            return kept
        client = await admitted(port)
        name = client.info["server_name"]
        if servers is None or (name in servers and name not in held):
            held[name] = client
            kept.append(client)
        else:
            await client.close()
    raise AssertionError(f"no client reached each of {servers}")


async def refusal_lines(port: int) -> list[str]:
    """What a client past the limit reads: INFO, then the error, then the end of the connection."""
    reader, writer = await asyncio.open_connection(HOST, port)
    lines = []
    while line := await asyncio.wait_for(reader.readline(), 10):
        lines.append("INFO" if line.startswith(b"INFO ") else line.decode().rstrip("\r\n"))
    writer.close()
    return [*lines, "<closed>"]


async def limit_scenario(port: int, servers: set[str] | None) -> list[str]:
    clients = await one_client_on_each(port, servers)
    try:
        # every later client is refused, whichever worker the kernel hands it to
        lines = [line for _ in range(6) for line in await refusal_lines(port)]
        await clients.pop().close()
        clients.append(await admitted(port))
        lines.append("room again after one left")
        lines += await refusal_lines(port)
        return lines
    finally:
        for client in clients:
            await client.close()


async def test_max_connections_holds_for_the_node_as_for_one_nats_server(tmp_path: Path) -> None:
    (tmp_path / "ref").mkdir()
    (tmp_path / "jetraft").mkdir()
    async with nats_server_from_config(tmp_path / "ref", LIMIT) as port:
        expected = await limit_scenario(port, None)
    assert expected == [
        *(["INFO", *REFUSED] * 6),
        "room again after one left",
        "INFO",
        *REFUSED,
    ]
    async with node_from_config(tmp_path / "jetraft", LIMIT, workers=WORKERS) as node:
        assert await limit_scenario(node.client_port, {"n1/w0", "n1/w1"}) == expected
        # and /varz shows the setting, as nats-server does (its default, 65536, only when not set)
        with urllib.request.urlopen(f"http://{HOST}:{node.http_port}/varz", timeout=10) as resp:
            assert json.loads(resp.read())["max_connections"] == 2


def worker_pids(http_port: int) -> dict[str, int]:
    """The running workers' PIDs, which /healthz gives healthy or not (503 while one is down)."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{http_port}/healthz", timeout=10) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        body = exc.read()
    return {name: int(pid) for name, pid in json.loads(body)["pids"].items()}


async def test_a_crashed_worker_gives_back_the_room_its_clients_held(tmp_path: Path) -> None:
    async with node_from_config(tmp_path, LIMIT, workers=WORKERS) as node:
        clients = await one_client_on_each(node.client_port, {"n1/w0", "n1/w1"})
        try:
            crashed = next(c for c in clients if c.info["server_name"] == "n1/w1")
            before = worker_pids(node.http_port)
            os.kill(before["n1/w1"], signal.SIGKILL)
            with contextlib.suppress(ConnectionResetError):  # the kernel closed it as its process died
                assert await crashed.read_until_closed() == ["<closed>"]
            # the supervisor starts it again; its slot starts empty: two clients fit, on whichever workers
            for _ in range(ATTEMPTS):
                pids = worker_pids(node.http_port)
                if pids.get("n1/w1") not in (None, before["n1/w1"]) and len(pids) == WORKERS:
                    break
                await asyncio.sleep(0.1)
            clients.remove(crashed)
            clients.append(await admitted(node.client_port))
            for _ in range(6):  # whichever worker each lands on
                assert await refusal_lines(node.client_port) == ["INFO", *REFUSED]
        finally:
            for client in clients:
                await client.close()
