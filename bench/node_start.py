"""Start-up side by side: how long one node takes from exec to serving, jetraft against nats-server 2.15.1.

    .venv/bin/python bench/node_start.py [--starts 10] [--json rows.json]

Each start is a fresh process with an empty store directory, JetStream on, nothing else running: the
time from `exec` until the client port accepts a connection and sends its INFO, and until `/healthz`
answers 200 (JetStream ready: for jetraft, the node's meta group has its leader). The servers alternate,
one start at a time. A restarted server is what a client waits for in a rolling upgrade, a crash, or a
test that restarts it (nats-py's own reconnect tests give it about a second).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(REPO))

from jetstream_bench import HOST, nats_server_healthy, stop_pids  # noqa: E402

from local.ports import free_port_base  # noqa: E402

DEFAULT_NATS = REPO / ".venv" / "bin" / "nats-server"
# a start that takes longer than this is reported as a failure, not waited for
START_TIMEOUT_S = 30.0
POLL_S = 0.002


@dataclass(slots=True)
class Row:
    server: str
    starts: int
    client_port_median_s: float
    client_port_max_s: float
    healthy_median_s: float
    healthy_max_s: float


def command(server: str, nats_binary: Path, store: str, ports: tuple[int, int, int]) -> list[str]:
    client, http, cluster = ports
    if server == "nats-server":
        return [str(nats_binary), "-a", HOST, "-p", str(client), "-m", str(http), "-js", "-sd", store]
    return [
        sys.executable, "-m", "cluster.node.command", "--name", "n1", "--host", HOST,
        "--port", str(client), "--http-port", str(http), "--cluster-port", str(cluster),
        "--data-dir", store, "--log-level", "WARNING",
    ]  # fmt: skip


def client_port_serves(port: int) -> bool:
    """The port accepts a connection and sends the start of its INFO line."""
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as sock:
            return sock.recv(4) == b"INFO"
    except OSError:
        return False


def one_start(server: str, nats_binary: Path) -> tuple[float, float]:
    """(seconds to the client port, seconds to /healthz 200) of one fresh start."""
    base = free_port_base(3)
    ports = (base, base + 1, base + 2)
    with tempfile.TemporaryDirectory(prefix="node-start-") as store:
        started = time.perf_counter()
        proc = subprocess.Popen(
            command(server, nats_binary, store, ports),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            port_at = healthy_at = None
            deadline = started + START_TIMEOUT_S
            while healthy_at is None:
                if proc.poll() is not None or time.perf_counter() > deadline:
                    raise RuntimeError(f"{server} did not start within {START_TIMEOUT_S} s")
                if port_at is None and client_port_serves(ports[0]):
                    port_at = time.perf_counter() - started
                if port_at is not None and nats_server_healthy(ports[1]):
                    healthy_at = time.perf_counter() - started
                time.sleep(POLL_S)  # another process: no event to await, poll it
            return port_at, healthy_at
        finally:
            stop_pids([proc])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--servers", default="nats-server,jetraft")
    parser.add_argument("--nats-server", type=Path, default=DEFAULT_NATS)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    servers = args.servers.split(",")
    times: dict[str, list[tuple[float, float]]] = {server: [] for server in servers}
    for _ in range(args.starts):
        for server in servers:
            times[server].append(one_start(server, args.nats_server))
    rows = []
    for server, pairs in times.items():
        ports, healths = [p for p, _ in pairs], [h for _, h in pairs]
        rows.append(
            Row(
                server=server,
                starts=len(pairs),
                client_port_median_s=round(statistics.median(ports), 3),
                client_port_max_s=round(max(ports), 3),
                healthy_median_s=round(statistics.median(healths), 3),
                healthy_max_s=round(max(healths), 3),
            )
        )
    print("| server | starts | client port, median / max | /healthz 200, median / max |")
    print("|---|---|---|---|")
    for row in rows:
        print(
            f"| {row.server} | {row.starts} | {row.client_port_median_s:.3f} / {row.client_port_max_s:.3f} s "
            f"| {row.healthy_median_s:.3f} / {row.healthy_max_s:.3f} s |"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))


if __name__ == "__main__":
    main()
