"""What the embedded Toxiproxy costs: round-trip latency and throughput, direct vs through the proxy.

Runs the proxy as a child process (as the chaos tests and `jetraft local up
--toxiproxy` do) and an echo and a sink server in this process. Bounded: a
fixed number of round trips and bytes per case. Figures are wall-clock on
whatever else the machine is doing; compare the rows, not absolute numbers.

    .venv/bin/python bench/toxiproxy_bench.py [--round-trips 2000] [--megabytes 64]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer

from chaos.toxiproxy import ToxiproxyProcess

HOST = "127.0.0.1"
MESSAGE = b"x" * 100
WRITE_SIZE = 64 * 1024


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def _sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # the sender announces its size: a proxy closes both sides on a half-close, like Toxiproxy
    expected = int.from_bytes(await reader.readexactly(8), "big")
    total = 0
    while total < expected and (data := await reader.read(1 << 20)):
        total += len(data)
    writer.write(total.to_bytes(8, "big"))
    await writer.drain()
    writer.close()


async def round_trips(port: int, count: int) -> list[float]:
    reader, writer = await asyncio.open_connection(HOST, port)
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        writer.write(MESSAGE)
        await reader.readexactly(len(MESSAGE))
        samples.append(time.perf_counter() - started)
    writer.close()
    return samples


async def throughput(port: int, megabytes: int) -> float:
    """MB/s for `megabytes` sent one way, counted once the sink confirms every byte arrived."""
    reader, writer = await asyncio.open_connection(HOST, port)
    block = b"\0" * WRITE_SIZE
    total = megabytes * 1024 * 1024
    started = time.perf_counter()
    writer.write(total.to_bytes(8, "big"))
    for _ in range(total // WRITE_SIZE):
        writer.write(block)
        await writer.drain()
    confirmed = int.from_bytes(await reader.readexactly(8), "big")
    elapsed = time.perf_counter() - started
    writer.close()
    assert confirmed == total, (confirmed, total)
    return total / elapsed / 1e6


def _proxy_port(client: Toxiproxy, name: str, upstream_port: int, toxics: Callable[[object], None]) -> int:
    proxy = client.create(upstream=f"{HOST}:{upstream_port}", name=name)
    toxics(proxy)
    return int(proxy.listen.rsplit(":", 1)[1])


def _no_toxics(_proxy: object) -> None:
    pass


def _noop_each_way(proxy: object) -> None:
    for stream in ("upstream", "downstream"):
        proxy.add_toxic(type="noop", stream=stream)  # type: ignore[attr-defined]


def _latency_zero_and_slicer(proxy: object) -> None:
    proxy.add_toxic(type="latency", stream="upstream", attributes={"latency": 0})  # type: ignore[attr-defined]
    proxy.add_toxic(  # type: ignore[attr-defined]
        type="slicer",
        stream="upstream",
        attributes={"average_size": 16384, "size_variation": 4096, "delay": 0},
    )


async def main(round_trip_count: int, megabytes: int) -> None:
    echo = await asyncio.start_server(_echo, HOST, 0)
    sink = await asyncio.start_server(_sink, HOST, 0)
    echo_port = echo.sockets[0].getsockname()[1]
    sink_port = sink.sockets[0].getsockname()[1]
    with ToxiproxyProcess() as process:
        APIConsumer.host, APIConsumer.port = HOST, process.port
        client = Toxiproxy()
        cases: list[tuple[str, int, int]] = [("direct", echo_port, sink_port)]
        for label, toxics in [
            ("proxy, no toxics", _no_toxics),
            ("proxy, noop each way", _noop_each_way),
            ("proxy, latency 0 + slicer 16K", _latency_zero_and_slicer),
        ]:
            slug = label.replace(" ", "_").replace(",", "")
            cases.append(
                (
                    label,
                    _proxy_port(client, f"echo_{slug}", echo_port, toxics),
                    _proxy_port(client, f"sink_{slug}", sink_port, toxics),
                )
            )
        print(f"{'case':<32}{'rtt p50 µs':>12}{'rtt p99 µs':>12}{'MB/s':>10}")
        for label, echo_via, sink_via in cases:
            samples = sorted(await round_trips(echo_via, round_trip_count))
            p50 = statistics.median(samples) * 1e6
            p99 = samples[int(len(samples) * 0.99) - 1] * 1e6
            rate = await throughput(sink_via, megabytes)
            print(f"{label:<32}{p50:>12.0f}{p99:>12.0f}{rate:>10.1f}")
        client.destroy_all()
    echo.close()
    sink.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--round-trips", type=int, default=2000)
    parser.add_argument("--megabytes", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(main(args.round_trips, args.megabytes))
