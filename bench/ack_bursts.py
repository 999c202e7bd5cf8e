"""How a closed loop of publishes moves through a cluster: throughput, latency and server CPU per
operation at several concurrencies, and how the acknowledgements bunch up as the client sees them.

    .venv/bin/python bench/ack_bursts.py [--servers nats-server,jetraft] [--workload kv_put|pub]
        [--inflight 1,4,16,64] [--seconds 3]

One nats-py client, N tasks each awaiting one publish at a time (`kv_put`: nats-py `KeyValue.put` of 128
bytes on one of 10,000 keys of an R3 history-1 bucket, as jsbench's kv_put; `pub`: `js.publish` of 128
bytes to an R3 stream), against a 3-node cluster started the way `jetstream_bench.py` starts it, one
server at a time. Besides ops/s and p50 it prints the server CPU per operation (the three processes,
from /proc) and the *bursts*: completions less than half a millisecond apart, counted as one. Bursts
the size of the concurrency, with long gaps between them, mean the cluster and the client take turns
(every publish waits for the same Raft round, then the client answers them all at once) rather than
overlapping their work; docs/performance.md ("A KV put's round under load") reads them.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: bench/ is on sys.path, the packages are not
    sys.path.insert(0, str(REPO_ROOT))

import nats  # noqa: E402
from nats.js.api import KeyValueConfig, StorageType, StreamConfig  # noqa: E402

from bench.jetstream_bench import JETRAFT, NATS_DEFAULT, jetraft_cluster, nats_server_cluster  # noqa: E402

PAYLOAD = b"x" * 128
KEYS = 10_000
BURST_GAP_S = 0.0005
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def bursts(done: list[float]) -> tuple[float, float]:
    """Mean completions per burst and the median gap between bursts (ms)."""
    gaps = [b - a for a, b in itertools.pairwise(done) if b - a > BURST_GAP_S]
    if not gaps:
        return float(len(done)), 0.0
    return len(done) / (len(gaps) + 1), statistics.median(gaps) * 1000


async def measure(urls: list[str], pids: list[int], workload: str, inflights: list[int], seconds: float) -> None:
    nc = await nats.connect(urls[0])
    js = nc.jetstream()
    if workload == "kv_put":
        config = KeyValueConfig(bucket="BURSTS", history=1, replicas=3, storage=StorageType.FILE, direct=True)
        kv = await js.create_key_value(config)

        async def one() -> None:
            await kv.put(f"k{random.randrange(KEYS)}", PAYLOAD)
    else:
        await js.add_stream(StreamConfig(name="BURSTS", subjects=["bursts"], num_replicas=3))

        async def one() -> None:
            await js.publish("bursts", PAYLOAD)

    async def worker(stop: float, latencies: list[float], done: list[float]) -> None:
        while time.monotonic() < stop:  # bounded by the clock, each publish by nats-py's timeout
            started = time.perf_counter()
            await one()
            now = time.perf_counter()
            latencies.append(now - started)
            done.append(now)

    for inflight in inflights:
        latencies: list[float] = []
        done: list[float] = []
        cpu_before = [cpu_seconds(pid) for pid in pids]
        started = time.monotonic()
        stop = started + seconds
        await asyncio.gather(*(worker(stop, latencies, done) for _ in range(inflight)))
        elapsed = time.monotonic() - started
        cpu = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
        ops = len(latencies)
        per_burst, gap_ms = bursts(done[ops // 3 :])  # the last two thirds: past the start
        print(
            f"  inflight {inflight:4d}: {ops / elapsed:8.0f} ops/s  p50 {statistics.median(latencies) * 1000:6.2f} ms"
            f"  server CPU {'/'.join(f'{100 * c / elapsed:.0f}' for c in cpu)}%"
            f"  {1e6 * sum(cpu) / ops:6.0f} us/op  burst {per_burst:5.1f}  gap p50 {gap_ms:5.2f} ms",
            flush=True,
        )
    await nc.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--servers", default=f"{NATS_DEFAULT},{JETRAFT}", help=f"{NATS_DEFAULT}, {JETRAFT}")
    parser.add_argument("--workload", choices=["kv_put", "pub"], default="kv_put")
    parser.add_argument("--inflight", default="1,4,16,64", help="concurrencies, comma-separated")
    parser.add_argument("--seconds", type=float, default=3.0, help="per concurrency")
    parser.add_argument("--nats-server", type=Path, default=REPO_ROOT / ".venv" / "bin" / "nats-server")
    args = parser.parse_args(argv)
    inflights = [int(n) for n in args.inflight.split(",")]
    for server in args.servers.split(","):
        if server == JETRAFT:
            cluster = jetraft_cluster()
        elif server == NATS_DEFAULT:
            cluster = nats_server_cluster(args.nats_server, sync_always=False)
        else:
            parser.error(f"unknown server {server!r}")
        print(f"{server}, {args.workload}:", flush=True)
        with cluster as running:
            asyncio.run(measure(running.urls, running.pids, args.workload, inflights, args.seconds))


if __name__ == "__main__":
    main()
