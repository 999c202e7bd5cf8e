"""Start-up side by side: how long one node takes from exec to serving, jetraft against nats-server 2.15.1.

    .venv/bin/python bench/node_start.py [--starts 10] [--json rows.json]

Each start is a fresh process with an empty store directory, JetStream on, nothing else running: the
time from `exec` until the client port takes a connection, until the INFO on that connection, and until
`/healthz` answers 200 (JetStream ready: for jetraft, the node's meta group has its leader). The servers alternate,
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
    connection_taken_median_s: float
    info_median_s: float
    info_max_s: float
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


def first_connection(port: int, deadline: float) -> socket.socket | None:
    """The first connection the client port takes, or None before the deadline."""
    while time.perf_counter() < deadline:
        try:
            return socket.create_connection((HOST, port), timeout=START_TIMEOUT_S)
        except OSError:
            time.sleep(POLL_S)  # another process: no event to await, poll it
    return None


def one_start(server: str, nats_binary: Path) -> tuple[float, float, float]:
    """(seconds to the client port taking a connection, to its INFO on it, to /healthz 200) of one fresh start."""
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
            deadline = started + START_TIMEOUT_S
            sock = first_connection(ports[0], deadline)
            if sock is None:
                raise RuntimeError(f"{server} did not take a connection within {START_TIMEOUT_S} s")
            with sock:
                accepted_at = time.perf_counter() - started
                if sock.recv(4) != b"INFO":
                    raise RuntimeError(f"{server} closed its first connection without an INFO")
                info_at = time.perf_counter() - started
            while not nats_server_healthy(ports[1]):
                if proc.poll() is not None or time.perf_counter() > deadline:
                    raise RuntimeError(f"{server} did not start within {START_TIMEOUT_S} s")
                time.sleep(POLL_S)
            return accepted_at, info_at, time.perf_counter() - started
        finally:
            stop_pids([proc])


def median_and_max(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} / {max(values):.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--servers", default="nats-server,jetraft")
    parser.add_argument("--nats-server", type=Path, default=DEFAULT_NATS)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    servers = args.servers.split(",")
    times: dict[str, list[tuple[float, float, float]]] = {server: [] for server in servers}
    for _ in range(args.starts):
        for server in servers:
            times[server].append(one_start(server, args.nats_server))
    rows = []
    print("| server | starts | connection taken, median / max | INFO, median / max | /healthz 200, median / max |")
    print("|---|---|---|---|---|")
    for server, starts in times.items():
        accepts, infos, healths = ([start[i] for start in starts] for i in range(3))
        rows.append(
            Row(
                server=server,
                starts=len(starts),
                connection_taken_median_s=round(statistics.median(accepts), 3),
                info_median_s=round(statistics.median(infos), 3),
                info_max_s=round(max(infos), 3),
                healthy_median_s=round(statistics.median(healths), 3),
                healthy_max_s=round(max(healths), 3),
            )
        )
        print(
            f"| {server} | {len(starts)} | {median_and_max(accepts)} | {median_and_max(infos)} "
            f"| {median_and_max(healths)} |"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))


if __name__ == "__main__":
    main()
