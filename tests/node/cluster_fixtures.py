"""Real 3-node jetraft clusters for the integration tests: processes on 127.0.0.1, stopped by PID."""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cluster.local_cluster import LocalCluster, plan_nodes

HOST = "127.0.0.1"


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port_base(count: int, rng: random.Random | None = None) -> int:
    """A base port with `count` consecutive free ports (the local cluster's plan is contiguous)."""
    rng = rng or random.Random()
    for _ in range(200):
        base = rng.randrange(20_000, 60_000 - count)
        if all(_free(base + offset) for offset in range(count)):
            return base
    raise RuntimeError("no run of free ports found on 127.0.0.1")


@contextmanager
def local_cluster(
    data_dir: Path, nodes: int = 3, mirror_nodes: int = 0, extra_args: list[str] | None = None
) -> Iterator[LocalCluster]:
    total = nodes + mirror_nodes
    specs = plan_nodes(nodes, mirror_nodes, free_port_base(total), free_port_base(total), free_port_base(total))
    cluster = LocalCluster(specs, data_dir, extra_args=extra_args)
    cluster.start(timeout=60)
    try:
        yield cluster
    finally:
        cluster.stop()
