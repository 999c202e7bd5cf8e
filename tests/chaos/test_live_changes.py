"""Toxics added, updated and removed on live connections: effects start and stop at once, no byte is
lost or reordered. The server runs in-process here, on the test's own event loop; the client is still
toxiproxy-python over HTTP (in a worker thread, since it blocks).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.proxy import Proxy

from chaos.toxiproxy import ToxiproxyServer
from tests.chaos.conftest import HOST, EchoServer, listen_address

CLOCK_SLACK = 0.005


@pytest.fixture
async def server() -> AsyncIterator[ToxiproxyServer]:
    async with ToxiproxyServer(HOST, 0, seed=11) as running:
        APIConsumer.host, APIConsumer.port = HOST, running.port
        yield running


async def call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a blocking toxiproxy-python call without blocking the loop the server runs on."""
    return await asyncio.to_thread(function, *args, **kwargs)


async def open_proxy(name: str, upstream: str) -> tuple[Proxy, asyncio.StreamReader, asyncio.StreamWriter]:
    proxy = await call(Toxiproxy().create, upstream=upstream, name=name)
    reader, writer = await asyncio.open_connection(*listen_address(proxy))
    return proxy, reader, writer


async def timed_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, payload: bytes) -> float:
    started = time.monotonic()
    writer.write(payload)
    assert await asyncio.wait_for(reader.readexactly(len(payload)), 10) == payload
    return time.monotonic() - started


async def test_latency_added_to_a_live_connection_delays_only_later_data(
    server: ToxiproxyServer, echo: EchoServer
) -> None:
    proxy, reader, writer = await open_proxy("live", echo.address)
    try:
        assert await timed_echo(reader, writer, b"before") < 0.15
        await call(proxy.add_toxic, name="lag", type="latency", attributes={"latency": 200})
        assert await timed_echo(reader, writer, b"during") >= 0.2 - CLOCK_SLACK
        await call(proxy.destroy_toxic, "lag")
        assert await timed_echo(reader, writer, b"after") < 0.15
    finally:
        writer.close()


async def test_removing_latency_releases_held_data_promptly(
    server: ToxiproxyServer, echo: EchoServer
) -> None:
    proxy, reader, writer = await open_proxy("release", echo.address)
    try:
        await call(proxy.add_toxic, name="lag", type="latency", attributes={"latency": 5000})
        started = time.monotonic()
        writer.write(b"held back")
        echoed = asyncio.ensure_future(reader.readexactly(9))
        done, _ = await asyncio.wait([echoed], timeout=0.2)
        assert not done, "the latency toxic let data through early"
        await call(proxy.destroy_toxic, "lag")
        assert await asyncio.wait_for(echoed, 2) == b"held back"
        assert time.monotonic() - started < 2
    finally:
        writer.close()


async def test_updating_a_toxic_applies_to_live_connections(
    server: ToxiproxyServer, echo: EchoServer
) -> None:
    proxy, reader, writer = await open_proxy("retuned", echo.address)
    try:
        await call(proxy.add_toxic, name="lag", type="latency", attributes={"latency": 50})
        assert 0.05 - CLOCK_SLACK <= await timed_echo(reader, writer, b"x") < 0.2 + 0.4
        await call(APIConsumer.post, "/proxies/retuned/toxics/lag", json={"attributes": {"latency": 250}})
        assert await timed_echo(reader, writer, b"y") >= 0.25 - CLOCK_SLACK
        await call(APIConsumer.post, "/proxies/retuned/toxics/lag", json={"toxicity": 0})
        assert await timed_echo(reader, writer, b"z") < 0.2
    finally:
        writer.close()


async def test_limit_data_counts_across_updates(server: ToxiproxyServer, echo: EchoServer) -> None:
    """The bytes already let through stay counted when the limit is raised."""
    proxy, reader, writer = await open_proxy("budget", echo.address)
    try:
        await call(proxy.add_toxic, name="cap", type="limit_data", attributes={"bytes": 10})
        await timed_echo(reader, writer, b"12345678")
        await call(APIConsumer.post, "/proxies/budget/toxics/cap", json={"attributes": {"bytes": 12}})
        writer.write(b"abcdef")
        assert await asyncio.wait_for(reader.read(), 5) == b"abcd"
    finally:
        writer.close()


async def test_no_byte_lost_or_reordered_while_toxics_come_and_go(
    server: ToxiproxyServer, echo: EchoServer
) -> None:
    proxy, reader, writer = await open_proxy("churn", echo.address)
    rng = random.Random(3)
    total = 1024 * 1024
    pattern = rng.randbytes(total)
    client = Toxiproxy()
    candidates: list[dict[str, Any]] = [
        {"type": "latency", "attributes": {"latency": 15, "jitter": 10}},
        {"type": "slicer", "attributes": {"average_size": 700, "size_variation": 300, "delay": 100}},
        {"type": "bandwidth", "attributes": {"rate": 20_000}},
        {"type": "noop"},
        {"type": "slow_close", "attributes": {"delay": 10}},
        {"type": "limit_data", "attributes": {"bytes": 10 * total}},
        {"type": "latency", "toxicity": 0.5, "attributes": {"latency": 5}},
    ]

    async def send() -> None:
        # paced, so that the toxics change many times while bytes are in flight
        for offset in range(0, total, 8 * 1024):
            writer.write(pattern[offset : offset + 8 * 1024])
            await writer.drain()
            await asyncio.sleep(0.01)

    async def churn(receiving: asyncio.Future[bytes]) -> int:
        changes = 0
        while not receiving.done():
            spec = rng.choice(candidates)
            stream = rng.choice(["upstream", "downstream"])
            name = f"{spec['type']}_{stream}"
            if await call(proxy.get_toxic, name) is None:
                await call(proxy.add_toxic, stream=stream, **spec)
            elif rng.random() < 0.3 and "attributes" in spec and spec["type"] == "latency":
                await call(
                    APIConsumer.post, f"/proxies/churn/toxics/{name}", json={"attributes": {"latency": 1}}
                )
            else:
                await call(proxy.destroy_toxic, name)
            changes += 1
        await call(client.reset)
        return changes

    sending = asyncio.create_task(send())
    receiving = asyncio.ensure_future(asyncio.wait_for(reader.readexactly(total), 30))
    churning = asyncio.create_task(churn(receiving))
    try:
        received = await receiving
        await sending
        changes = await churning
        assert changes >= 20
    finally:
        writer.close()
        sending.cancel()
        churning.cancel()
    assert received == pattern
