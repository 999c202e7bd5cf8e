"""Idle streams side by side: what N idle R3 streams cost a 3-node jetraft cluster and nats-server 2.15.1.

    .venv/bin/python bench/idle_streams.py [--streams 100] [--idle-seconds 20] [--json rows.json]
        [--servers nats-server,jetraft,jetraft-no-quiesce]

For each server in turn (one cluster at a time: the machine is shared), one nats-py client creates N R3
streams one after another and publishes one message to each, as a new user would; then nothing happens
for a while, and the script samples each server process's CPU time (/proc/<pid>/stat) and resident
memory (/proc/<pid>/status) over `--idle-seconds`. It prints, per server: time to create, idle CPU per
node (% of one core), RSS per node (MiB) and how the stream leaders are spread over the nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import nats  # noqa: E402
from jetstream_bench import JETRAFT, NATS_DEFAULT, RunningCluster, start_cluster  # noqa: E402

DEFAULT_NATS = BENCH_DIR.parent / ".venv" / "bin" / "nats-server"
# jetraft's idle Raft groups quiesce by default; this one keeps them heartbeating (`--no-quiesce`).
# `jetraft-quiesce` names the default explicitly (`--quiesce`), as rows from before it was the default did.
JETRAFT_NO_QUIESCE = "jetraft-no-quiesce"
JETRAFT_QUIESCE = "jetraft-quiesce"
JETRAFT_FLAGS = {JETRAFT_NO_QUIESCE: ["--no-quiesce"], JETRAFT_QUIESCE: ["--quiesce"]}
# how long the servers get after the last create before the idle sample: elections, catch-up, quiescence
SETTLE_SECONDS = 5.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(slots=True)
class Row:
    server: str
    streams: int
    create_seconds: float
    failed_creates: int
    idle_cpu_percent: list[float]
    rss_mib: list[float]
    leaders: dict[str, int]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def create_streams(url: str, count: int) -> tuple[float, int]:
    nc = await nats.connect(url)
    failed = 0
    try:
        js = nc.jetstream(timeout=10)
        started = time.perf_counter()
        for index in range(count):
            try:
                await js.add_stream(name=f"IDLE_{index}", subjects=[f"idle.{index}"], num_replicas=3)
                await js.publish(f"idle.{index}", b"one")
            except Exception as exc:  # a failed create is a result to report, not a reason to stop
                failed += 1
                print(f"create IDLE_{index} failed: {exc!r}", file=sys.stderr)
        return time.perf_counter() - started, failed
    finally:
        await nc.close()


async def leader_spread(url: str, count: int) -> dict[str, int]:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream(timeout=10)
        leaders: Counter[str] = Counter()
        for index in range(count):
            try:
                info = await js.stream_info(f"IDLE_{index}")
            except Exception:
                leaders["(no answer)"] += 1
                continue
            leaders[info.cluster.leader if info.cluster and info.cluster.leader else "(none)"] += 1
        return dict(sorted(leaders.items()))
    finally:
        await nc.close()


def measure(server: str, cluster: RunningCluster, streams: int, idle_seconds: float) -> Row:
    create_seconds, failed = asyncio.run(create_streams(cluster.urls[0], streams))
    time.sleep(SETTLE_SECONDS)
    before = [cpu_seconds(pid) for pid in cluster.pids]
    started = time.monotonic()
    time.sleep(idle_seconds)
    elapsed = time.monotonic() - started
    after = [cpu_seconds(pid) for pid in cluster.pids]
    cpu = [round(100 * (a - b) / elapsed, 1) for a, b in zip(after, before, strict=True)]
    rss = [round(rss_mib(pid), 1) for pid in cluster.pids]
    leaders = asyncio.run(leader_spread(cluster.urls[0], streams))
    return Row(server, streams, round(create_seconds, 1), failed, cpu, rss, leaders)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument(
        "--servers", default=f"{NATS_DEFAULT},{JETRAFT},{JETRAFT_NO_QUIESCE}", help="comma-separated, in order"
    )
    parser.add_argument("--nats-server", type=Path, default=DEFAULT_NATS)
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    rows = []
    for server in args.servers.split(","):
        flags = JETRAFT_FLAGS.get(server, [])
        base = JETRAFT if server in JETRAFT_FLAGS else server
        with start_cluster(base, args.nats_server, flags) as cluster:
            row = measure(server, cluster, args.streams, args.idle_seconds)
        rows.append(row)
        print(
            f"{row.server:>12}: {row.streams} R3 streams created in {row.create_seconds} s "
            f"({row.failed_creates} failed); idle CPU per node {row.idle_cpu_percent} %; "
            f"RSS per node {row.rss_mib} MiB; leaders {row.leaders}",
            flush=True,
        )
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
