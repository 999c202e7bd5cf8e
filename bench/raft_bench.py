"""Raft commit throughput and latency: jetraft's host against PySyncObj 0.3.17, same machine, same run.

    .venv/bin/python bench/raft_bench.py [--count 60000] [--inflight 1000] [--latency-count 1000]
                                         [--size 128] [--skip-pysyncobj] [--profile out.html]

jetraft: 3 `python -m raft.testnode` processes on 127.0.0.1 (gRPC transport,
RocksDB log, fsync always, uvloop). 128-byte commands are proposed inside the
leader's process (`POST /load`), `--inflight` at a time for throughput, then one
at a time for unloaded latency. A command's latency runs from its proposal to
its application on the leader, which follows a quorum's fsync.

PySyncObj: 3 processes of this script (`--pysyncobj-node`), one replicated
counter, commands proposed inside the leader's process with the same window.
PySyncObj keeps its log in memory and never fsyncs.

The machine has 2 cores shared by the 3 processes (and by anything else
running): compare the two systems within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from local.ports import free_ports
from local.raft_nodes import HOST, TestNodeCluster


def _percentile(sorted_values: list[float], fraction: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(int(fraction * len(sorted_values)), len(sorted_values) - 1)]


# ---------------------------------------------------------------- jetraft


async def bench_jetraft(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="raft-bench-") as tmp:
        # A 1 s election timeout (20 ticks of 50 ms), as cluster nodes use: a loaded,
        # shared machine stalls event loops for hundreds of milliseconds.
        extra = ["--uvloop", "--snapshot-interval", "100000", "--election-tick", "20"]
        if args.profile:
            extra += ["--log-level", "ERROR"]
        cluster = TestNodeCluster(Path(tmp), args=extra)
        try:
            await cluster.start_all()
            leader = await cluster.leader()
            profiler: subprocess.Popen[bytes] | None = None
            if args.profile:
                pid = cluster.nodes[leader].process.pid  # type: ignore[union-attr]
                profiler = subprocess.Popen(
                    [
                        str(Path(sys.executable).parent / "py-spy"),
                        "record",
                        "-p",
                        str(pid),
                        "-o",
                        args.profile,
                        "-f",
                        "raw",
                        "-r",
                        "200",
                        "--nonblocking",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            warm = {"count": 2_000, "size": args.size, "inflight": 200, "max_seconds": 30}
            await cluster.request(leader, "POST", "/load", json=warm)
            leader = await cluster.leader()
            cpu_before = {name: (await cluster.status(name))["cpu_seconds"] for name in cluster.nodes}
            loaded = await cluster.request(
                leader,
                "POST",
                "/load",
                json={"count": args.count, "size": args.size, "inflight": args.inflight, "max_seconds": 60},
            )
            cpu_after = {name: (await cluster.status(name))["cpu_seconds"] for name in cluster.nodes}
            loaded["cpu_us_per_entry"] = {
                ("leader" if name == leader else name): (cpu_after[name] - cpu_before[name])
                / max(loaded["committed"], 1)
                * 1e6
                for name in cluster.nodes
            }
            if profiler is not None:
                profiler.send_signal(signal.SIGINT)
                profiler.wait(30)
            leader = await cluster.leader()  # a loaded run on a busy machine may have moved it
            unloaded = await cluster.request(
                leader,
                "POST",
                "/load",
                json={"count": args.latency_count, "size": args.size, "inflight": 1, "max_seconds": 60},
            )
            status = await cluster.status(leader)
        finally:
            await cluster.close()
    return {"loaded": loaded, "unloaded": unloaded, "leader_status": status}


# ---------------------------------------------------------------- PySyncObj


def _pysyncobj_node(address: str, partners: list[str], spec: dict[str, Any]) -> None:
    """One PySyncObj process; if it becomes the leader it runs the load and prints the result."""
    from pysyncobj import SyncObj, SyncObjConf, replicated

    class Counter(SyncObj):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(address, partners, SyncObjConf(dynamicMembershipChange=False))
            self.count = 0

        @replicated  # type: ignore[misc]
        def add(self, data: bytes) -> int:
            self.count += 1
            return self.count

    node = Counter()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = node.getStatus()
        if status.get("leader") is not None and node.isReady():
            break
        time.sleep(0.05)  # PySyncObj runs its own thread: there is nothing to await
    else:
        raise SystemExit(f"{address}: no leader within 60 s")
    if str(node.getStatus()["leader"]) != str(node.getStatus()["self"]):
        time.sleep(spec["linger"])  # followers serve until the parent stops them
        return
    results = {}
    for phase in ("warm", "loaded", "unloaded"):
        results[phase] = _pysyncobj_load(node, **spec[phase], size=spec["size"])
    print(json.dumps({"leader": address, **results}), flush=True)
    time.sleep(spec["linger"])


def _pysyncobj_load(node: Any, count: int, inflight: int, size: int, max_seconds: float) -> dict[str, Any]:
    window = threading.Semaphore(inflight)
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    all_done = threading.Event()
    state = {"issued": 0, "completed": 0, "issuing": True}
    padding = b"p" * (size - 8)

    def done(result: Any, error: Any, started: float) -> None:
        nonlocal errors
        with lock:
            if error == 0:  # FAIL_REASON.SUCCESS
                latencies.append(time.perf_counter() - started)
            else:
                errors += 1
            state["completed"] += 1
            if not state["issuing"] and state["completed"] == state["issued"]:
                all_done.set()
        window.release()

    began = time.perf_counter()
    deadline = began + max_seconds
    for i in range(count):
        if time.perf_counter() > deadline or not window.acquire(timeout=max_seconds):
            break
        with lock:
            state["issued"] += 1
        node.add(
            i.to_bytes(8, "big") + padding, callback=functools.partial(done, started=time.perf_counter())
        )
    with lock:
        state["issuing"] = False
        if state["completed"] == state["issued"]:
            all_done.set()
    all_done.wait(max_seconds)
    elapsed = time.perf_counter() - began
    latencies.sort()
    return {
        "committed": len(latencies),
        "issued": state["issued"],
        "seconds": elapsed,
        "rate": len(latencies) / elapsed if elapsed > 0 else 0.0,
        "p50_ms": _percentile(latencies, 0.50) * 1e3,
        "p99_ms": _percentile(latencies, 0.99) * 1e3,
        "errors": errors,
    }


def bench_pysyncobj(args: argparse.Namespace) -> dict[str, Any]:
    addresses = [f"{HOST}:{port}" for port in free_ports(3)]
    spec = {
        "size": args.size,
        "warm": {"count": 2_000, "inflight": 200, "max_seconds": 30},
        "loaded": {"count": args.count, "inflight": args.inflight, "max_seconds": 60},
        "unloaded": {"count": args.latency_count, "inflight": 1, "max_seconds": 60},
        "linger": 300,
    }
    processes = []
    for address in addresses:
        partners = [a for a in addresses if a != address]
        command = [
            sys.executable,
            __file__,
            "--pysyncobj-node",
            address,
            *partners,
            "--spec",
            json.dumps(spec),
        ]
        processes.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
    try:
        result: dict[str, Any] | None = None
        reader = {p.stdout.fileno(): p for p in processes if p.stdout is not None}
        deadline = time.monotonic() + 240
        import selectors

        with selectors.DefaultSelector() as selector:
            for fd in reader:
                selector.register(fd, selectors.EVENT_READ)
            while result is None and time.monotonic() < deadline:
                for key, _ in selector.select(timeout=1.0):
                    process = reader[key.fd]
                    assert process.stdout is not None
                    line = process.stdout.readline()
                    if line.strip():
                        result = json.loads(line)
                        break
                    selector.unregister(key.fd)
        if result is None:
            raise RuntimeError("PySyncObj produced no result in time")
        return result
    finally:
        for process in processes:  # stopped by PID
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait()


# ---------------------------------------------------------------- report


def _line(name: str, phase: dict[str, Any]) -> str:
    return (
        f"{name:<34} {phase['rate']:>9,.0f} entries/s   p50 {phase['p50_ms']:7.2f} ms   "
        f"p99 {phase['p99_ms']:8.2f} ms   ({phase['committed']:,} committed in {phase['seconds']:.1f} s"
        + (f", errors {phase['errors']}" if phase.get("errors") else "")
        + ")"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=60_000, help="commands in the loaded run")
    parser.add_argument("--inflight", type=int, default=1_000, help="commands in flight in the loaded run")
    parser.add_argument("--latency-count", type=int, default=1_000, help="commands proposed one at a time")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--skip-pysyncobj", action="store_true")
    parser.add_argument("--profile", help="py-spy speedscope profile of the jetraft leader's loaded run")
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON too")
    parser.add_argument("--pysyncobj-node", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pysyncobj_node:
        _pysyncobj_node(args.pysyncobj_node[0], args.pysyncobj_node[1:], json.loads(args.spec))
        return
    if not (args.count > 0 and args.inflight > 0 and args.latency_count > 0 and 8 <= args.size <= 1 << 20):
        parser.error("counts must be positive and --size between 8 and 1 MiB")

    results: dict[str, Any] = {"jetraft": asyncio.run(bench_jetraft(args))}
    if not args.skip_pysyncobj:
        results["pysyncobj"] = bench_pysyncobj(args)

    jet = results["jetraft"]
    print(f"3 processes on {HOST}, {args.size}-byte commands proposed in the leader's process")
    print(_line(f"jetraft, {args.inflight} in flight", jet["loaded"]))
    print(_line("jetraft, 1 in flight", jet["unloaded"]))
    loaded = jet["loaded"]
    if loaded.get("fsyncs"):
        print(
            f"  jetraft leader: {loaded['fsyncs']:,} fsyncs, "
            f"{loaded['committed'] / loaded['fsyncs']:.0f} entries per fsync"
        )
    cpu = loaded.get("cpu_us_per_entry", {})
    if cpu:
        shares = ", ".join(f"{name} {value:.0f}" for name, value in cpu.items())
        print(f"  jetraft CPU per committed entry (us): {shares}")
    if "pysyncobj" in results:
        pso = results["pysyncobj"]
        print(_line(f"PySyncObj (no fsync), {args.inflight} in flight", pso["loaded"]))
        print(_line("PySyncObj (no fsync), 1 in flight", pso["unloaded"]))
    if args.json:
        print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
