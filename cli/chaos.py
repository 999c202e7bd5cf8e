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
from typing import Any

from chaos.check.history import read_jsonl
from chaos.run import table
from chaos.run.runner import WORKLOADS, RunSettings, make_workload, run
from chaos.run.schedule import FAULTS, GROUPS, LOST_UNSYNCED, parse_faults
from local.cluster import LocalCluster, faultable_cluster
from storage.rocks_engine import SYNC_POINTS_ENV

EXIT_VALID, EXIT_INVALID, EXIT_USAGE, EXIT_UNKNOWN = 0, 1, 2, 3


class LocalControl:
    """The chaos runner's `ClusterControl` over a `LocalCluster`'s processes, by PID."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def kill(self, node: str) -> None:
        self.cluster.kill_node(node, signal.SIGKILL)

    def restart(self, node: str) -> None:
        self.cluster.restart_node(node)

    def data_dir(self, node: str) -> Path:
        return self.cluster.data_dir / node

    def pause(self, node: str) -> None:
        # the whole node: a several-worker node's supervisor and every worker (node_pids)
        for pid in self.cluster.node_pids(node):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self, node: str) -> None:
        for pid in self.cluster.node_pids(node):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def health_problem(self, node: str) -> str | None:
        status, body = self.cluster.health_report(node)
        if status == 200:
            return None
        if body is None:
            return "/healthz does not answer"
        return str(body.get("error") or body.get("problems") or f"/healthz {status}")


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


def _seeds(text: str) -> list[int]:
    """`1:10` (inclusive) or `1,5,9`."""
    try:
        if ":" in text:
            first, last = (int(part) for part in text.split(":", 1))
            seeds = list(range(first, last + 1))
        else:
            seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not FIRST:LAST or a comma-separated list of seeds"
        ) from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"{text!r} names no seed")
    return seeds


def _workloads(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"workloads {text!r}: each one of {', '.join(WORKLOADS)}")
    return names


def _fault_sets(text: str) -> list[str]:
    """Fault sets separated by `/`, each a `--faults` value: `kill/pause/partition/latency`."""
    sets = [part.strip() for part in text.split("/") if part.strip()]
    for part in sets:
        _faults(part)
    if not sets:
        raise argparse.ArgumentTypeError("no fault set given")
    return sets


def _run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--time", type=float, default=60.0, help="seconds of faults (liveness checks come on top)"
    )
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--clients-per-node", type=int, default=2)
    parser.add_argument(
        "--op-timeout", type=float, default=3.0, help="seconds before an operation is indeterminate"
    )
    parser.add_argument(
        "--liveness-bound", type=float, default=20.0, help="seconds every node has to serve again"
    )
    parser.add_argument(
        "--check-time-limit", type=float, default=60.0, help="seconds for the linearizability search"
    )
    parser.add_argument("--keys", type=int, default=5, help="register keys")
    parser.add_argument(
        "--fault-seconds", type=_span, default=(3.0, 8.0), help="how long each fault lasts: MIN:MAX (3:8)"
    )
    parser.add_argument(
        "--quiet-seconds", type=_span, default=(1.0, 4.0), help="pause before each fault: MIN:MAX (1:4)"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jetraft chaos", description="Jepsen-style chaos runs on a local cluster"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    faults_help = "comma-separated faults or groups (" + ", ".join(GROUPS) + "): " + ", ".join(FAULTS)
    runner = sub.add_parser("run", help="one seeded run: workload, faults, liveness checks, checkers, report")
    runner.add_argument("--workload", choices=WORKLOADS, required=True)
    runner.add_argument("--faults", type=_faults, default=parse_faults("all"), help=faults_help)
    runner.add_argument("--seed", type=int, default=1)
    runner.add_argument("--out", help="directory for history.jsonl, report.json and the node logs "
                        "(default: chaos-runs/<workload>-seed<N>-<time>)")  # fmt: skip
    _run_options(runner)
    matrix = sub.add_parser(
        "matrix", help="every workload x fault set x seed, one fresh cluster per run, a table"
    )
    matrix.add_argument("--workloads", type=_workloads, default=list(WORKLOADS), help="queue,register")
    matrix.add_argument("--fault-sets", type=_fault_sets, default=_fault_sets("kill/pause/partition/latency/all"),
                        help="fault sets separated by '/', each a --faults value (kill/pause/partition/latency/all)")  # fmt: skip
    matrix.add_argument("--seeds", type=_seeds, default=_seeds("1:3"), help="FIRST:LAST or a list (1:3)")
    matrix.add_argument(
        "--out", help="directory for the runs and table.md (default: chaos-runs/matrix-<time>)"
    )
    _run_options(matrix)
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


def _settings(args: argparse.Namespace, workload: str, faults: list[str], seed: int) -> RunSettings:
    return RunSettings(
        workload=workload,
        faults=faults,
        time=args.time,
        seed=seed,
        clients_per_node=args.clients_per_node,
        op_timeout=args.op_timeout,
        liveness_bound=args.liveness_bound,
        check_time_limit=args.check_time_limit,
        keys=args.keys,
        fault_seconds=args.fault_seconds,
        quiet_seconds=args.quiet_seconds,
    )


def _bad_settings(args: argparse.Namespace) -> bool:
    if args.time <= 0 or args.nodes < 3 or args.clients_per_node < 1 or args.keys < 1:
        print(
            "jetraft chaos: --time, --clients-per-node and --keys must be positive, --nodes at least 3",
            file=sys.stderr,
        )
        return True
    return False


def run_one(settings: RunSettings, nodes: int, out: Path) -> dict[str, Any]:
    """One run on a fresh cluster whose data and logs go under `out`; its report, as written to report.json."""
    out.mkdir(parents=True, exist_ok=True)
    _progress(f"starting {nodes} nodes, every link through Toxiproxy; run directory {out}")
    # lost-unsynced cuts a killed node's logs back to its last fsync, which its nodes must record
    records_sync_points = LOST_UNSYNCED in settings.faults
    previous = os.environ.get(SYNC_POINTS_ENV)
    if records_sync_points:
        os.environ[SYNC_POINTS_ENV] = "1"
    try:
        with faultable_cluster(out / "cluster", nodes=nodes, mirror_nodes=0) as cluster:
            assert cluster.toxiproxy_url is not None
            urls = {spec.name: spec.client_url for spec in cluster.specs}
            report = asyncio.run(
                run(settings, urls, LocalControl(cluster), cluster.toxiproxy_url, out, _progress)
            )
    finally:
        if records_sync_points:
            if previous is None:
                os.environ.pop(SYNC_POINTS_ENV, None)
            else:
                os.environ[SYNC_POINTS_ENV] = previous
    summary = report.to_json()
    summary["node_log_problems"] = node_log_problems(out / "cluster" / "logs")
    (out / "report.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def run_command(args: argparse.Namespace) -> int:
    if _bad_settings(args):
        return EXIT_USAGE
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    out = Path(args.out or f"chaos-runs/{args.workload}-seed{args.seed}-{stamp}")
    summary = run_one(_settings(args, args.workload, args.faults, args.seed), args.nodes, out)
    shown = ("verdict", "liveness_ok", "operations", "checks", "harness_errors", "node_log_problems")
    print(json.dumps({name: summary[name] for name in shown}, indent=2))
    print(
        f"report: {out / 'report.json'}; history: {out / 'history.jsonl'}; node logs: {out / 'cluster' / 'logs'}"
    )
    return _exit_code(summary["verdict"])


def matrix_command(args: argparse.Namespace) -> int:
    """Every workload x fault set x seed, one fresh cluster each; the table as Markdown and JSON."""
    if _bad_settings(args):
        return EXIT_USAGE
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    out = Path(args.out or f"chaos-runs/matrix-{stamp}")
    rows: list[dict[str, Any]] = []
    for workload in args.workloads:
        for label in args.fault_sets:
            for seed in args.seeds:
                run_dir = out / f"{workload}-{label}-seed{seed}"
                try:
                    summary = run_one(
                        _settings(args, workload, parse_faults(label), seed), args.nodes, run_dir
                    )
                except Exception as exc:  # one broken run must not lose the others' rows
                    summary = {"settings": {"workload": workload, "seed": seed}, "verdict": f"error: {exc}"}
                rows.append(table.row(summary, label))
                _progress(table.markdown(rows[-1:]).splitlines()[-1])
    text = table.markdown(rows)
    (out / "table.md").write_text(text + "\n", encoding="utf-8")
    (out / "rows.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    print(text)
    print(f"\ntable: {out / 'table.md'}; runs: {out}")
    verdicts = {r["verdict"] for r in rows}
    if verdicts <= {"valid"}:
        return EXIT_VALID
    return (
        EXIT_INVALID
        if "invalid" in verdicts or any(v.startswith("error") for v in verdicts)
        else EXIT_UNKNOWN
    )


def check_command(args: argparse.Namespace) -> int:
    settings = RunSettings(workload=args.workload, faults=[], time=0, seed=0)
    checks = make_workload(settings).check(read_jsonl(args.history), args.check_time_limit)
    print(json.dumps(checks, indent=2))
    return _exit_code(checks.get("valid"))


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        return run_command(args)
    if args.command == "matrix":
        return matrix_command(args)
    return check_command(args)
