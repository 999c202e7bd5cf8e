"""Consumer throughput side by side: a 3-node jetraft cluster against a 3-node nats-server 2.15.1 cluster.

    .venv/bin/python bench/consumer_bench.py [--messages 20000] [--size 128] [--rounds 1]

For each server (one cluster at a time; the machine has 2 cores) it creates an
R3 stream, fills it with `--messages` messages of `--size` bytes, then
measures with the same nats-py client code:

- `pull`: a durable pull consumer (ack explicit), `fetch(batch=100)` in a loop
  and an `ack()` for every message; the clock stops once all messages arrived
  and the consumer's ack floor (CONSUMER.INFO) reached the last one, so the
  figure includes getting every ack processed.
- `push`: an ephemeral push consumer (`js.subscribe`, ack policy none, no flow
  control) delivering the whole stream to a callback; the clock stops at the
  last message.

Cluster start and stop are bench/jetstream_bench.py's (every process stopped by
PID in a `finally`, 127.0.0.1 only). Every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: bench/ is on sys.path, the packages are not
    sys.path.insert(0, str(REPO_ROOT))

from bench.jetstream_bench import JETRAFT, NATS_DEFAULT, SERVERS, RunningCluster, start_cluster  # noqa: E402

STREAM = "CBENCH"
SUBJECT = "cbench.data"
FETCH_BATCH = 100
PUBLISH_WINDOW = 256
FETCH_TIMEOUT_S = 5.0
WORKLOAD_TIMEOUT_S = 300.0
WORKLOADS = ("pull", "push")


@dataclass(frozen=True, slots=True)
class Result:
    server: str
    workload: str
    round_no: int
    messages: int
    seconds: float

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0


async def fill_stream(js: nats.js.JetStreamContext, messages: int, size: int, subject: str = SUBJECT) -> None:
    """`messages` publishes, at most PUBLISH_WINDOW awaiting their PubAck at a time."""
    payload = b"x" * size
    in_flight: list[asyncio.Future[object]] = []
    for _ in range(messages):
        in_flight.append(asyncio.ensure_future(js.publish(subject, payload, timeout=30)))
        if len(in_flight) >= PUBLISH_WINDOW:
            await asyncio.gather(*in_flight)
            in_flight = []
    await asyncio.gather(*in_flight)


async def wait_ack_floor(js: nats.js.JetStreamContext, consumer: str, last_seq: int, deadline: float) -> None:
    while (await js.consumer_info(STREAM, consumer)).ack_floor.stream_seq < last_seq:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{consumer}: ack floor never reached {last_seq}")
        await asyncio.sleep(0.01)


async def pull_workload(js: nats.js.JetStreamContext, messages: int) -> float:
    sub = await js.pull_subscribe(
        SUBJECT, durable="pull", config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT)
    )
    received = 0
    start = time.monotonic()
    deadline = start + WORKLOAD_TIMEOUT_S
    while received < messages:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pull: {received} of {messages} messages in {WORKLOAD_TIMEOUT_S} s")
        try:
            batch = await sub.fetch(FETCH_BATCH, timeout=FETCH_TIMEOUT_S)
        except nats.errors.TimeoutError:
            continue
        for msg in batch:
            await msg.ack()
        received += len(batch)
    await wait_ack_floor(js, "pull", messages, deadline)
    elapsed = time.monotonic() - start
    await sub.unsubscribe()
    await js.delete_consumer(STREAM, "pull")
    return elapsed


async def push_workload(js: nats.js.JetStreamContext, messages: int) -> float:
    received = 0
    done = asyncio.Event()

    async def on_msg(_msg: nats.aio.msg.Msg) -> None:
        nonlocal received
        received += 1
        if received >= messages:
            done.set()

    start = time.monotonic()
    sub = await js.subscribe(
        SUBJECT,
        cb=on_msg,
        manual_ack=True,
        config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL),
    )
    try:
        await asyncio.wait_for(done.wait(), WORKLOAD_TIMEOUT_S)
    except TimeoutError:
        raise TimeoutError(f"push: {received} of {messages} messages in {WORKLOAD_TIMEOUT_S} s") from None
    elapsed = time.monotonic() - start
    await sub.unsubscribe()
    return elapsed


async def measure(
    cluster: RunningCluster, server: str, round_no: int, messages: int, size: int, workloads: list[str]
) -> list[Result]:
    nc = await nats.connect(cluster.urls[0], connect_timeout=10)
    try:
        js = nc.jetstream(timeout=10)
        await js.add_stream(name=STREAM, subjects=[SUBJECT], num_replicas=3)
        fill_start = time.monotonic()
        await fill_stream(js, messages, size)
        print(
            f"  {server}: filled {messages} messages in {time.monotonic() - fill_start:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        results = []
        for workload in workloads:
            run = pull_workload if workload == "pull" else push_workload
            seconds = await run(js, messages)
            result = Result(server, workload, round_no, messages, seconds)
            print(f"  {server} {workload}: {result.msgs_per_s:,.0f} msgs/s", file=sys.stderr, flush=True)
            results.append(result)
        await js.delete_stream(STREAM)
        return results
    finally:
        await nc.close()


def format_table(results: list[Result], servers: list[str], workloads: list[str]) -> str:
    """Markdown: median msgs/s per server and jetraft / each nats-server ratio."""
    others = [s for s in servers if s != JETRAFT]
    header = "| workload | " + " | ".join(f"{s} msgs/s" for s in servers)
    if JETRAFT in servers:
        header += "".join(f" | jetraft/{s}" for s in others)
    lines = [header + " |", "|" + "---|" * (1 + len(servers) + (len(others) if JETRAFT in servers else 0))]

    def median(server: str, workload: str) -> float | None:
        values = [r.msgs_per_s for r in results if r.server == server and r.workload == workload]
        return statistics.median(values) if values else None

    for workload in workloads:
        rates = {s: median(s, workload) for s in servers}
        cells = ["—" if rates[s] is None else f"{rates[s]:,.0f}" for s in servers]
        if JETRAFT in servers:
            for other in others:
                top, bottom = rates[JETRAFT], rates[other]
                cells.append("—" if top is None or not bottom else f"{top / bottom:.2f}")
        lines.append(f"| {workload} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=20_000, help="messages in the stream")
    parser.add_argument("--size", type=int, default=128, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=1, help="rounds; each runs every server once")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="subset of: pull, push")
    parser.add_argument(
        "--servers", default=f"{NATS_DEFAULT},{JETRAFT}", help=f"subset of: {', '.join(SERVERS)}"
    )
    parser.add_argument("--nats-server", type=Path, default=REPO_ROOT / ".venv" / "bin" / "nats-server")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = (set(servers) - set(SERVERS)) | (set(workloads) - set(WORKLOADS))
    if unknown:
        raise SystemExit(f"unknown servers or workloads: {', '.join(sorted(unknown))}")
    results = run_rounds(
        servers,
        args.rounds,
        args.nats_server,
        lambda cluster, server, round_no: measure(
            cluster, server, round_no, args.messages, args.size, workloads
        ),
    )
    print(format_table(results, servers, workloads))


def run_rounds(
    servers: list[str],
    rounds: int,
    nats_server: Path,
    measure_one: Callable[[RunningCluster, str, int], Coroutine[Any, Any, list[Result]]],
) -> list[Result]:
    """`measure_one(cluster, server, round_no)` on a fresh cluster of each server, `rounds` times."""
    results: list[Result] = []
    for round_no in range(rounds):
        # alternate the order so a slow patch of the shared machine does not always hit the same server
        order = servers if round_no % 2 == 0 else list(reversed(servers))
        for server in order:
            print(f"round {round_no + 1}/{rounds}: {server}", file=sys.stderr, flush=True)
            with start_cluster(server, nats_server) as cluster:
                results += asyncio.run(measure_one(cluster, server, round_no))
    return results


if __name__ == "__main__":
    main()
