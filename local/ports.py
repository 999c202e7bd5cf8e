"""Free TCP ports on 127.0.0.1 for local processes (nodes, nats-server, Prometheus) in tests and benchmarks."""

from __future__ import annotations

import random
import socket

HOST = "127.0.0.1"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port_base(count: int, rng: random.Random | None = None) -> int:
    """The first of `count` consecutive ports nobody listens on right now, below Linux's ephemeral range
    (32768+): a client that probes a port there before its server listens can be handed that very port
    as its own source and connect to itself, reading back its own request."""
    rng = rng or random.Random()
    for _ in range(1000):
        base = rng.randrange(10_000, 32_000 - count)
        if all(_port_free(base + offset) for offset in range(count)):
            return base
    raise RuntimeError("no run of free ports below the ephemeral range on 127.0.0.1")


def free_port() -> int:
    return free_port_base(1)


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports, one block (separate probes may hand out the same port twice)."""
    base = free_port_base(count)
    return list(range(base, base + count))
