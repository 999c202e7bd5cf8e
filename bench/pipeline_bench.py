"""Batch read of a replicated stream into Spark: messages/s and the share each node served.

    .venv/bin/python bench/pipeline_bench.py [--messages 1000000] [--size 128] [--partitions 6]

Starts a 3-node jetraft cluster (local.cluster, free ports on
127.0.0.1, a temporary data directory), creates an R3 `allow_direct` stream,
publishes N messages of `--size` bytes with async publishes (at most
`--window` awaiting their PubAck; each carries a Nats-Msg-Id so that a
publish retried after a lost PubAck is stored once), then, with Spark `local[2]`:

0. warms Spark's Python workers up with a read of a few messages (untimed);
1. times `spark.read.format("jetstream")...load().count()` (the headline figure);
2. times `groupBy("responder").count()` over the same range, which says how
   many messages each node served (Direct Get batches go to the stream's
   `_sys_` queue group, so every replica answers some of them).

Publishing is timed too, for context. The machine has 2 cores shared by three
Python nodes, the Spark JVM and its Python workers, so figures move between
runs; the per-node share is the stable part.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

import nats
import nats.errors
import nats.js.errors
from nats.js.api import StreamConfig

from local.cluster import LocalCluster, plan_free_nodes
from pipeline.examples.publishing import publish_acknowledged

STREAM = "BENCH"
SUBJECT_COUNT = 16
LEADER_TIMEOUT = 60.0


def start_cluster(nodes: int, data_dir: Path) -> LocalCluster:
    cluster = LocalCluster(plan_free_nodes(nodes, 0), data_dir)
    cluster.start(timeout=LEADER_TIMEOUT)
    return cluster


async def create_stream(servers: list[str], replicas: int) -> None:
    """Create the stream and wait until its group has a leader (publishes are refused before)."""
    nc = await nats.connect(servers)
    try:
        js = nc.jetstream(timeout=10)
        config = StreamConfig(
            name=STREAM, subjects=[f"{STREAM.lower()}.>"], num_replicas=replicas, allow_direct=True
        )
        deadline = time.monotonic() + LEADER_TIMEOUT
        while True:
            try:
                await js.add_stream(config)
                break
            except (nats.js.errors.ServiceUnavailableError, nats.errors.TimeoutError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        while True:
            try:
                info = await js.stream_info(STREAM)
                if info.cluster is None or info.cluster.leader:
                    return
            except (nats.js.errors.ServiceUnavailableError, nats.errors.TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"stream {STREAM} got no leader within {LEADER_TIMEOUT:g}s")
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


async def publish(servers: list[str], count: int, size: int, window: int) -> float:
    """Publish `count` messages with at most `window` unacknowledged; returns seconds taken."""
    nc = await nats.connect(servers)
    payload = b"x" * size
    subjects = [f"{STREAM.lower()}.{i}" for i in range(SUBJECT_COUNT)]
    started = time.perf_counter()

    def progress(done: int) -> None:
        if done % (window * 50) == 0 or done == count:
            rate = done / (time.perf_counter() - started)
            print(f"  published {done:>9,} ({rate:,.0f} msg/s)", flush=True)

    try:
        await publish_acknowledged(
            nc, count, lambda i: (subjects[i % SUBJECT_COUNT], payload), window, progress=progress
        )
        return time.perf_counter() - started
    finally:
        await nc.close()


def _stop_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    # SystemExit unwinds through the finally blocks, which stop the nodes and Spark.
    raise SystemExit(143)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=128, help="payload bytes per message")
    parser.add_argument("--window", type=int, default=2000, help="async publishes awaiting a PubAck")
    parser.add_argument("--partitions", type=int, default=6, help="Spark partitions of the read")
    parser.add_argument("--batch-size", type=int, default=1000, help="messages per Direct Get batch")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)

    data_dir = Path(tempfile.mkdtemp(prefix="pipeline-bench-"))
    cluster = start_cluster(args.nodes, data_dir)
    spark = None
    try:
        servers = cluster.client_urls
        print(f"cluster: {args.nodes} nodes {', '.join(servers)}; data in {data_dir}", flush=True)
        asyncio.run(create_stream(servers, min(3, args.nodes)))
        seconds = asyncio.run(publish(servers, args.messages, args.size, args.window))
        print(
            f"publish: {args.messages:,} x {args.size} B in {seconds:.1f}s = {args.messages / seconds:,.0f} msg/s"
        )

        from pipeline.examples.local_spark import local_spark_session

        spark = local_spark_session(args.master, "jetraft-pipeline-bench")

        def frame(end_seq: int | None = None):  # type: ignore[no-untyped-def]
            reader = (
                spark.read.format("jetstream")
                .option("servers", ",".join(servers))
                .option("stream", STREAM)
                .option("partitions", str(args.partitions))
                .option("batch_size", str(args.batch_size))
            )
            if end_seq is not None:
                reader = reader.option("end_seq", str(end_seq))
            return reader.load()

        # Spark's first query starts its Python workers (and they import pyarrow, nats-py and the data
        # source): seconds that belong to the session, not to the read, so a tiny read pays them first.
        started = time.perf_counter()
        frame(end_seq=args.partitions).count()
        print(f"warm-up: {args.partitions}-message read in {time.perf_counter() - started:.1f}s (not counted)")

        started = time.perf_counter()
        counted = frame().count()
        seconds = time.perf_counter() - started
        print(
            f"read:    count() = {counted:,} in {seconds:.1f}s = {counted / seconds:,.0f} msg/s "
            f"(Spark {args.master}, {args.partitions} partitions, batch {args.batch_size})"
        )
        started = time.perf_counter()
        per_node = {row["responder"]: row["count"] for row in frame().groupBy("responder").count().collect()}
        seconds = time.perf_counter() - started
        total = sum(per_node.values())
        print(f"read:    groupBy(responder) over {total:,} in {seconds:.1f}s = {total / seconds:,.0f} msg/s")
        for node, served in sorted(per_node.items(), key=lambda item: str(item[0])):
            print(f"  {node or '(no Jetraft-Node)':<8} served {served:>9,} ({100 * served / total:5.1f}%)")
        if counted != args.messages or total != args.messages:
            print(f"MISMATCH: published {args.messages:,}, count() {counted:,}, grouped {total:,}")
            return 1
        return 0
    finally:
        if spark is not None:
            spark.stop()
        cluster.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
