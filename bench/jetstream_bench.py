"""JetStream side by side: a 3-node jetraft cluster against a 3-node nats-server 2.15.1 cluster.

    .venv/bin/python bench/jetstream_bench.py [--rounds 2] [--seconds 5] [--json rows.json]

Each round starts one cluster at a time (the machine has 2 cores: two
clusters at once would measure the contention, not the servers), runs the
agreed client (`../shared/bench/jsbench.py`, nats-py) with R3 streams and
the server PIDs for CPU sampling, then stops the cluster. Three servers:
nats-server with its defaults (fsync every 2 minutes), nats-server with
`sync_interval: always` (an fsync per write, what jetraft does) and jetraft.
The order alternates from round to round so a slow patch of the shared
machine does not always land on the same server. Figures are the median
over the rounds; quote the ratios, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: bench/ is on sys.path, the packages are not
    sys.path.insert(0, str(REPO_ROOT))

from local.cluster import LocalCluster, plan_free_nodes  # noqa: E402
from local.ports import free_ports  # noqa: E402

HOST = "127.0.0.1"
WORKLOADS = ["pub_sync", "pub_async", "msg_get", "direct_get", "kv_put", "kv_get"]
NATS_DEFAULT = "nats-server"
NATS_SYNC = "nats-server (sync always)"
JETRAFT = "jetraft"
SERVERS = [NATS_DEFAULT, NATS_SYNC, JETRAFT]
STARTUP_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class RunningCluster:
    urls: list[str]
    pids: list[int]
    # where the servers' logs are, until the cluster stops (then a temporary directory is gone)
    logs: Path


def stop_pids(procs: list[subprocess.Popen[bytes]], grace_s: float = 10.0) -> None:
    """SIGTERM each process by PID, SIGKILL whatever is still there after the grace period."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def nats_server_config(
    name: str,
    client_port: int,
    http_port: int,
    cluster_ports: list[int],
    own_cluster_port: int,
    store_dir: Path,
    sync_always: bool,
    extra: str = "",
) -> str:
    routes = ", ".join(f'"nats-route://{HOST}:{port}"' for port in cluster_ports if port != own_cluster_port)
    sync = "  sync_interval: always\n" if sync_always else ""
    return (
        f'server_name: "{name}"\n'
        f'listen: "{HOST}:{client_port}"\n'
        f'http: "{HOST}:{http_port}"\n'
        f'jetstream {{\n  store_dir: "{store_dir}"\n{sync}}}\n'
        f'cluster {{\n  name: "bench"\n  listen: "{HOST}:{own_cluster_port}"\n  routes: [{routes}]\n}}\n'
        f"{extra}"
    )


def nats_server_healthy(http_port: int) -> bool:
    """/healthz answers 200 once JetStream is up and the node is current with a meta leader."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{http_port}/healthz", timeout=1.0) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def nats_server_cluster(binary: Path, sync_always: bool, extra_config: str = "") -> Iterator[RunningCluster]:
    """Three nats-server processes in one cluster; `extra_config` is appended to each one's config file."""
    ports = free_ports(9)
    client_ports, http_ports, cluster_ports = ports[0:3], ports[3:6], ports[6:9]
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="jsbench-nats-") as tmp:
        try:
            for index in range(3):
                name = f"s{index + 1}"
                config = Path(tmp) / f"{name}.conf"
                config.write_text(
                    nats_server_config(
                        name, client_ports[index], http_ports[index], cluster_ports,
                        cluster_ports[index], Path(tmp) / name, sync_always, extra_config,
                    )
                )  # fmt: skip
                log = open(Path(tmp) / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
                procs.append(
                    subprocess.Popen(
                        [str(binary), "-c", str(config)], stdout=log, stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )  # fmt: skip
                log.close()
            deadline = time.monotonic() + STARTUP_TIMEOUT_S
            # nats-server has no readiness event to await from another process: poll its /healthz
            while not all(nats_server_healthy(port) for port in http_ports):
                if any(proc.poll() is not None for proc in procs) or time.monotonic() > deadline:
                    raise RuntimeError(f"nats-server cluster did not become healthy; logs in {tmp}")
                time.sleep(0.1)
            yield RunningCluster(
                [f"nats://{HOST}:{port}" for port in client_ports], [p.pid for p in procs], Path(tmp)
            )
        finally:
            stop_pids(procs)


@contextlib.contextmanager
def jetraft_cluster(node_args: Sequence[str] = (), nodes: int = 3) -> Iterator[RunningCluster]:
    specs = plan_free_nodes(nodes, 0)
    with tempfile.TemporaryDirectory(prefix="jsbench-jetraft-") as tmp:
        cluster = LocalCluster(specs, tmp, extra_args=["--log-level", "WARNING", *node_args])
        try:
            cluster.start(timeout=STARTUP_TIMEOUT_S)
            yield RunningCluster(
                cluster.client_urls, [proc.pid for proc in cluster.procs.values()], cluster.log_dir
            )
        finally:
            cluster.stop()


def start_cluster(
    server: str, nats_binary: Path, jetraft_args: Sequence[str] = ()
) -> contextlib.AbstractContextManager[RunningCluster]:
    if server == JETRAFT:
        return jetraft_cluster(jetraft_args)
    return nats_server_cluster(nats_binary, sync_always=server == NATS_SYNC)


def run_jsbench(
    jsbench: Path,
    cluster: RunningCluster,
    server: str,
    workloads: list[str],
    seconds: float,
    round_no: int,
    extra_args: list[str],
) -> list[dict[str, object]]:
    """One jsbench process over all workloads; its JSON result lines, tagged with server and round."""
    cmd = [
        sys.executable, str(jsbench),
        "--url", ",".join(cluster.urls), "--replicas", "3", "--seconds", str(seconds),
        "--workloads", ",".join(workloads), "--pids", ",".join(str(pid) for pid in cluster.pids),
        "--label", server, *extra_args,
    ]  # fmt: skip
    # jsbench bounds itself (SIGALRM); this backstop leaves room for its retries and idle waits
    bound_s = len(workloads) * (4 * (seconds + 120) + 150) + 60
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=bound_s)
    finally:
        stop_pids([proc], grace_s=2.0)
    rows: list[dict[str, object]] = []
    for line in stdout.decode().splitlines():
        with contextlib.suppress(ValueError):
            row = json.loads(line)
            if isinstance(row, dict) and "workload" in row:
                rows.append({**row, "server": server, "round": round_no})
    if proc.returncode != 0:
        print(
            f"jsbench against {server} exited {proc.returncode}: {stderr.decode()[-2000:]}", file=sys.stderr
        )
    return rows


def round_order(round_no: int) -> list[str]:
    return SERVERS if round_no % 2 == 0 else list(reversed(SERVERS))


def median_of(rows: list[dict[str, object]], server: str, workload: str, key: str) -> float | None:
    return _median(rows, server, workload, lambda row: row.get(key))  # type: ignore[arg-type,return-value]


def _median(
    rows: list[dict[str, object]], server: str, workload: str, value: Callable[[dict[str, object]], float | None]
) -> float | None:
    """The median of `value(row)` over the rounds of one server and workload that have one."""
    values = [
        float(v)
        for row in rows
        if row["server"] == server and row["workload"] == workload
        for v in [value(row)]
        if v is not None
    ]
    return statistics.median(values) if values else None


def server_cpu_us_per_op(row: dict[str, object]) -> float | None:
    """CPU the cluster's processes spent per operation (all nodes, from /proc through jsbench --pids)."""
    per_pid = row.get("server_cpu_pct")
    ops = row.get("ops_per_s")
    if not isinstance(per_pid, dict) or not per_pid or not ops:
        return None
    return sum(float(pct) for pct in per_pid.values()) / 100 * 1e6 / float(ops)  # type: ignore[arg-type]


def median_cpu_per_op(rows: list[dict[str, object]], server: str, workload: str) -> float | None:
    return _median(rows, server, workload, server_cpu_us_per_op)


def _num(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _ratio(top: float | None, bottom: float | None) -> str:
    return "—" if top is None or not bottom else f"{top / bottom:.2f}"


def format_table(rows: list[dict[str, object]], workloads: list[str]) -> str:
    """Markdown: ops/s per server, jetraft / nats-server ratios, p50 ms per server, and the servers' CPU
    per operation (all nodes), each the median over the rounds."""
    header = (
        "| workload | nats-server ops/s | nats-server (sync always) ops/s | jetraft ops/s "
        "| jetraft/nats ops | jetraft/nats-sync ops | p50 ms nats / sync / jetraft | jetraft/nats p50 "
        "| server CPU us/op nats / sync / jetraft | jetraft/nats CPU |"
    )
    lines = [header, "|" + "---|" * 10]
    for workload in workloads:
        ops = {server: median_of(rows, server, workload, "ops_per_s") for server in SERVERS}
        p50 = {server: median_of(rows, server, workload, "p50_ms") for server in SERVERS}
        cpu = {server: median_cpu_per_op(rows, server, workload) for server in SERVERS}
        lines.append(
            f"| {workload} | {_num(ops[NATS_DEFAULT])} | {_num(ops[NATS_SYNC])} | {_num(ops[JETRAFT])} "
            f"| {_ratio(ops[JETRAFT], ops[NATS_DEFAULT])} | {_ratio(ops[JETRAFT], ops[NATS_SYNC])} "
            f"| {_num(p50[NATS_DEFAULT], 2)} / {_num(p50[NATS_SYNC], 2)} / {_num(p50[JETRAFT], 2)} "
            f"| {_ratio(p50[JETRAFT], p50[NATS_DEFAULT])} "
            f"| {_num(cpu[NATS_DEFAULT])} / {_num(cpu[NATS_SYNC])} / {_num(cpu[JETRAFT])} "
            f"| {_ratio(cpu[JETRAFT], cpu[NATS_DEFAULT])} |"
        )
    return "\n".join(lines)


def load_summary(rows: list[dict[str, object]]) -> str:
    """How much CPU other processes took while each server was measured (jsbench's foreign_cpu_pct)."""
    parts = []
    for server in SERVERS:
        values = [
            float(row["foreign_cpu_pct"])  # type: ignore[arg-type]
            for row in rows
            if row["server"] == server and row.get("foreign_cpu_pct") is not None
        ]
        if values:
            parts.append(f"{server} {statistics.median(values):.0f}%")
    return "other processes' CPU while measuring (median, % of one core; 2 cores = 200%): " + ", ".join(parts)


def failures(rows: list[dict[str, object]]) -> list[str]:
    notes = []
    for row in rows:
        logs = f" (server logs in {row['logs']})" if "logs" in row else ""
        if "failed" in row:
            notes.append(f"{row['server']} round {row['round']} {row['workload']}: {row['failed']}{logs}")
        elif row.get("errors"):
            notes.append(
                f"{row['server']} round {row['round']} {row['workload']} errors: {row['errors']}{logs}"
            )
    return notes


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds; each runs every server once")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per workload")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--servers", default=",".join(SERVERS), help=f"subset of: {', '.join(SERVERS)}")
    parser.add_argument(
        "--jsbench", type=Path, default=REPO_ROOT.parent / "shared" / "bench" / "jsbench.py",
        help="the agreed client (default ../shared/bench/jsbench.py from the repo root)",
    )  # fmt: skip
    parser.add_argument("--nats-server", type=Path, default=REPO_ROOT / ".venv" / "bin" / "nats-server")
    parser.add_argument("--json", type=Path, help="write the raw jsbench rows here")
    parser.add_argument(
        "--jsbench-arg", action="append", default=[], metavar="ARG",
        help="pass ARG to jsbench (repeatable), e.g. --jsbench-arg=--max-foreign=40 --jsbench-arg=--wait-idle=30",
    )  # fmt: skip
    parser.add_argument(
        "--jetraft-arg", action="append", default=[], metavar="ARG",
        help="pass ARG to every jetraft node (repeatable), e.g. --jetraft-arg=--direct-get-policy=random",
    )  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    workloads = [name.strip() for name in args.workloads.split(",") if name.strip()]
    servers = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = set(servers) - set(SERVERS)
    if unknown:
        raise SystemExit(f"unknown servers: {', '.join(sorted(unknown))}")
    rows: list[dict[str, object]] = []
    for round_no in range(args.rounds):
        for server in [name for name in round_order(round_no) if name in servers]:
            print(f"round {round_no + 1}/{args.rounds}: {server}", file=sys.stderr, flush=True)
            with start_cluster(server, args.nats_server, args.jetraft_arg) as cluster:
                results = run_jsbench(
                    args.jsbench, cluster, server, workloads, args.seconds, round_no, args.jsbench_arg
                )
                if failures(results):
                    # the cluster's directory goes with it: keep its logs for the failure's cause
                    kept = Path(tempfile.mkdtemp(prefix=f"jsbench-logs-{server.replace(' ', '-')}-"))
                    for log in cluster.node.logs.glob("*.log"):
                        shutil.copy2(log, kept)
                    for result in results:
                        result["logs"] = str(kept)
                rows += results
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(format_table(rows, workloads))
    print()
    print(load_summary(rows))
    for note in failures(rows):
        print(f"- {note}")


if __name__ == "__main__":
    main()
