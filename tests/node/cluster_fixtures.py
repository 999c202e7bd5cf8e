"""Real jetraft clusters for the integration tests: processes on 127.0.0.1, stopped by PID."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

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
