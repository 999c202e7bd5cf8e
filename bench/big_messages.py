"""8 MB messages side by side: `max_payload: 8MB` in the config of a 3-node jetraft cluster and of a
3-node nats-server 2.15.1 cluster.

    .venv/bin/python bench/big_messages.py [--size 8388608] [--core-messages 40] [--stream-messages 16]
        [--servers nats-server,jetraft] [--json rows.json]

For each server in turn (one cluster at a time: the machine is shared), with `max_payload: 8MB` in every
node's configuration file (jetraft reads it with `--config`):
- a raw socket reads the INFO (the advertised `max_payload`) and sends a PUB one byte over it: the
  server must answer `-ERR 'Maximum Payload Violation'` and close the connection;
- core NATS: nats-py publishes `--core-messages` messages of `--size` bytes on n1 to a subscriber on n2
  (the route between the nodes carries them), and on n1 to a subscriber on n1; throughput in MB/s;
- JetStream: an R3 file stream with Direct Get allowed; `--stream-messages` messages published one at a
  time (each awaits its PubAck: a quorum holds it), then each read back with STREAM.MSG.GET (the stream
  leader answers) and with Direct Get (any replica answers: the followers' copies are read too), every
  byte compared; then STREAM.INFO must show every replica current.
It prints one row per server: the advertised max_payload, the refusal, the rates and the nodes' RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlparse

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import nats  # noqa: E402
from idle_streams import rss_mib  # noqa: E402
from jetstream_bench import JETRAFT, NATS_DEFAULT, RunningCluster, jetraft_cluster, nats_server_cluster  # noqa: E402
from nats.aio.msg import Msg  # noqa: E402

DEFAULT_NATS = Path(sys.executable).with_name("nats-server")  # the venv's, beside its python
MAX_PAYLOAD_CONFIG = "max_payload: 8MB\n"
STREAM = "BIG"
STREAM_SUBJECT = "big.js"
REPLY_TIMEOUT_S = 60.0


@dataclass(slots=True)
class Row:
    server: str
    size: int
    advertised_max_payload: int = 0
    over_limit_reply: str = ""
    over_limit_closed: bool = False
    core_across_mb_s: float = 0.0
    core_same_node_mb_s: float = 0.0
    js_publish_mb_s: float = 0.0
    js_msg_get_mb_s: float = 0.0
    js_direct_get_mb_s: float = 0.0
    replicas_current: bool = False
    rss_mib: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@contextlib.contextmanager
def start(server: str, nats_binary: Path) -> Iterator[RunningCluster]:
    if server == NATS_DEFAULT:
        with nats_server_cluster(nats_binary, sync_always=False, extra_config=MAX_PAYLOAD_CONFIG) as cluster:
            yield cluster
        return
    with tempfile.TemporaryDirectory(prefix="bigmsg-conf-") as tmp:
        config = Path(tmp) / "node.conf"
        config.write_text(MAX_PAYLOAD_CONFIG)
        with jetraft_cluster(["--config", str(config)]) as cluster:
            yield cluster


async def over_limit(url: str) -> tuple[int, str, bool]:
    """(advertised max_payload, the server's answer to a PUB one byte over it, whether it then closed)."""
    address = urlparse(url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    try:
        info = json.loads((await asyncio.wait_for(reader.readline(), 10)).split(b" ", 1)[1])
        limit = int(info["max_payload"])
        writer.write(b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\nPING\r\n')
        await writer.drain()
        if await next_line(reader) != "PONG":
            return limit, "no PONG", False
        writer.write(f"PUB too.big {limit + 1}\r\n".encode())
        await writer.drain()
        reply = await next_line(reader)
        try:
            rest = await asyncio.wait_for(reader.read(), 10)
        except (TimeoutError, ConnectionError):
            rest = b"(still open)"
        return limit, reply, rest == b""
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def next_line(reader: asyncio.StreamReader) -> str:
    """The next protocol line that is not an INFO (nats-server sends one after CONNECT: `connect_info`)."""
    for _ in range(10):
        line = (await asyncio.wait_for(reader.readline(), 10)).decode().strip()
        if not line.startswith("INFO "):
            return line
    return "(only INFO lines)"


def payload_for(index: int, base: bytes) -> bytes:
    return index.to_bytes(8, "big") + base[8:]


async def core_rate(pub_url: str, sub_url: str, count: int, window: int, base: bytes) -> float:
    """MB/s of `count` messages from a publisher on pub_url to a subscriber on sub_url, every one checked."""
    subject = "big.core"
    pub = await nats.connect(pub_url)
    sub = await nats.connect(sub_url)
    try:
        ready = asyncio.Event()
        done = asyncio.Event()
        progress = asyncio.Event()
        received: list[int] = []

        async def on_message(msg: Msg) -> None:
            if len(msg.data) == 1:  # a probe: the subscription's interest reached the publisher's node
                ready.set()
                return
            index = int.from_bytes(msg.data[:8], "big")
            if msg.data != payload_for(index, base):
                raise AssertionError(f"message {index} came back different")
            received.append(index)
            progress.set()
            if len(received) == count:
                done.set()

        await sub.subscribe(subject, cb=on_message, pending_bytes_limit=(window + 1) * len(base) * 2)
        await sub.flush()
        for _ in range(200):  # interest crosses the route asynchronously on both servers
            await pub.publish(subject, b"p")
            await pub.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ready.wait(), 0.1)
                break
        started = time.perf_counter()
        for index in range(count):
            # a bounded window: more than max_pending (64 MB) unread makes the subscriber a slow consumer
            while index - len(received) >= window:
                progress.clear()
                await asyncio.wait_for(progress.wait(), REPLY_TIMEOUT_S)
            await pub.publish(subject, payload_for(index, base))
        await pub.flush(timeout=REPLY_TIMEOUT_S)
        await asyncio.wait_for(done.wait(), REPLY_TIMEOUT_S)
        took = time.perf_counter() - started
        if sorted(received) != list(range(count)):
            raise AssertionError("messages lost or repeated")
        return count * len(base) / took / 1e6
    finally:
        await pub.close()
        await sub.close()


async def stream_rates(urls: list[str], count: int, base: bytes, row: Row) -> None:
    nc = await nats.connect(urls[0])
    try:
        js = nc.jetstream(timeout=REPLY_TIMEOUT_S)
        await js.add_stream(name=STREAM, subjects=[STREAM_SUBJECT], num_replicas=3, allow_direct=True)
        started = time.perf_counter()
        for index in range(count):
            ack = await js.publish(STREAM_SUBJECT, payload_for(index, base), timeout=REPLY_TIMEOUT_S)
            if ack.seq != index + 1:
                raise AssertionError(f"publish {index} acknowledged as seq {ack.seq}")
        row.js_publish_mb_s = round(count * len(base) / (time.perf_counter() - started) / 1e6, 1)
        for direct in (False, True):
            started = time.perf_counter()
            for index in range(count):
                msg = await js.get_msg(STREAM, index + 1, direct=direct)
                if msg.data != payload_for(index, base):
                    raise AssertionError(f"seq {index + 1} came back different (direct={direct})")
            rate = round(count * len(base) / (time.perf_counter() - started) / 1e6, 1)
            if direct:
                row.js_direct_get_mb_s = rate
            else:
                row.js_msg_get_mb_s = rate
        for _ in range(300):  # bounded: 30 s for the followers to report themselves current
            info = await js.stream_info(STREAM)
            replicas = (info.cluster.replicas or []) if info.cluster else []
            if len(replicas) == 2 and all(peer.current for peer in replicas):
                row.replicas_current = info.state.messages == count
                break
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


async def measure(server: str, cluster: RunningCluster, args: argparse.Namespace) -> Row:
    row = Row(server, args.size)
    base = bytes(range(256)) * (args.size // 256) + b"x" * (args.size % 256)
    row.advertised_max_payload, row.over_limit_reply, row.over_limit_closed = await over_limit(
        cluster.urls[0]
    )
    steps = [
        (
            "core_across",
            lambda: core_rate(cluster.urls[0], cluster.urls[1], args.core_messages, args.window, base),
        ),
        (
            "core_same_node",
            lambda: core_rate(cluster.urls[0], cluster.urls[0], args.core_messages, args.window, base),
        ),
    ]
    for name, step in steps:
        try:
            setattr(row, f"{name}_mb_s", round(await step(), 1))
        except Exception as exc:  # a failure is a result to report
            row.errors.append(f"{name}: {exc!r}")
    try:
        await stream_rates(cluster.urls, args.stream_messages, base, row)
    except Exception as exc:
        row.errors.append(f"stream: {exc!r}")
    row.rss_mib = [round(rss_mib(pid), 1) for pid in cluster.pids]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=8 * 1024 * 1024, help="payload bytes (8 MiB)")
    parser.add_argument("--core-messages", type=int, default=40)
    parser.add_argument("--window", type=int, default=3, help="core messages published and not yet received")
    parser.add_argument("--stream-messages", type=int, default=16)
    parser.add_argument("--servers", default=f"{NATS_DEFAULT},{JETRAFT}")
    parser.add_argument("--nats-server", type=Path, default=DEFAULT_NATS)
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    rows = []
    for server in args.servers.split(","):
        with start(server, args.nats_server) as cluster:
            rows.append(asyncio.run(measure(server, cluster, args)))
        print(json.dumps(asdict(rows[-1])), flush=True)
    print(
        "| server | advertised max_payload | PUB over it | closed | core n1->n2 MB/s | core n1->n1 MB/s "
        "| R3 publish MB/s | MSG.GET MB/s | Direct Get MB/s | replicas current | RSS per node MiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row.server} | {row.advertised_max_payload:,} | `{row.over_limit_reply}` | {row.over_limit_closed} "
            f"| {row.core_across_mb_s} | {row.core_same_node_mb_s} | {row.js_publish_mb_s} | {row.js_msg_get_mb_s} "
            f"| {row.js_direct_get_mb_s} | {row.replicas_current} | {' / '.join(map(str, row.rss_mib))} |"
        )
        for error in row.errors:
            print(f"- {row.server}: {error}")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))
    return 1 if any(row.errors for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
