"""CPU per operation of a 3-node jetraft cluster, by node and by phase, under jsbench's workloads.

    .venv/bin/python bench/phase_cpu.py [--workloads pub_async,kv_put,direct_get] [--seconds 8]

For each workload, a fresh 3-node cluster (`jetstream_bench.py`'s; R3 file streams, the client on n1)
runs with `JETRAFT_PHASE_CPU_DIR` set (cluster/runtime/phase_cpu.py), and the agreed client
(`../shared/bench/jsbench.py`) runs the workload. Between two of the nodes' phase reports taken
inside the client's measuring window (after `--settle` seconds, `--window` seconds apart) it prints,
per node, the loop thread's and the whole process's CPU per operation and each phase's, the
operations being the client's rate times the window. Phases nest, so their times are inclusive; the
loop thread's CPU less the phases is the event loop itself, the gRPC calls' Python and what no phase
covers. Figures of one run on a shared machine move by 10-30%; compare within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from jetstream_bench import jetraft_cluster, stop_pids  # noqa: E402

from cluster.runtime.phase_cpu import PHASE_CPU_DIR_ENV, WRITE_INTERVAL_S  # noqa: E402

JSBENCH = REPO_ROOT.parent / "shared" / "bench" / "jsbench.py"


def read_reports(directory: Path, pids: list[int]) -> list[dict[str, Any]]:
    reports = []
    for pid in pids:
        [path] = directory.glob(f"*-{pid}.json")
        reports.append(json.loads(path.read_text()))
    return reports


def wait_for_reports(directory: Path, pids: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(list(directory.glob(f"*-{pid}.json")) for pid in pids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no phase reports in {directory} after {timeout} s")
        time.sleep(0.1)


def per_op(before: dict[str, Any], after: dict[str, Any], ops: float) -> dict[str, float]:
    """us of CPU per operation: the loop thread, the process, and each phase."""
    row = {
        "loop_thread": (after["loop_thread_cpu_ns"] - before["loop_thread_cpu_ns"]) / 1e3 / ops,
        "process": (after["process_cpu_ns"] - before["process_cpu_ns"]) / 1e3 / ops,
    }
    for phase, counts in after["phases"].items():
        spent = counts["cpu_ns"] - before["phases"][phase]["cpu_ns"]
        if spent:
            row[phase] = spent / 1e3 / ops
            row[f"{phase} calls"] = (counts["calls"] - before["phases"][phase]["calls"]) / ops
    return row


def run_workload(workload: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="phase-cpu-") as reports:
        reports_dir = Path(reports)
        os.environ[PHASE_CPU_DIR_ENV] = reports  # every node the cluster starts times its phases
        try:
            with jetraft_cluster() as cluster:
                wait_for_reports(reports_dir, cluster.pids, timeout=10 * WRITE_INTERVAL_S)
                cmd = [
                    sys.executable, str(args.jsbench), "--url", ",".join(cluster.urls),
                    "--replicas", "3", "--seconds", str(args.seconds), "--workloads", workload,
                ]  # fmt: skip
                client = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                try:
                    # the fill (kv and get workloads) comes first: the window opens once it is over
                    time.sleep(args.settle)
                    before = read_reports(reports_dir, cluster.pids)
                    time.sleep(args.window)
                    after = read_reports(reports_dir, cluster.pids)
                    out, err = client.communicate(timeout=args.seconds * 4 + 300)
                finally:
                    stop_pids([client], grace_s=2.0)
        finally:
            os.environ.pop(PHASE_CPU_DIR_ENV, None)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    result = next((row for row in rows if row.get("workload") == workload), None)
    if result is None or not result.get("ops_per_s"):
        raise RuntimeError(f"jsbench gave no result for {workload}: {err[-2000:]}")
    window = after[0]["wall_s"] - before[0]["wall_s"]
    ops = result["ops_per_s"] * window
    return {
        "workload": workload,
        "ops_per_s": result["ops_per_s"],
        "nodes": [per_op(b, a, ops) for b, a in zip(before, after, strict=True)],
    }


def print_table(row: dict[str, Any]) -> None:
    nodes = row["nodes"]
    print(f"\n{row['workload']}: {row['ops_per_s']:,.0f} ops/s; us of CPU per operation")
    print("| phase | " + " | ".join(f"n{i + 1}" for i in range(len(nodes))) + " | all |")
    print("|---" * (len(nodes) + 2) + "|")
    names = [
        "process",
        "loop_thread",
        *sorted({k for node in nodes for k in node} - {"process", "loop_thread"}),
    ]
    for name in names:
        if name.endswith(" calls"):
            continue
        values = [node.get(name, 0.0) for node in nodes]
        print(f"| {name} | " + " | ".join(f"{v:.1f}" for v in values) + f" | {sum(values):.1f} |")
    print(f"\ncalls per operation ({row['workload']})")
    for name in (name for name in names if name.endswith(" calls")):
        values = [node.get(name, 0.0) for node in nodes]
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in values) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", default="pub_async,kv_put,direct_get")
    parser.add_argument("--seconds", type=float, default=8.0, help="jsbench's measuring time per workload")
    parser.add_argument("--settle", type=float, default=4.0, help="seconds before the window opens")
    parser.add_argument("--window", type=float, default=4.0, help="seconds between the two reports")
    parser.add_argument("--jsbench", type=Path, default=JSBENCH)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()
    rows = []
    for workload in args.workloads.split(","):
        row = run_workload(workload, args)
        print_table(row)
        rows.append(row)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
