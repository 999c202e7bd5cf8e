"""Snapshot and restore side by side: how long a stream takes to go out (STREAM.SNAPSHOT) and come back
(STREAM.RESTORE) on jetraft and on nats-server 2.15.1, and what the servers spend on it.

    .venv/bin/python bench/backup_bench.py [--messages 100000] [--size 128] [--nodes 3] [--json rows.json]

For each server in turn (one cluster at a time: the machine is shared), a fresh cluster (`--nodes`, R as
many) gets one stream filled with `--messages` messages of `--size` bytes on 16 subjects (async
publishes, not timed); then one nats-py client takes a snapshot with nats-server's default chunk size
and window (acking each chunk as the nats CLI does), deletes the stream and restores it from the archive
in 64 KiB chunks (the CLI's), and checks the restored state equals the original. It prints the archive's
size, the wall time of each half with messages per second, and the servers' CPU time (user + system of
every server process, from /proc) for each. Each server restores its own archive: jetraft's is its own
format, nats-server's its filestore blocks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

import nats  # noqa: E402
from jetstream_bench import REPO_ROOT, jetraft_cluster, nats_server_cluster  # noqa: E402
from stream_create import cluster_cpu, nats_server_alone  # noqa: E402

IN_FLIGHT = 512
RESTORE_CHUNK = 64 * 1024
TIMEOUT = 30.0


@dataclass
class Row:
    server: str
    nodes: int
    messages: int
    size: int
    archive_bytes: int
    snapshot_s: float
    snapshot_cpu_s: float
    restore_s: float
    restore_cpu_s: float


async def fill(js: Any, messages: int, size: int) -> None:
    payload = b"x" * size
    pending: list[asyncio.Future[Any]] = []
    for i in range(messages):
        pending.append(await js.publish_async(f"bench.{i % 16}", payload))
        if len(pending) >= IN_FLIGHT:
            await asyncio.gather(*pending)
            pending = []
    await asyncio.gather(*pending)


async def snapshot(nc: nats.NATS, stream: str) -> tuple[dict[str, Any], bytes]:
    inbox = nc.new_inbox()
    data = bytearray()
    ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def on_chunk(msg: Any) -> None:
        if not msg.data:
            if not ended.done():
                ended.set_result(None)
            return
        data.extend(msg.data)
        if msg.reply:
            await nc.publish(msg.reply, b"")

    sub = await nc.subscribe(inbox, cb=on_chunk, pending_msgs_limit=-1, pending_bytes_limit=-1)
    body = json.dumps({"deliver_subject": inbox, "no_consumers": True}).encode()
    reply = await nc.request(f"$JS.API.STREAM.SNAPSHOT.{stream}", body, timeout=TIMEOUT)
    answer = json.loads(reply.data)
    if "error" in answer:
        raise RuntimeError(f"snapshot refused: {answer['error']}")
    await asyncio.wait_for(ended, 600)
    await sub.unsubscribe()
    return answer, bytes(data)


async def restore(nc: nats.NATS, stream: str, config: dict[str, Any], data: bytes) -> dict[str, Any]:
    reply = await nc.request(f"$JS.API.STREAM.RESTORE.{stream}", json.dumps({"config": config}).encode(), timeout=TIMEOUT)
    deliver = json.loads(reply.data)["deliver_subject"]
    for offset in range(0, len(data), RESTORE_CHUNK):
        for attempt in range(50):  # a clustered nats-server's restore subject may reach the client's server late
            try:
                await nc.request(deliver, data[offset : offset + RESTORE_CHUNK], timeout=TIMEOUT)
                break
            except nats.errors.NoRespondersError:
                if attempt == 49:
                    raise
                await asyncio.sleep(0.1)
    final = await nc.request(deliver, b"", timeout=1800)
    result: dict[str, Any] = json.loads(final.data)
    if "error" in result:
        raise RuntimeError(f"restore failed: {result['error']}")
    return result


async def measure(server: str, url: str, pids: list[int], args: argparse.Namespace) -> Row:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream(timeout=TIMEOUT)
        await js.add_stream(name="BACKUP", subjects=["bench.>"], num_replicas=args.nodes)
        await fill(js, args.messages, args.size)
        before = (await js.stream_info("BACKUP")).state
        cpu_start, started = sum(cluster_cpu(pids)), time.perf_counter()
        answer, archive = await snapshot(nc, "BACKUP")
        snapshot_s, snapshot_cpu = time.perf_counter() - started, sum(cluster_cpu(pids)) - cpu_start
        await js.delete_stream("BACKUP")
        cpu_start, started = sum(cluster_cpu(pids)), time.perf_counter()
        await restore(nc, "BACKUP", answer["config"], archive)
        restore_s, restore_cpu = time.perf_counter() - started, sum(cluster_cpu(pids)) - cpu_start
        after = (await js.stream_info("BACKUP")).state
        if (after.messages, after.first_seq, after.last_seq) != (before.messages, before.first_seq, before.last_seq):
            raise RuntimeError(f"{server}: restored {after} from {before}")
    finally:
        await nc.close()
    return Row(server, args.nodes, args.messages, args.size, len(archive), snapshot_s, snapshot_cpu, restore_s, restore_cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--nodes", type=int, default=3, choices=(1, 3))
    parser.add_argument("--servers", default="nats-server,jetraft")
    parser.add_argument("--nats-server", type=Path, default=REPO_ROOT / ".venv" / "bin" / "nats-server")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for server in args.servers.split(","):
        if server == "jetraft":
            cluster = jetraft_cluster((), args.nodes)
        elif args.nodes == 1:
            cluster = nats_server_alone(args.nats_server, sync_always=False)
        else:
            cluster = nats_server_cluster(args.nats_server, sync_always=False)
        with cluster as running:
            rows.append(asyncio.run(measure(server, running.urls[0], running.pids, args)))
    print("| server | nodes | messages | archive | snapshot | CPU | restore | CPU |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.server} | {r.nodes} | {r.messages:,} x {r.size} B | {r.archive_bytes / 1e6:.1f} MB "
            f"| {r.snapshot_s:.2f} s ({r.messages / r.snapshot_s:,.0f} msgs/s) | {r.snapshot_cpu_s:.2f} s "
            f"| {r.restore_s:.2f} s ({r.messages / r.restore_s:,.0f} msgs/s) | {r.restore_cpu_s:.2f} s |"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
