"""1,000 client connections on one node, each subscribed, and fan-out to all of them: jetraft and nats-server.

    .venv/bin/python bench/many_connections.py [--connections 1000] [--burst 200] [--rounds 100]
        [--servers nats-server,jetraft] [--json rows.json]

For each server in turn (one node: jetraft alone, nats-server without a cluster block; one at a time, the
machine is shared), one client process opens N connections as raw asyncio sockets speaking the client
protocol (INFO, CONNECT, SUB, PING/PONG; nats-py's per-connection tasks would make the client, not the
server, the bottleneck at this count), at most 50 handshakes at a time, each subscribed to `fan.out`
and answering the server's PINGs. Then one more connection publishes to `fan.out`:
- a burst of `--burst` messages (128 bytes) as fast as it can: deliveries/s until every subscriber has
  every message;
- `--rounds` single messages, each after the previous one reached all N: per-delivery latency (publish
  to a subscriber's read, one clock: one process) and the time until the last subscriber has it.
The node's RSS (/proc/<pid>/status) before, with the connections open and after the fan-out, and its CPU
(/proc/<pid>/stat) over the connect and the fan-out phases.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlparse

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from idle_streams import cpu_seconds, rss_mib  # noqa: E402
from jetstream_bench import JETRAFT, NATS_DEFAULT, RunningCluster, jetraft_cluster  # noqa: E402
from stream_create import nats_server_alone  # noqa: E402

DEFAULT_NATS = Path(sys.executable).with_name("nats-server")  # the venv's, beside its python
SUBJECT = b"fan.out"
PAYLOAD_BYTES = 128
CONCURRENT_HANDSHAKES = 50
WAIT_S = 120.0


class Subscriber(asyncio.Protocol):
    """One connection: handshake, SUB, then counts MSGs and records each one's latency (publish to read)."""

    def __init__(self, fanout: FanOut) -> None:
        self.fanout = fanout
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.ready = asyncio.get_running_loop().create_future()
        self.expect_bytes = 0  # payload + CRLF of the MSG being read, when > 0
        self.sent_connect = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.fanout.lost += 1
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(f"closed during the handshake: {exc!r}"))

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        self.buffer += data
        while True:
            if self.expect_bytes:
                if len(self.buffer) < self.expect_bytes:
                    return
                payload = bytes(self.buffer[: self.expect_bytes - 2])
                del self.buffer[: self.expect_bytes]
                self.expect_bytes = 0
                self.fanout.delivered(now - int.from_bytes(payload[:8], "big"))
                continue
            end = self.buffer.find(b"\r\n")
            if end < 0:
                return
            line = bytes(self.buffer[:end])
            del self.buffer[: end + 2]
            self.control(line)

    def control(self, line: bytes) -> None:
        assert self.transport is not None
        if line.startswith(b"MSG "):
            self.expect_bytes = int(line.rsplit(b" ", 1)[1]) + 2
        elif line == b"PING":
            self.transport.write(b"PONG\r\n")
        elif line.startswith(b"INFO "):
            if not self.sent_connect:
                self.sent_connect = True
                self.transport.write(
                    b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\nSUB '
                    + SUBJECT
                    + b" 1\r\nPING\r\n"
                )
        elif line == b"PONG":
            if not self.ready.done():
                self.ready.set_result(None)
        elif line.startswith(b"-ERR"):
            self.fanout.errors.append(line.decode())


@dataclass
class FanOut:
    """What all the subscribers received: a count, and the latencies while recording."""

    count: int = 0
    lost: int = 0
    recording: bool = False
    latencies_ns: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    target: int = 0
    reached: asyncio.Event = field(default_factory=asyncio.Event)

    def delivered(self, latency_ns: int) -> None:
        self.count += 1
        if self.recording:
            self.latencies_ns.append(latency_ns)
        if self.count >= self.target:
            self.reached.set()

    async def wait_for(self, total: int) -> None:
        self.target = total
        if self.count < total:
            self.reached.clear()
            await asyncio.wait_for(self.reached.wait(), WAIT_S)


@dataclass(slots=True)
class Row:
    server: str
    connections: int
    connect_seconds: float = 0.0
    handshake_p50_ms: float = 0.0
    handshake_p99_ms: float = 0.0
    connect_cpu_percent: float = 0.0
    burst_deliveries_per_s: float = 0.0
    fanout_cpu_percent: float = 0.0
    client_cpu_percent: float = 0.0  # this process's, over the fan-out: the client's share of the bottleneck
    node_cpu_us_per_delivery: float = 0.0
    latency_p50_ms: float = 0.0
    latency_p99_ms: float = 0.0
    last_delivery_p50_ms: float = 0.0
    last_delivery_p99_ms: float = 0.0
    rss_mib_idle: float = 0.0
    rss_mib_connected: float = 0.0
    rss_mib_after: float = 0.0
    lost_connections: int = 0
    errors: list[str] = field(default_factory=list)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@contextlib.contextmanager
def start(server: str, nats_binary: Path) -> Iterator[RunningCluster]:
    if server == NATS_DEFAULT:
        with nats_server_alone(nats_binary) as cluster:
            yield cluster
    else:
        with jetraft_cluster((), nodes=1) as cluster:
            yield cluster


def stamped(padding: bytes) -> bytes:
    return time.perf_counter_ns().to_bytes(8, "big") + padding


async def measure(server: str, cluster: RunningCluster, args: argparse.Namespace) -> Row:
    loop = asyncio.get_running_loop()
    address = urlparse(cluster.urls[0])
    host, port = address.hostname, address.port
    pid = cluster.pids[0]
    row = Row(server, args.connections, rss_mib_idle=round(rss_mib(pid), 1))
    fanout = FanOut()
    limit = asyncio.Semaphore(CONCURRENT_HANDSHAKES)
    handshakes: list[float] = []
    transports: list[asyncio.BaseTransport] = []

    async def open_one() -> None:
        async with limit:
            began = time.perf_counter()
            transport, protocol = await loop.create_connection(lambda: Subscriber(fanout), host, port)
            transports.append(transport)
            await asyncio.wait_for(protocol.ready, WAIT_S)
            handshakes.append(time.perf_counter() - began)

    cpu_before = cpu_seconds(pid)
    began = time.perf_counter()
    await asyncio.gather(*(open_one() for _ in range(args.connections)))
    row.connect_seconds = round(time.perf_counter() - began, 2)
    row.connect_cpu_percent = round(100 * (cpu_seconds(pid) - cpu_before) / row.connect_seconds, 1)
    row.handshake_p50_ms = round(1000 * statistics.median(handshakes), 2)
    row.handshake_p99_ms = round(1000 * percentile(handshakes, 0.99), 2)
    row.rss_mib_connected = round(rss_mib(pid), 1)

    reader, writer = await asyncio.open_connection(host, port)
    await reader.readline()  # INFO
    writer.write(b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\nPING\r\n')
    while not (await asyncio.wait_for(reader.readline(), WAIT_S)).startswith(b"PONG"):
        pass
    padding = b"x" * (PAYLOAD_BYTES - 8)
    header = b"PUB " + SUBJECT + f" {PAYLOAD_BYTES}\r\n".encode()

    cpu_before = cpu_seconds(pid)
    client_before = time.process_time()
    began = time.perf_counter()
    for _ in range(args.burst):
        writer.write(header + stamped(padding) + b"\r\n")
    await writer.drain()
    await fanout.wait_for(args.burst * args.connections)
    burst_s = time.perf_counter() - began
    row.burst_deliveries_per_s = round(args.burst * args.connections / burst_s)

    fanout.recording = True
    last_delivery: list[float] = []
    rounds_began = time.perf_counter()
    for round_no in range(args.rounds):
        sent = time.perf_counter()
        writer.write(header + stamped(padding) + b"\r\n")
        await fanout.wait_for((args.burst + round_no + 1) * args.connections)
        last_delivery.append(time.perf_counter() - sent)
    fanout_s = burst_s + time.perf_counter() - rounds_began
    cpu = cpu_seconds(pid) - cpu_before
    row.fanout_cpu_percent = round(100 * cpu / fanout_s, 1)
    row.client_cpu_percent = round(100 * (time.process_time() - client_before) / fanout_s, 1)
    row.node_cpu_us_per_delivery = round(1e6 * cpu / ((args.burst + args.rounds) * args.connections), 2)
    latencies_ms = [ns / 1e6 for ns in fanout.latencies_ns]
    row.latency_p50_ms = round(statistics.median(latencies_ms), 2)
    row.latency_p99_ms = round(percentile(latencies_ms, 0.99), 2)
    row.last_delivery_p50_ms = round(1000 * statistics.median(last_delivery), 2)
    row.last_delivery_p99_ms = round(1000 * percentile(last_delivery, 0.99), 2)
    row.rss_mib_after = round(rss_mib(pid), 1)
    row.lost_connections = fanout.lost
    row.errors = fanout.errors[:10]
    writer.close()
    for transport in transports:
        transport.close()
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--burst", type=int, default=200, help="messages published back to back")
    parser.add_argument("--rounds", type=int, default=100, help="messages published one fan-out at a time")
    parser.add_argument("--servers", default=f"{NATS_DEFAULT},{JETRAFT}")
    parser.add_argument("--nats-server", type=Path, default=DEFAULT_NATS)
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = args.connections + 100
    if soft < needed:  # one descriptor per connection in this process, and the node's (it inherits the limit)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, needed), hard))
    rows = []
    for server in args.servers.split(","):
        with start(server, args.nats_server) as cluster:
            rows.append(asyncio.run(measure(server, cluster, args)))
        print(json.dumps(asdict(rows[-1])), flush=True)
    print(
        "| server | connections | connect all | handshake p50 / p99 ms | node CPU connecting "
        "| burst deliveries/s | delivery latency p50 / p99 ms | last of N p50 / p99 ms | node / client CPU fan-out "
        "| node CPU us/delivery | RSS MiB idle / connected / after |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row.server} | {row.connections:,} | {row.connect_seconds} s "
            f"| {row.handshake_p50_ms} / {row.handshake_p99_ms} | {row.connect_cpu_percent}% "
            f"| {row.burst_deliveries_per_s:,.0f} | {row.latency_p50_ms} / {row.latency_p99_ms} "
            f"| {row.last_delivery_p50_ms} / {row.last_delivery_p99_ms} "
            f"| {row.fanout_cpu_percent}% / {row.client_cpu_percent}% "
            f"| {row.node_cpu_us_per_delivery} | {row.rss_mib_idle} / {row.rss_mib_connected} / {row.rss_mib_after} |"
        )
        if row.lost_connections or row.errors:
            print(f"- {row.server}: {row.lost_connections} connections lost; errors {row.errors}")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))
    return 1 if any(row.lost_connections or row.errors for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
