"""The WebSocket port side by side: core NATS over `ws://` (and over the client port, for reference) on
one jetraft node and one nats-server 2.15.1, with the nats CLI's load generator (nats.go).

    .venv/bin/python bench/websocket_bench.py [--rounds 2] [--msgs 100000] [--requests 5000] [--json rows.json]

Each server in turn runs alone with `websocket { no_tls: true }`; per transport, three workloads of
128-byte messages: `pub` (one publisher: the rate the server reads at), `pubsub` (a subscriber and a
publisher on the same connection kind: the rate messages are delivered at) and `request` (a service and a
requester, one request at a time: its median round trip). The server's CPU per message comes from /proc.
Rounds alternate the servers' order; the table shows medians. The CLI is `make nats-cli`'s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(REPO))

from jetstream_bench import HOST, STARTUP_TIMEOUT_S, nats_server_healthy, stop_pids  # noqa: E402
from natscli_bench import P50, STATS, run_nats  # noqa: E402
from stream_create import cpu_seconds  # noqa: E402

from local.ports import free_port_base  # noqa: E402

SERVERS = ("nats-server", "jetraft")
TRANSPORTS = ("ws", "nats")
SUBJECT = "bench.ws"
# a subscriber still short of its messages this long after the publisher finished lost some
RECEIVE_TIMEOUT_S = 60.0


@dataclass(slots=True)
class Row:
    server: str
    transport: str
    workload: str
    msgs_per_s: float
    p50_us: float | None
    server_cpu_us_per_msg: float


@contextlib.contextmanager
def one_server(server: str, nats_binary: Path) -> Iterator[tuple[dict[str, str], int]]:
    """The server's URL per transport, and its pid."""
    base = free_port_base(4)
    client, http, cluster, ws = base, base + 1, base + 2, base + 3
    with tempfile.TemporaryDirectory(prefix="ws-bench-") as tmp:
        config = Path(tmp) / "ws.conf"
        config.write_text(f"websocket {{ host: {HOST}, port: {ws}, no_tls: true }}\n")
        if server == "nats-server":
            cmd = [str(nats_binary), "-a", HOST, "-p", str(client), "-m", str(http), "-c", str(config)]
        else:
            cmd = [
                sys.executable, "-m", "cluster.node.command", "--name", "n1", "--host", HOST,
                "--port", str(client), "--http-port", str(http), "--cluster-port", str(cluster),
                "--data-dir", str(Path(tmp) / "data"), "--log-level", "WARNING", "--config", str(config),
            ]  # fmt: skip
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            while not nats_server_healthy(http):  # another process: no event to await, poll it
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{server} did not become healthy")
                time.sleep(0.05)
            yield {"ws": f"ws://{HOST}:{ws}", "nats": f"nats://{HOST}:{client}"}, proc.pid
        finally:
            stop_pids([proc])


def rate_and_p50(output: str) -> tuple[float, float | None]:
    found = STATS.search(output)
    if found is None:
        raise RuntimeError(f"no stats line in:\n{output}")
    p50 = P50.search(output, found.end())
    return float(found.group(1).replace(",", "")), float(p50.group(1).replace(",", "")) if p50 else None


def cpu_total(pid: int) -> float:
    user, system = cpu_seconds(pid)
    return user + system


@dataclass(frozen=True, slots=True)
class Workload:
    """The CLI's commands for one workload: `receiver` (started first, or None) and `sender`; the rate is
    read from the receiver's output when `rate_from_receiver`, else from the sender's."""

    receiver: list[str] | None
    sender: list[str]
    rate_from_receiver: bool
    # the sender's P50 is a round trip (a request), not the time of a publish call
    reports_p50: bool


def workload_commands(name: str, msgs: int, requests: int) -> tuple[Workload, int]:
    """The workload, and how many messages it moves."""
    publish = ["bench", "pub", SUBJECT, "--msgs", str(msgs), "--no-progress"]
    if name == "pub":
        return Workload(None, publish, rate_from_receiver=False, reports_p50=False), msgs
    if name == "pubsub":
        subscribe = ["bench", "sub", SUBJECT, "--msgs", str(msgs), "--no-progress"]
        return Workload(subscribe, publish, rate_from_receiver=True, reports_p50=False), msgs
    service = f"{SUBJECT}.svc"
    serve = ["bench", "service", "serve", service, "--msgs", str(requests), "--no-progress"]
    request = ["bench", "service", "request", service, "--msgs", str(requests), "--no-progress"]
    return Workload(serve, request, rate_from_receiver=False, reports_p50=True), requests


def run_with_receiver(cli: Path, url: str, workload: Workload) -> tuple[str, str]:
    """The sender's and the receiver's outputs, the receiver started first."""
    assert workload.receiver is not None
    with subprocess.Popen(
        [str(cli), "--no-context", "-s", url, *workload.receiver],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
    ) as receiver:  # fmt: skip
        time.sleep(0.5)  # the CLI says nothing when its subscription is in place: give it that long
        sent = run_nats(cli, url, workload.sender)
        if not workload.rate_from_receiver:
            receiver.terminate()  # a service serves until stopped
        try:
            received, _ = receiver.communicate(timeout=RECEIVE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            receiver.kill()
            raise RuntimeError(f"the receiver did not finish within {RECEIVE_TIMEOUT_S} s of the sender") from None
    return sent, received


def measure(cli: Path, url: str, pid: int, name: str, msgs: int, requests: int) -> tuple[float, float | None, float]:
    """(messages a second, p50 of a round trip in us or None, server CPU us per message) of one workload."""
    workload, count = workload_commands(name, msgs, requests)
    before = cpu_total(pid)
    if workload.receiver is None:
        sent, received = run_nats(cli, url, workload.sender), ""
    else:
        sent, received = run_with_receiver(cli, url, workload)
    used = cpu_total(pid) - before
    rate, p50 = rate_and_p50(received if workload.rate_from_receiver else sent)
    return rate, p50 if workload.reports_p50 else None, used / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--msgs", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--nats-cli", type=Path, default=REPO / ".tools" / "bin" / "nats")
    parser.add_argument("--nats-server", type=Path, default=Path(sys.executable).with_name("nats-server"))
    parser.add_argument("--json", type=Path, help="also write every measured row here")
    args = parser.parse_args()
    rows: list[Row] = []
    for round_index in range(args.rounds):
        order = SERVERS if round_index % 2 == 0 else SERVERS[::-1]
        for server in order:
            with one_server(server, args.nats_server) as (urls, pid):
                for transport in TRANSPORTS:
                    for workload in ("pub", "pubsub", "request"):
                        rate, p50, cpu = measure(args.nats_cli, urls[transport], pid, workload, args.msgs, args.requests)
                        rows.append(Row(server, transport, workload, rate, p50, round(cpu, 2)))
    print("| transport | workload | nats-server msgs/s | jetraft msgs/s | jetraft/nats | p50 us nats / jetraft "
          "| server CPU us/msg nats / jetraft |")
    print("|---|---|---|---|---|---|---|")
    for transport in TRANSPORTS:
        for workload in ("pub", "pubsub", "request"):
            cells = {}
            for server in SERVERS:
                mine = [row for row in rows if (row.server, row.transport, row.workload) == (server, transport, workload)]
                p50s = [row.p50_us for row in mine if row.p50_us is not None]
                cells[server] = (
                    statistics.median(row.msgs_per_s for row in mine),
                    statistics.median(p50s) if p50s else None,
                    statistics.median(row.server_cpu_us_per_msg for row in mine),
                )
            nats, ours = cells["nats-server"], cells["jetraft"]
            p50 = " / ".join(f"{value:,.0f}" if value is not None else "-" for value in (nats[1], ours[1]))
            print(
                f"| {transport} | {workload} | {nats[0]:,.0f} | {ours[0]:,.0f} | {ours[0] / nats[0]:.2f} | {p50} "
                f"| {nats[2]:.2f} / {ours[2]:.2f} |"
            )
    if args.json:
        args.json.write_text(json.dumps([asdict(row) for row in rows], indent=2))


if __name__ == "__main__":
    main()
