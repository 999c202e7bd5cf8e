"""A big KV keyspace side by side: put keys 1..N into one R3 bucket on jetraft and on nats-server 2.15.1.

    .venv/bin/python bench/kv_keyspace.py [--checkpoints 10000,100000,1000000] [--window 256]
        [--samples 2000] [--servers nats-server,jetraft] [--json rows.json]

For each server in turn (3 nodes, one cluster at a time: the machine is shared), nats-py creates an R3
KV bucket with file storage (`create_key_value`, history 1) and puts keys `k.1`, `k.2`, ... (64-byte
values) with async publishes to `$KV.<bucket>.<key>`, as `kv.put` sends them, at most `--window`
awaiting their PubAck. At each checkpoint the puts stop (all acknowledged) and the script records:
the put rate over the interval since the previous checkpoint, then `--samples` `kv.get`s of random
existing keys, one at a time (nats-py's KV get: a Direct Get of the key's last message), p50 / p99, and
the nodes' RSS. The goal (issue 21): get p99 and put rate flat from 10k to 1M keys.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import nats  # noqa: E402
from idle_streams import cpu_seconds, rss_mib  # noqa: E402
from jetstream_bench import JETRAFT, NATS_DEFAULT, RunningCluster, start_cluster  # noqa: E402

DEFAULT_NATS = Path(sys.executable).with_name("nats-server")  # the venv's, beside its python
BUCKET = "KEYSPACE"
VALUE = b"v" * 64
REPLY_TIMEOUT_S = 30.0


@dataclass(slots=True)
class Row:
    server: str
    keys: int
    interval_puts_per_s: float
    get_p50_ms: float
    get_p99_ms: float
    cluster_cpu_us_per_put: float
    rss_mib: list[float]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def put_range(js: nats.js.JetStreamContext, first: int, last: int) -> None:
    """Put keys first..last, the window bounded by nats-py's publish_async_max_pending."""
    pending = []
    for index in range(first, last + 1):
        pending.append(await js.publish_async(f"$KV.{BUCKET}.k.{index}", VALUE))
        if len(pending) >= 4096:  # collect acknowledged futures: an error surfaces, memory stays bounded
            await asyncio.gather(*pending)
            pending.clear()
    await asyncio.gather(*pending)


async def run(
    server: str, cluster: RunningCluster, checkpoints: list[int], args: argparse.Namespace
) -> list[Row]:
    nc = await nats.connect(cluster.urls[0])
    rows = []
    try:
        js = nc.jetstream(timeout=REPLY_TIMEOUT_S, publish_async_max_pending=args.window)
        kv = await js.create_key_value(bucket=BUCKET, history=1, replicas=3)
        done = 0
        for checkpoint in checkpoints:
            cpu_before = sum(cpu_seconds(pid) for pid in cluster.pids)
            began = time.perf_counter()
            await put_range(js, done + 1, checkpoint)
            took = time.perf_counter() - began
            cpu = sum(cpu_seconds(pid) for pid in cluster.pids) - cpu_before
            interval = checkpoint - done
            done = checkpoint
            sample = random.Random(checkpoint)
            gets = []
            for _ in range(args.samples):
                index = sample.randint(1, done)
                started = time.perf_counter()
                entry = await kv.get(f"k.{index}")
                gets.append(time.perf_counter() - started)
                if entry.value != VALUE:
                    raise AssertionError(f"k.{index} came back as {entry.value!r}")
            row = Row(
                server=server,
                keys=checkpoint,
                interval_puts_per_s=round(interval / took),
                get_p50_ms=round(1000 * statistics.median(gets), 2),
                get_p99_ms=round(1000 * percentile(gets, 0.99), 2),
                cluster_cpu_us_per_put=round(1e6 * cpu / interval, 1),
                rss_mib=[round(rss_mib(pid), 1) for pid in cluster.pids],
            )
            rows.append(row)
            print(json.dumps(asdict(row)), flush=True)
        status = await kv.status()
        if status.values != done:
            raise AssertionError(f"the bucket holds {status.values} values, {done} were put")
        return rows
    finally:
        await nc.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--checkpoints", default="10000,100000,1000000", help="key counts, ascending")
    parser.add_argument("--window", type=int, default=256, help="puts awaiting their PubAck")
    parser.add_argument("--samples", type=int, default=2000, help="random gets at each checkpoint")
    parser.add_argument("--servers", default=f"{NATS_DEFAULT},{JETRAFT}")
    parser.add_argument("--nats-server", type=Path, default=DEFAULT_NATS)
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    checkpoints = [int(value) for value in args.checkpoints.split(",")]
    rows: list[Row] = []
    for server in args.servers.split(","):
        with start_cluster(server, args.nats_server) as cluster:
            rows += asyncio.run(run(server, cluster, checkpoints, args))
    print(
        "| server | keys | puts/s over the interval | get p50 ms | get p99 ms | cluster CPU us/put | RSS per node MiB |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row.server} | {row.keys:,} | {row.interval_puts_per_s:,} | {row.get_p50_ms} | {row.get_p99_ms} "
            f"| {row.cluster_cpu_us_per_put} | {' / '.join(map(str, row.rss_mib))} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
