"""Direct Get batch reads side by side: a 3-node jetraft cluster against a 3-node nats-server 2.15.1 cluster.

    .venv/bin/python bench/direct_batch_bench.py [--messages 10000] [--size 128] [--reads 5] [--rounds 1]

For each server (one cluster at a time; the machine has 2 cores) it creates an
R3 stream with `allow_direct`, fills it with `--messages` messages of `--size`
bytes, then times `--reads` batch reads of the whole stream, each one request
on `$JS.API.DIRECT.GET.<stream>` with `{"seq": 1, "batch": N}` answered by one
member of the `_sys_` queue group: N messages, then the 204 end-of-batch. The
clock runs from the request to the end-of-batch; the figure is messages/s (the
median read of each round, then the median over rounds), with the same nats-py
client code against both servers.

Cluster start and stop are bench/jetstream_bench.py's (every process stopped by
PID in a `finally`, 127.0.0.1 only). Every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import nats
from nats.aio.msg import Msg
from nats.js.api import StreamConfig

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: bench/ is on sys.path, the packages are not
    sys.path.insert(0, str(REPO_ROOT))

from bench.consumer_bench import Result, fill_stream, format_table, run_rounds  # noqa: E402
from bench.jetstream_bench import JETRAFT, NATS_DEFAULT, SERVERS, RunningCluster  # noqa: E402

STREAM = "DBATCH"
SUBJECT = "dbatch.data"
READ_TIMEOUT_S = 60.0
END_OF_BATCH = "204"
WORKLOAD = "Direct Get batch"


async def batch_read(nc: nats.NATS, messages: int) -> float:
    """Seconds for one batch request of `messages` to be answered up to its end-of-batch."""
    inbox = nc.new_inbox()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    received = 0

    async def on_msg(msg: Msg) -> None:
        nonlocal received
        status = (msg.headers or {}).get("Status")
        if status == END_OF_BATCH:
            if not done.done():
                done.set_result(None)
        elif status is not None:
            if not done.done():
                done.set_exception(RuntimeError(f"batch read answered {status} {msg.headers}"))
        else:
            received += 1

    sub = await nc.subscribe(inbox, cb=on_msg, pending_msgs_limit=4 * messages)
    try:
        request = json.dumps({"seq": 1, "batch": messages}).encode()
        started = time.perf_counter()
        await nc.publish(f"$JS.API.DIRECT.GET.{STREAM}", request, reply=inbox)
        await asyncio.wait_for(done, READ_TIMEOUT_S)
        seconds = time.perf_counter() - started
    finally:
        await sub.unsubscribe()
    if received != messages:
        raise RuntimeError(f"batch read returned {received} messages, expected {messages}")
    return seconds


async def measure(
    cluster: RunningCluster, server: str, round_no: int, messages: int, size: int, reads: int
) -> list[Result]:
    nc = await nats.connect(cluster.urls[0], connect_timeout=10)
    try:
        js = nc.jetstream(timeout=10)
        await js.add_stream(StreamConfig(name=STREAM, subjects=[SUBJECT], num_replicas=3, allow_direct=True))
        await fill_stream(js, messages, size, SUBJECT)
        # replicas caught up before the clock starts: ten direct reads in a row (each from a random
        # replica) see the last publish; a batch from one still behind fails the count check below
        deadline = time.monotonic() + READ_TIMEOUT_S
        in_a_row = 0
        while in_a_row < 10:
            caught_up = (await js.get_last_msg(STREAM, SUBJECT, direct=True)).seq == messages
            in_a_row = in_a_row + 1 if caught_up else 0
            if not caught_up:
                if time.monotonic() > deadline:
                    raise TimeoutError("replicas never caught up")
                await asyncio.sleep(0.05)
        seconds = [await batch_read(nc, messages) for _ in range(reads)]
        read = Result(server, WORKLOAD, round_no, messages, statistics.median(seconds))
        rates = ", ".join(f"{messages / s:,.0f}" for s in seconds)
        print(f"  {server}: {rates} msgs/s", file=sys.stderr, flush=True)
        await js.delete_stream(STREAM)
        return [read]
    finally:
        await nc.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=10_000, help="messages in the stream and in each batch")
    parser.add_argument("--size", type=int, default=128, help="payload bytes")
    parser.add_argument("--reads", type=int, default=5, help="batch reads per round")
    parser.add_argument("--rounds", type=int, default=1, help="rounds; each runs every server once")
    parser.add_argument(
        "--servers", default=f"{NATS_DEFAULT},{JETRAFT}", help=f"subset of: {', '.join(SERVERS)}"
    )
    parser.add_argument("--nats-server", type=Path, default=REPO_ROOT / ".venv" / "bin" / "nats-server")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    unknown = set(servers) - set(SERVERS)
    if unknown:
        raise SystemExit(f"unknown servers: {', '.join(sorted(unknown))}")
    results = run_rounds(
        servers,
        args.rounds,
        args.nats_server,
        lambda cluster, server, round_no: measure(
            cluster, server, round_no, args.messages, args.size, args.reads
        ),
    )
    print(format_table(results, servers, [WORKLOAD]))


if __name__ == "__main__":
    main()
