"""A stream of millions of small messages on one node, then a restart: jetraft and nats-server 2.15.1.

    .venv/bin/python bench/long_stream.py [--messages 10000000] [--window 2000] [--size 32]
        [--servers nats-server,jetraft] [--json rows.json]

For each server in turn (one node, an R1 file stream with Direct Get allowed; one server at a time, the
machine is shared), one raw-socket client publishes `--messages` messages of `--size` bytes to the
stream, pipelined: each PUB carries a reply subject and at most `--window` await their PubAck (the
client protocol spoken directly, so that the client's own cost does not set the rate). The node's RSS is
sampled from /proc every half second during the fill and once after it. Then the node is stopped
(SIGTERM; the time it takes to exit is reported) and started again on the same data, and the script
times from the new process's start until STREAM.INFO reports the full count and a Direct Get of the
last message returns it, and reads the RSS once more; then it times one publish with a Nats-Msg-Id (the
first one needs the duplicate window, which jetraft reads when first needed) and reads the RSS again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import nats  # noqa: E402
from idle_streams import rss_mib  # noqa: E402
from jetstream_bench import (  # noqa: E402 - it puts the repository on sys.path, for local.*
    HOST,
    JETRAFT,
    NATS_DEFAULT,
    STARTUP_TIMEOUT_S,
    LocalCluster,
    free_ports,
    nats_server_healthy,
    plan_free_nodes,
)

DEFAULT_NATS = Path(sys.executable).with_name("nats-server")  # the venv's, beside its python
STREAM = "LONG"
SUBJECT = "long.msgs"
INBOX = "_INBOX.fill"
RSS_EVERY_S = 0.5
RECOVERY_TIMEOUT_S = 600.0


class Node(Protocol):
    """One server process that can be stopped and started again on the same data."""

    url: str
    pid: int

    def start(self) -> None: ...
    def stop(self) -> float: ...  # seconds from SIGTERM to exit


class JetraftNode:
    def __init__(self, directory: Path) -> None:
        self.spec = plan_free_nodes(1, 0, workers=1)[0]
        self.cluster = LocalCluster([self.spec], directory, extra_args=["--log-level", "WARNING"])
        self.url = self.spec.client_url

    def start(self) -> None:
        self.cluster.start_node(self.spec.name)
        self.pid = self.cluster.procs[self.spec.name].pid

    def wait_ready(self) -> None:
        self.cluster.wait_ready(STARTUP_TIMEOUT_S)

    def stop(self) -> float:
        began = time.perf_counter()
        self.cluster.stop_node(self.spec.name, grace=120)
        return time.perf_counter() - began


class NatsServerNode:
    def __init__(self, binary: Path, directory: Path) -> None:
        self.client_port, self.http_port = free_ports(2)
        self.directory = directory
        self.cmd = [
            str(binary), "-a", HOST, "-p", str(self.client_port), "-m", str(self.http_port),
            "-js", "-sd", str(directory / "store"),
        ]  # fmt: skip
        self.url = f"nats://{HOST}:{self.client_port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.directory / "server.log", "ab") as log:
            self.proc = subprocess.Popen(
                self.cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.pid = self.proc.pid

    def wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        # no readiness event to await from another process: poll its /healthz
        while not nats_server_healthy(self.http_port):
            if self.proc is None or self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nats-server did not become healthy; log in {self.directory}")
            time.sleep(0.05)

    def stop(self) -> float:
        assert self.proc is not None
        began = time.perf_counter()
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        return time.perf_counter() - began


@contextlib.contextmanager
def node_for(server: str, nats_binary: Path) -> Iterator[JetraftNode | NatsServerNode]:
    with tempfile.TemporaryDirectory(prefix="longstream-") as tmp:
        node: JetraftNode | NatsServerNode = (
            NatsServerNode(nats_binary, Path(tmp)) if server == NATS_DEFAULT else JetraftNode(Path(tmp))
        )
        node.start()
        try:
            node.wait_ready()
            yield node
        finally:
            node.stop()


@dataclass(slots=True)
class Row:
    server: str
    messages: int
    size: int
    fill_seconds: float = 0.0
    fill_msgs_per_s: float = 0.0
    rss_mib_start: float = 0.0
    rss_mib_peak_during_fill: float = 0.0
    rss_mib_after_fill: float = 0.0
    rss_mib_by_tenth: dict[str, float] = field(default_factory=dict)  # at 10%, 20%, ... of the fill
    disk_mib: float = 0.0
    stop_seconds: float = 0.0
    restart_to_info_seconds: float = 0.0
    restart_to_direct_get_seconds: float = 0.0
    rss_mib_after_restart: float = 0.0
    # after the restart: one publish carrying a Nats-Msg-Id, which needs the duplicate window read
    first_msg_id_publish_seconds: float = 0.0
    rss_mib_after_first_msg_id: float = 0.0
    publish_errors: int = 0
    duplicate_window_s: float | None = None


class AckCounter(asyncio.Protocol):
    """The publisher's connection: counts the PubAcks arriving on its inbox, and the errors among them."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.expect = 0
        self.acks = 0
        self.errors = 0
        self.first_error = b""
        self.progress = asyncio.Event()
        self.pong = asyncio.Event()
        self.closed = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(exc)
        self.progress.set()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            if self.expect:
                if len(self.buffer) < self.expect:
                    break
                payload = bytes(self.buffer[: self.expect - 2])
                del self.buffer[: self.expect]
                self.expect = 0
                self.acks += 1
                if b'"error"' in payload:
                    self.errors += 1
                    self.first_error = self.first_error or payload
                continue
            end = self.buffer.find(b"\r\n")
            if end < 0:
                break
            line = bytes(self.buffer[:end])
            del self.buffer[: end + 2]
            if line.startswith(b"MSG "):
                self.expect = int(line.rsplit(b" ", 1)[1]) + 2
            elif line == b"PONG":
                self.pong.set()
            elif line == b"PING" and self.transport is not None:
                # the server pings every 2 minutes and closes a connection that leaves 2 unanswered
                self.transport.write(b"PONG\r\n")
        self.progress.set()


async def fill(
    node: Node,
    count: int,
    size: int,
    window: int,
    row: Row,
    data_dir: Path,
    duplicate_window: float | None = None,
) -> None:
    nc = await nats.connect(node.url)
    try:
        js = nc.jetstream(timeout=30)
        await js.add_stream(
            name=STREAM,
            subjects=[SUBJECT],
            num_replicas=1,
            allow_direct=True,
            duplicate_window=duplicate_window,
        )
    finally:
        await nc.close()
    address = urlparse(node.url)
    loop = asyncio.get_running_loop()
    transport, acks = await loop.create_connection(AckCounter, address.hostname, address.port)
    assert isinstance(transport, asyncio.Transport)
    transport.write(f'CONNECT {{"verbose":false,"pedantic":false}}\r\nSUB {INBOX} 1\r\nPING\r\n'.encode())
    await asyncio.wait_for(acks.pong.wait(), 30)
    row.rss_mib_start = rss_mib(node.pid)
    peak = row.rss_mib_start
    next_sample = time.monotonic()
    frame = f"PUB {SUBJECT} {INBOX} {size}\r\n".encode() + b"m" * size + b"\r\n"
    sent = 0
    began = time.perf_counter()
    while acks.acks < count:
        if acks.closed.done():
            raise ConnectionError(f"the server closed the publisher's connection: {acks.closed.result()!r}")
        burst = min(count - sent, window - (sent - acks.acks))
        if burst > 0:
            transport.write(frame * burst)
            sent += burst
        acks.progress.clear()
        await asyncio.wait_for(acks.progress.wait(), 60)
        if time.monotonic() >= next_sample:
            next_sample = time.monotonic() + RSS_EVERY_S
            rss = rss_mib(node.pid)
            peak = max(peak, rss)
            tenth = f"{10 * (10 * acks.acks // count)}%"
            if acks.acks * 10 >= count and tenth not in row.rss_mib_by_tenth:
                row.rss_mib_by_tenth[tenth] = round(rss, 1)
    row.fill_seconds = round(time.perf_counter() - began, 1)
    row.fill_msgs_per_s = round(count / row.fill_seconds)
    row.publish_errors = acks.errors
    if acks.errors:
        print(f"{row.server}: {acks.errors} publish errors, first {acks.first_error!r}", file=sys.stderr)
    transport.close()
    row.rss_mib_peak_during_fill = round(peak, 1)
    row.rss_mib_after_fill = round(rss_mib(node.pid), 1)
    row.disk_mib = round(sum(f.stat().st_size for f in data_dir.rglob("*") if f.is_file()) / 2**20, 1)


async def ignore_error(exc: Exception) -> None:
    """nats-py logs every refused connection while the node starts; the loop below retries them."""


async def recovered(url: str, count: int, row: Row, began: float) -> None:
    """Poll (bounded) until STREAM.INFO shows `count` messages, then until the last one reads back."""
    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    nc = None
    while nc is None:
        try:
            nc = await nats.connect(
                url, connect_timeout=1, max_reconnect_attempts=0, allow_reconnect=False, error_cb=ignore_error
            )
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
    try:
        js = nc.jetstream(timeout=2)
        while not row.restart_to_info_seconds:
            with contextlib.suppress(Exception):
                info = await js.stream_info(STREAM)
                if info.state.messages == count and info.state.last_seq == count:
                    row.restart_to_info_seconds = round(time.perf_counter() - began, 2)
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("STREAM.INFO never showed the full count")
            await asyncio.sleep(0.05)
        while not row.restart_to_direct_get_seconds:
            with contextlib.suppress(Exception):
                msg = await js.get_msg(STREAM, count, direct=True)
                if msg.seq == count and msg.data == b"m" * row.size:
                    row.restart_to_direct_get_seconds = round(time.perf_counter() - began, 2)
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("the last message never read back")
            await asyncio.sleep(0.05)
    finally:
        await nc.close()


async def first_msg_id_publish(url: str, row: Row) -> None:
    """Time one publish with a Nats-Msg-Id, the first since the restart (bounded by its timeout)."""
    nc = await nats.connect(url, error_cb=ignore_error)
    try:
        began = time.perf_counter()
        ack = await nc.jetstream().publish(
            SUBJECT, b"m" * row.size, timeout=120, headers={"Nats-Msg-Id": "after"}
        )
        row.first_msg_id_publish_seconds = round(time.perf_counter() - began, 2)
        assert ack.seq == row.messages + 1 and not ack.duplicate, ack
    finally:
        await nc.close()


def measure(server: str, args: argparse.Namespace) -> Row:
    row = Row(server, args.messages, args.size, duplicate_window_s=args.duplicate_window)
    with node_for(server, args.nats_server) as node:
        data_dir = node.cluster.data_dir if isinstance(node, JetraftNode) else node.directory / "store"
        asyncio.run(fill(node, args.messages, args.size, args.window, row, data_dir, args.duplicate_window))
        row.stop_seconds = round(node.stop(), 2)
        began = time.perf_counter()
        node.start()
        asyncio.run(recovered(node.url, args.messages, row, began))
        row.rss_mib_after_restart = round(rss_mib(node.pid), 1)
        asyncio.run(first_msg_id_publish(node.url, row))
        row.rss_mib_after_first_msg_id = round(rss_mib(node.pid), 1)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--size", type=int, default=32, help="payload bytes")
    parser.add_argument("--window", type=int, default=2000, help="publishes awaiting their PubAck")
    parser.add_argument(
        "--duplicate-window",
        type=float,
        help="the stream's duplicate window in seconds (the servers' default: 120)",
    )
    parser.add_argument("--servers", default=f"{NATS_DEFAULT},{JETRAFT}")
    parser.add_argument("--nats-server", type=Path, default=DEFAULT_NATS)
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    rows = []
    for server in args.servers.split(","):
        rows.append(measure(server, args))
        print(json.dumps(asdict(rows[-1])), flush=True)
    print(
        "| server | messages | fill | msgs/s | RSS MiB start / peak / after fill | on disk MiB "
        "| stop | restart to STREAM.INFO | to Direct Get of the last | RSS MiB after restart "
        "| then a first publish with a msg id | RSS MiB after it |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row.server} | {row.messages:,} | {row.fill_seconds} s | {row.fill_msgs_per_s:,} "
            f"| {row.rss_mib_start:.1f} / {row.rss_mib_peak_during_fill} / {row.rss_mib_after_fill} | {row.disk_mib} "
            f"| {row.stop_seconds} s | {row.restart_to_info_seconds} s | {row.restart_to_direct_get_seconds} s "
            f"| {row.rss_mib_after_restart} | {row.first_msg_id_publish_seconds} s | {row.rss_mib_after_first_msg_id} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))
    return 1 if any(row.publish_errors for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
