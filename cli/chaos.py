"""`jetraft chaos run`: a seeded chaos run on a fresh faultable local cluster; `jetraft chaos check`: re-check
a recorded history. See docs/chaos.md."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from chaos.check.history import read_jsonl
from chaos.run.runner import WORKLOADS, RunSettings, make_workload, run
from chaos.run.schedule import FAULTS, GROUPS, parse_faults
from local.cluster import LocalCluster, faultable_cluster

EXIT_VALID, EXIT_INVALID, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


class LocalControl:
    """The chaos runner's `ClusterControl` over a `LocalCluster`'s processes, by PID."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def kill(self, node: str) -> None:
        self.cluster.kill_node(node, signal.SIGKILL)

    def restart(self, node: str) -> None:
        self.cluster.restart_node(node)

    def pause(self, node: str) -> None:
        os.kill(self.cluster.procs[node].pid, signal.SIGSTOP)

    def resume(self, node: str) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.cluster.procs[node].pid, signal.SIGCONT)


# what a node should never log, faults or not (issue 23): counted per node log, lines shown in the report
LOG_PROBLEMS = ("Traceback", "exception was never retrieved")


def node_log_problems(log_dir: Path, shown: int = 5) -> dict[str, dict[str, object]]:
    problems: dict[str, dict[str, object]] = {}
    for log in sorted(log_dir.glob("*.log")):
        lines = [
            line
            for line in log.read_text(errors="replace").splitlines()
            if any(p in line for p in LOG_PROBLEMS)
        ]
        if lines:
            problems[log.stem] = {"count": len(lines), "first": [line[:300] for line in lines[:shown]]}
    return problems


def _faults(text: str) -> list[str]:
    try:
        return parse_faults(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _span(text: str) -> tuple[float, float]:
    low, _, high = text.partition(":")
    try:
        span = (float(low), float(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not MIN:MAX seconds") from None
    if not 0 <= span[0] <= span[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: need 0 <= MIN <= MAX")
    return span


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jetraft chaos", description="Jepsen-style chaos runs on a local cluster"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    faults_help = "comma-separated faults or groups (" + ", ".join(GROUPS) + "): " + ", ".join(FAULTS)
    runner = sub.add_parser("run", help="one seeded run: workload, faults, liveness checks, checkers, report")
    runner.add_argument("--workload", choices=WORKLOADS, required=True)
    runner.add_argument("--faults", type=_faults, default=parse_faults("all"), help=faults_help)
    runner.add_argument(
        "--time", type=float, default=60.0, help="seconds of faults (liveness checks come on top)"
    )
    runner.add_argument("--seed", type=int, default=1)
    runner.add_argument("--nodes", type=int, default=3)
    runner.add_argument("--clients-per-node", type=int, default=2)
    runner.add_argument(
        "--op-timeout", type=float, default=3.0, help="seconds before an operation is indeterminate"
    )
    runner.add_argument(
        "--liveness-bound", type=float, default=20.0, help="seconds every node has to serve again"
    )
    runner.add_argument(
        "--check-time-limit", type=float, default=60.0, help="seconds for the linearizability search"
    )
    runner.add_argument("--keys", type=int, default=5, help="register keys")
    runner.add_argument(
        "--fault-seconds", type=_span, default=(3.0, 8.0), help="how long each fault lasts: MIN:MAX (3:8)"
    )
    runner.add_argument(
        "--quiet-seconds", type=_span, default=(1.0, 4.0), help="pause before each fault: MIN:MAX (1:4)"
    )
    runner.add_argument("--out", help="directory for history.jsonl, report.json and the node logs "
                        "(default: chaos-runs/<workload>-seed<N>-<time>)")  # fmt: skip
    check = sub.add_parser("check", help="run the checkers again on a recorded history.jsonl")
    check.add_argument("--workload", choices=WORKLOADS, required=True)
    check.add_argument("history")
    check.add_argument("--check-time-limit", type=float, default=60.0)
    return parser


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _exit_code(verdict: str | bool | None) -> int:
    return {"valid": EXIT_VALID, True: EXIT_VALID, "invalid": EXIT_INVALID, False: EXIT_INVALID}.get(
        verdict, EXIT_UNKNOWN
    )  # type: ignore[arg-type]


def run_command(args: argparse.Namespace) -> int:
    if args.time <= 0 or args.nodes < 3 or args.clients_per_node < 1 or args.keys < 1:
        print(
            "jetraft chaos: --time, --clients-per-node and --keys must be positive, --nodes at least 3",
            file=sys.stderr,
        )
        return EXIT_USAGE
    settings = RunSettings(
        workload=args.workload,
        faults=args.faults,
        time=args.time,
        seed=args.seed,
        clients_per_node=args.clients_per_node,
        op_timeout=args.op_timeout,
        liveness_bound=args.liveness_bound,
        check_time_limit=args.check_time_limit,
        keys=args.keys,
        fault_seconds=args.fault_seconds,
        quiet_seconds=args.quiet_seconds,
    )
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    out = Path(args.out or f"chaos-runs/{args.workload}-seed{args.seed}-{stamp}")
    out.mkdir(parents=True, exist_ok=True)
    _progress(f"starting {args.nodes} nodes, every link through Toxiproxy; run directory {out}")
    with faultable_cluster(out / "cluster", nodes=args.nodes, mirror_nodes=0) as cluster:
        assert cluster.toxiproxy_url is not None
        urls = {spec.name: spec.client_url for spec in cluster.specs}
        report = asyncio.run(
            run(settings, urls, LocalControl(cluster), cluster.toxiproxy_url, out, _progress)
        )
    summary = report.to_json()
    summary["node_log_problems"] = node_log_problems(out / "cluster" / "logs")
    (out / "report.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    shown = ("verdict", "liveness_ok", "operations", "checks", "harness_errors", "node_log_problems")
    print(json.dumps({name: summary[name] for name in shown}, indent=2))
    print(
        f"report: {out / 'report.json'}; history: {out / 'history.jsonl'}; node logs: {out / 'cluster' / 'logs'}"
    )
    return _exit_code(report.verdict)


def check_command(args: argparse.Namespace) -> int:
    settings = RunSettings(workload=args.workload, faults=[], time=0, seed=0)
    checks = make_workload(settings).check(read_jsonl(args.history), args.check_time_limit)
    print(json.dumps(checks, indent=2))
    return _exit_code(checks.get("valid"))


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        return run_command(args)
    return check_command(args)
