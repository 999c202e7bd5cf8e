"""Real jetraft clusters for the integration tests: processes on 127.0.0.1, stopped by PID."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nats

from cluster.local_cluster import LocalCluster, plan_free_nodes


@contextmanager
def local_cluster(
    data_dir: Path, nodes: int = 3, mirror_nodes: int = 0, extra_args: list[str] | None = None
) -> Iterator[LocalCluster]:
    cluster = LocalCluster(plan_free_nodes(nodes, mirror_nodes), data_dir, extra_args=extra_args)
    cluster.start(timeout=60)
    try:
        yield cluster
    finally:
        cluster.stop()


async def every_replica_applied(nc: nats.NATS, stream: str, subject: str, seq: int) -> None:
    """Until all three replicas have applied `seq`: nats-py's KV reads are Direct Gets, answered by any
    replica, so a read right after a write may be stale until then (that is Direct Get's trade-off)."""
    request = json.dumps({"last_by_subj": subject, "min_last_seq": seq}).encode()
    seen: set[str] = set()
    for _ in range(400):
        reply = await nc.request(f"$JS.API.DIRECT.GET.{stream}", request, timeout=5)
        assert reply.headers is not None and int(reply.headers["Jetraft-Last-Sequence"]) >= seq
        seen.add(reply.headers["Jetraft-Node"])
        if len(seen) == 3:
            return
    raise AssertionError(f"only {sorted(seen)} answered for {stream} seq {seq}")
