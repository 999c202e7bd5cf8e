"""Stream creation side by side: how long one STREAM.CREATE takes on jetraft and on nats-server 2.15.1.

    .venv/bin/python bench/stream_create.py [--streams 300] [--topologies 1,3] [--json rows.json]

For each topology (one node with R1 streams, three nodes with R3 streams) and each server in turn (one
cluster at a time: the machine is shared), one nats-py client creates N streams one after another, as
nats-py's own `test_jsm_stream_management_with_offset` does, and times each create from request to
reply. It prints, per server and topology: the total, the median, p90 and p99 of one create, the
servers' CPU time per create (all of the topology's server processes, from /proc, which the load of a
shared machine moves less than the wall times), the part of it spent in the kernel, and the load average
when the creates ended.

The kernel part tells a filesystem effect from the servers' own work: on an ext4 without a journal (this
project's build VM), creating a file or directory checks each candidate inode for a recent delete
(`recently_deleted` in the kernel's inode allocator), and a nats-server create makes several files and
directories: right after a run that deleted many files (the previous run's store directory, a test
suite's temp files), its kernel time per create grows several-fold. bench/README.md has the measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import nats  # noqa: E402
from jetstream_bench import (  # noqa: E402
    HOST,
    STARTUP_TIMEOUT_S,
    RunningCluster,
    free_ports,
    jetraft_cluster,
    nats_server_cluster,
    nats_server_healthy,
    stop_pids,
)

DEFAULT_NATS = BENCH_DIR.parent / ".venv" / "bin" / "nats-server"
# nats-server with its defaults (it fsyncs every 2 minutes), and with `sync_interval: always`
SERVERS_NATS = ("nats-server", "nats-server-sync")


@dataclass(slots=True)
class Row:
    server: str
    nodes: int
    replicas: int
    streams: int
    total_seconds: float
    median_ms: float
    p90_ms: float
    p99_ms: float
    # the servers' CPU (user + system, every process of the topology) per create
    server_cpu_ms: float
    # of which system (kernel) time
    server_sys_ms: float
    load_average: float


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of process `pid` so far (fields 14 and 15 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks


def cluster_cpu(pids: list[int]) -> tuple[float, float]:
    """User and system CPU time of all of `pids` so far."""
    times = [cpu_seconds(pid) for pid in pids]
    return sum(user for user, _ in times), sum(system for _, system in times)


@contextlib.contextmanager
def nats_server_alone(binary: Path, sync_always: bool) -> Iterator[RunningCluster]:
    """One nats-server without a cluster block, as nats-py's test harness starts it; with `sync_always`,
    `jetstream { sync_interval: always }` (an fsync per write, as jetraft makes)."""
    client_port, http_port = free_ports(2)
    with tempfile.TemporaryDirectory(prefix="create-nats-") as tmp:
        log = open(Path(tmp) / "server.log", "ab")  # noqa: SIM115 - the child owns it
        cmd = [str(binary), "-a", HOST, "-p", str(client_port), "-m", str(http_port), "-js", "-sd", tmp]
        if sync_always:  # the store directory stays -sd's: nats-server refuses it given twice
            config = Path(tmp) / "sync.conf"
            config.write_text("jetstream { sync_interval: always }\n")
            cmd += ["-c", str(config)]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            # no readiness event to await from another process: poll its /healthz
            while not nats_server_healthy(http_port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"nats-server did not become healthy; log in {tmp}")
                time.sleep(0.05)
            yield RunningCluster([f"nats://{HOST}:{client_port}"], [proc.pid], Path(tmp))
        finally:
            stop_pids([proc])


def start(server: str, nodes: int, nats_binary: Path) -> contextlib.AbstractContextManager[RunningCluster]:
    if server in SERVERS_NATS:
        sync_always = server == "nats-server-sync"
        return nats_server_alone(nats_binary, sync_always) if nodes == 1 else nats_server_cluster(nats_binary, sync_always)
    if server != "jetraft":
        raise SystemExit(f"unknown server {server!r}: one of {', '.join((*SERVERS_NATS, 'jetraft'))}")
    return jetraft_cluster((), nodes)


async def create_streams(url: str, count: int, replicas: int) -> list[float]:
    nc = await nats.connect(url)
    took: list[float] = []
    try:
        jsm = nc.jsm()
        for index in range(count):
            started = time.perf_counter()
            await jsm.add_stream(name=f"stream_{index}", num_replicas=replicas)
            took.append(time.perf_counter() - started)
        return took
    finally:
        await nc.close()


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run(server: str, nodes: int, streams: int, nats_binary: Path) -> Row:
    replicas = 1 if nodes == 1 else 3
    with start(server, nodes, nats_binary) as cluster:
        user_before, sys_before = cluster_cpu(cluster.pids)
        took = asyncio.run(create_streams(cluster.urls[0], streams, replicas))
        user_after, sys_after = cluster_cpu(cluster.pids)
    user_used, sys_used = user_after - user_before, sys_after - sys_before
    return Row(
        server=server,
        nodes=nodes,
        replicas=replicas,
        streams=streams,
        total_seconds=round(sum(took), 2),
        median_ms=round(statistics.median(took) * 1000, 2),
        p90_ms=round(percentile(took, 0.90) * 1000, 2),
        p99_ms=round(percentile(took, 0.99) * 1000, 2),
        server_cpu_ms=round((user_used + sys_used) / streams * 1000, 2),
        server_sys_ms=round(sys_used / streams * 1000, 2),
        load_average=round(os.getloadavg()[0], 2),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--topologies", default="1,3", help="node counts: 1 (R1 streams), 3 (R3 streams)")
    parser.add_argument(
        "--servers", default="nats-server,jetraft", help="nats-server, nats-server-sync (sync_interval: always), jetraft"
    )
    parser.add_argument("--nats-server", type=Path, default=DEFAULT_NATS)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    rows = [
        run(server, int(nodes), args.streams, args.nats_server)
        for nodes in args.topologies.split(",")
        for server in args.servers.split(",")
    ]
    print(
        "| server | nodes | replicas | streams | total | median | p90 | p99 | server CPU / create "
        "| of which kernel | load |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row.server} | {row.nodes} | R{row.replicas} | {row.streams} | {row.total_seconds:.2f} s "
            f"| {row.median_ms:.2f} ms | {row.p90_ms:.2f} ms | {row.p99_ms:.2f} ms | {row.server_cpu_ms:.2f} ms "
            f"| {row.server_sys_ms:.2f} ms | {row.load_average:.1f} |"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))


if __name__ == "__main__":
    main()
